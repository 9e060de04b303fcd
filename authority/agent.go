package authority

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
)

// Conn is a node's control channel to the controller, as a transport
// provides it.
type Conn interface {
	// Send delivers an event to the controller and returns its answer (a
	// *RefusedError for a refused one).
	Send(ctx context.Context, ev Event) error
	// Msgs yields the controller's messages to this node; it is closed
	// when the channel closes.
	Msgs() <-chan Msg
	// Close says goodbye and closes the channel.
	Close() error
}

// AgentHost is what an Agent asks of the node's host.
type AgentHost interface {
	// Progress is where the node's chain is acknowledged up to, for
	// heartbeats and releases.
	Progress() chain.Position
	// Recover recovers the last holder's chain up to order.Required,
	// writing through Guard with order.Grant.Revision, and returns the
	// frontier reached. The node admits nothing meanwhile.
	Recover(ctx context.Context, order RecoverMsg) (chain.Position, error)
	// Release drains every stream the node holds (through Finish) for a
	// handoff and returns where its chain ends.
	Release(ctx context.Context) (chain.Position, error)
	// Frontier says how far the node has recovered (materialized) star's
	// chain, and whether its storage can serve.
	Frontier(star string) (chain.Position, bool)
}

// RecoverableHost is a Host that can also say how far the node can
// recover star's chain, judged from its local image and the object
// storage it reaches: possibly beyond its Frontier, possibly short of the
// requirement, in which case the node does not offer. The agent asks
// while a requirement waits for the node's offer; an error means it
// cannot say, and the node does not offer yet.
//
// A Host without it whose storage is usable can recover whatever the last
// holder acknowledged: every acknowledged record is in the object storage,
// and RecoverChain fences and settles it.
type RecoverableHost interface {
	AgentHost
	Recoverable(ctx context.Context, star string) (chain.Position, error)
}

// AgentOptions tunes an Agent. The zero value works.
type AgentOptions struct {
	// HeartbeatEvery is how often the holder heartbeats. 0 means 1 s;
	// between 1 ms and 1 min.
	HeartbeatEvery time.Duration
	// Clock drives heartbeats and the decision delay. Nil means the wall
	// clock.
	Clock clock.Clock
	// Logger receives grants and recoveries. Nil discards.
	Logger *slog.Logger
	// Pinger, when set, runs the node's direct health links: every
	// PingEvery it is called for each peer of the current topology
	// (Runtime.HealthPeers) with the token the link is bound to, and its
	// answer (nil: a completed round trip) feeds the runtime's health.
	// It must honour ctx, which ends at the next ping period.
	Pinger func(ctx context.Context, peer string, token Token) error
	// Guard, when set, follows the node's authority: its writes are
	// guarded with the grant's (or the recovery placement's) revision,
	// and refused while the node holds neither. Build the host's minter,
	// index and star over it.
	Guard *Guarded
}

// Agent runs a node's Runtime over a Conn: it connects, applies the
// controller's messages, heartbeats while holding a grant, offers when a
// grant ends, recovers and releases through the Host. Admit is the gate a
// host puts in front of every write.
type Agent struct {
	conn Conn
	host AgentHost
	opts AgentOptions
	mu   sync.Mutex
	rt   *Runtime
	// retry holds events a failed send left, sent again each heartbeat
	// period.
	retry []Event
	// logged is the last grant logged.
	logged Grant
}

// NewAgent returns an agent of rt.
func NewAgent(rt *Runtime, conn Conn, host AgentHost, opts AgentOptions) (*Agent, error) {
	if err := required(arg{"rt", rt == nil}, arg{"conn", conn == nil}, arg{"host", host == nil}); err != nil {
		return nil, err
	}
	if opts.HeartbeatEvery == 0 {
		opts.HeartbeatEvery = time.Second
	}
	if opts.HeartbeatEvery < time.Millisecond || opts.HeartbeatEvery > time.Minute {
		return nil, &cutline.ConfigError{Field: "HeartbeatEvery", Value: opts.HeartbeatEvery, Reason: "must lie in [1ms, 1m]"}
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Agent{conn: conn, host: host, opts: opts, rt: rt}, nil
}

// Admit is nil when the node may admit a write now.
func (a *Agent) Admit() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rt.Admit(a.opts.Clock.Now())
}

// Grant returns the grant held.
func (a *Agent) Grant() Grant {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rt.Grant()
}

// HealthyPeers returns how many of HealthPeers have a link that is up
// (Runtime.HealthyPeers).
func (a *Agent) HealthyPeers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rt.HealthyPeers()
}

// HealthPeers returns the peers the node keeps a direct health link with
// under the topology the controller last described, and the token those
// links are bound to (Runtime.HealthPeers): the token a host's health
// handler answers for (authhttp.NewHealthHandler's token). It is
// (nil, 0) before any topology, and while no node holds the grant.
func (a *Agent) HealthPeers() ([]string, Token) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rt.HealthPeers()
}

// Run connects and serves the control channel until ctx ends or the
// channel closes.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	ev := Connect{Node: a.rt.cfg.Node, Caps: a.rt.cfg.Caps, Token: a.rt.Grant().Token}
	a.mu.Unlock()
	if err := a.conn.Send(ctx, ev); err != nil {
		return err
	}
	// Heartbeats keep their own beat: messages in between do not delay
	// them. The loop also wakes when the runtime has something due
	// (Runtime.NextTick) and after every round of pings, so a health
	// window running out, a concern's retry, the self-fence and an offer
	// happen on time, not at the next heartbeat.
	next := a.opts.Clock.Now().Add(a.opts.HeartbeatEvery)
	kick := make(chan struct{}, 1)
	if a.opts.Pinger != nil {
		var pw sync.WaitGroup
		defer pw.Wait()
		pctx, cancel := context.WithCancel(ctx)
		defer cancel() // runs before the Wait
		pw.Go(func() { a.pingLoop(pctx, kick) })
	}
	for {
		wake := next
		a.mu.Lock()
		if t := a.rt.NextTick(); !t.IsZero() && t.Before(wake) {
			wake = t
		}
		a.mu.Unlock()
		t := a.opts.Clock.NewTimer(max(wake.Sub(a.opts.Clock.Now()), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-kick:
			t.Stop()
		case m, ok := <-a.conn.Msgs():
			t.Stop()
			if !ok {
				return errors.New("authority: the control channel closed")
			}
			a.mu.Lock()
			// The runtime's clock first: a message is stamped with the
			// time it arrived.
			_ = a.rt.Step(Tick{Now: a.opts.Clock.Now()})
			if err := a.rt.Step(m); err != nil {
				a.opts.Logger.Warn("authority: message refused", "kind", m.Kind(), "err", err)
			}
			a.mu.Unlock()
		case <-t.C():
			if now := a.opts.Clock.Now(); !now.Before(next) {
				next = now.Add(a.opts.HeartbeatEvery)
				progress := a.host.Progress()
				a.mu.Lock()
				_ = a.rt.Step(HeartbeatDue{Progress: progress})
				a.mu.Unlock()
			}
		}
		if err := a.flush(ctx); err != nil {
			return err
		}
	}
}

// pingLoop pings the node's health peers every PingEvery until ctx ends,
// and kicks the run loop after each round. It logs a link that comes up
// (at info) or goes down (as a warning), once per change.
func (a *Agent) pingLoop(ctx context.Context, kick chan<- struct{}) {
	type seen struct {
		token Token
		ok    bool
	}
	var mu sync.Mutex
	links := map[string]seen{}
	for {
		t := a.opts.Clock.NewTimer(PingEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		a.mu.Lock()
		peers, token := a.rt.HealthPeers()
		a.mu.Unlock()
		pctx, cancel := context.WithCancel(ctx)
		stop := a.opts.Clock.AfterFunc(PingEvery, cancel)
		var wg sync.WaitGroup
		for _, p := range peers {
			wg.Go(func() {
				err := a.opts.Pinger(pctx, p, token)
				a.mu.Lock()
				_ = a.rt.Step(PingResult{Peer: p, Token: token, OK: err == nil, Now: a.opts.Clock.Now()})
				a.mu.Unlock()
				mu.Lock()
				was, known := links[p]
				links[p] = seen{token, err == nil}
				mu.Unlock()
				switch {
				case err == nil && (!was.ok || was.token != token):
					a.opts.Logger.Info("authority: health link up", "peer", p, "token", token)
				case err != nil && (was.ok || !known):
					a.opts.Logger.Warn("authority: health link down", "peer", p, "token", token, "err", err)
				}
			})
		}
		wg.Wait()
		stop.Stop()
		cancel()
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// applyState points the guard at what the node may write under st, and
// logs a new grant.
func (a *Agent) applyState(st RuntimeState) {
	if a.opts.Guard != nil {
		a.opts.Guard.Set(st.Revision)
	}
	// A new grant at info; its renewals (every heartbeat) at debug.
	if g := st.Grant; g.Token != 0 && g.Token != a.logged.Token {
		a.opts.Logger.Info("authority: grant", "token", g.Token, "deadline", g.Deadline)
	} else if g.Token != 0 && !g.Deadline.Equal(a.logged.Deadline) {
		a.opts.Logger.Debug("authority: grant renewed", "token", g.Token, "deadline", g.Deadline)
	}
	a.logged = st.Grant
}

// flushPasses bounds the passes of one flush: a recovery or a release
// that progressed is followed by another pass (to send what it led to),
// but a host whose answers never settle cannot keep the agent from its
// channel.
const flushPasses = 4

// flush ticks the runtime and does what it asks.
func (a *Agent) flush(ctx context.Context) error {
	for range flushPasses {
		progressed, err := a.flushOnce(ctx)
		if err != nil || !progressed {
			return err
		}
	}
	return nil
}

// flushOnce is one pass of flush; it reports whether a recovery or a
// release progressed.
func (a *Agent) flushOnce(ctx context.Context) (bool, error) {
	a.mu.Lock()
	_ = a.rt.Step(Tick{Now: a.opts.Clock.Now()})
	q, awaiting := a.rt.Awaiting()
	a.mu.Unlock()
	if awaiting {
		// The host is asked without the lock: Admit never waits on it.
		star := q.Required.Star
		pos, usable := a.host.Frontier(star)
		var rec Required // what the node can recover; zero when it cannot say
		if rh, judges := a.host.(RecoverableHost); judges {
			if p, err := rh.Recoverable(ctx, star); err != nil {
				a.opts.Logger.Warn("authority: how far the node can recover is unknown", "star", star, "err", err)
			} else {
				rec = Required{Star: star, Pos: p}
			}
		} else if usable && pos.Less(q.Required.Pos) {
			rec = q.Required
		} else {
			rec = Required{Star: star, Pos: pos}
		}
		a.mu.Lock()
		if now, ok := a.rt.Awaiting(); ok && now.Token == q.Token && now.Required == q.Required {
			_ = a.rt.Step(FrontierReport{Star: star, Pos: pos, Usable: usable})
			_ = a.rt.Step(RecoverableReport{Star: rec.Star, Pos: rec.Pos})
			_ = a.rt.Step(Tick{Now: a.opts.Clock.Now()})
		}
	} else {
		a.mu.Lock()
	}
	rd := a.rt.Ready()
	a.rt.Advance(rd)
	if rd.State != nil {
		a.applyState(*rd.State)
	}
	pending := append(a.retry, rd.Events...)
	a.retry = nil
	a.mu.Unlock()
	if hb := rd.Heartbeat; hb != nil {
		// Best effort: a lost heartbeat is superseded by the next.
		if err := a.conn.Send(ctx, *hb); err != nil && ctx.Err() == nil {
			a.opts.Logger.Warn("authority: heartbeat", "err", err)
		}
	}
	for i, ev := range pending {
		err := a.conn.Send(ctx, ev)
		switch {
		case err == nil, errors.Is(err, ErrRefused):
		case ctx.Err() != nil:
			return false, nil
		default:
			// Transient (the controller is being re-elected, the network
			// dropped): keep it and the rest for the next period.
			a.opts.Logger.Warn("authority: send failed; retrying", "event", ev.event(), "err", err)
			a.mu.Lock()
			a.retry = append(a.retry, pending[i:]...)
			a.mu.Unlock()
			return false, nil
		}
	}
	progressed := false
	if rd.Recover != nil {
		// A failure is retried at the next pass that ticks.
		pos, err := a.host.Recover(ctx, *rd.Recover)
		if err != nil {
			a.opts.Logger.Warn("authority: recovery", "err", err)
		} else {
			a.mu.Lock()
			_ = a.rt.Step(FrontierReport{Star: rd.Recover.Required.Star, Pos: pos, Usable: true})
			a.mu.Unlock()
			a.opts.Logger.Info("authority: recovered", "star", rd.Recover.Required.Star, "frontier", pos)
			// Go round again only when the recovery reached the
			// requirement: a host that keeps stopping short is asked again
			// at the next period, never in a loop.
			progressed = rd.Recover.Required.Covers(rd.Recover.Required.Star, pos)
		}
	}
	if rd.Release {
		pos, err := a.host.Release(ctx)
		if err != nil {
			a.opts.Logger.Warn("authority: release", "err", err)
		} else {
			a.mu.Lock()
			_ = a.rt.Step(ReleaseDone{Progress: pos})
			a.mu.Unlock()
			progressed = true
		}
	}
	return progressed, nil
}
