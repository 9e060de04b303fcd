package authority

import (
	"context"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// ElectorConfig holds what an Elector requires.
type ElectorConfig struct {
	// Store holds the election and the domain's state, under Root (""
	// or ending in '/'), as for Campaign.
	Store metastore.Store
	Root  string
	// Node is this process's name in the election record.
	Node string
	// Controller configures the controller of every term; its Domain is
	// the domain campaigned for.
	Controller ControllerConfig
	// Send delivers the controller's messages to the nodes: NewDriver's
	// send, with the same rules (it must not block and must not call the
	// driver).
	Send func(Msg)
}

// ElectorOptions tunes an Elector. The zero value works.
type ElectorOptions struct {
	// Attach, when set, is called with each term's driver before it
	// runs, and with nil once it stopped, before the election is given
	// up: how a host points its transports at the controller of the
	// moment (Local.SetDriver, authhttp's Server.SetDriver). It must not
	// block.
	Attach func(*Driver)
	// SessionTTL is the TTL of each term's metastore session: how long
	// the election outlives a process that stopped without resigning.
	// 0 means 10 s; between 1 s and 1 h.
	SessionTTL time.Duration
	// Retry is the pause before campaigning again after a term ended or
	// failed to start. Zero fields mean Min 100 ms, Max 5 s; it starts
	// again from Min after a term in which the process was elected.
	Retry clock.Backoff
	// Cleanup bounds each clean-up at the end of a term (giving the
	// election up, closing the session), which runs even once ctx ended.
	// 0 means 5 s; between 1 ms and 1 min.
	Cleanup time.Duration
	// Clock times the pause, the controller and its driver's ticks. Nil
	// means the wall clock.
	Clock clock.Clock
	// Logger receives the terms and, through the driver, the durable
	// transitions. Nil discards.
	Logger *slog.Logger
}

// The defaults of ElectorOptions.
const (
	defaultElectorSessionTTL = 10 * time.Second
	defaultElectorCleanup    = 5 * time.Second
	defaultElectorRetryMin   = 100 * time.Millisecond
	defaultElectorRetryMax   = 5 * time.Second
)

// Elector is a domain's controller for a host: Run campaigns for the
// election (Campaign) on a fresh session, loads the durable state
// (Election.Load), drives a Controller through a Driver until the
// election is lost, gives it up, and campaigns again, until its context
// ends. Several processes may run an Elector for the same domain: one is
// elected at a time, and the others take over when it stops or loses
// its session.
//
// A new controller assumes the worst about its predecessor (see
// NewController): it grants nothing before a whole lease has passed,
// unless the domain was never granted (Vacant with token 0), when no
// former holder can still be writing. The wait is logged, so that it
// does not look like a hang.
//
// The host owns the transports: Send carries the controller's messages,
// and Attach points the transports at each term's driver:
//
//	local := authority.NewLocal()
//	e, err := authority.NewElector(authority.ElectorConfig{
//		Store: store, Node: "ctl-1", Controller: authority.ControllerConfig{Domain: "orders"}, Send: local.Send,
//	}, authority.ElectorOptions{Attach: local.SetDriver})
//	go e.Run(ctx)
type Elector struct {
	cfg  ElectorConfig
	opts ElectorOptions
	log  *slog.Logger
	seed uint64 // the retries' jitter, keyed on the node

	mu  sync.Mutex
	drv *Driver // the current term's, nil while none
}

// NewElector returns an elector; Run starts it.
func NewElector(cfg ElectorConfig, opts ElectorOptions) (*Elector, error) {
	if _, err := newKeys(cfg.Root, cfg.Controller.Domain); err != nil {
		return nil, err
	}
	if err := epoch.ValidateName("node", cfg.Node); err != nil {
		return nil, err
	}
	if err := required(arg{"Store", cfg.Store == nil}, arg{"Send", cfg.Send == nil}); err != nil {
		return nil, err
	}
	if err := cfg.Controller.validate(); err != nil {
		return nil, err
	}
	if opts.SessionTTL == 0 {
		opts.SessionTTL = defaultElectorSessionTTL
	}
	if opts.SessionTTL < time.Second || opts.SessionTTL > time.Hour {
		return nil, &cutline.ConfigError{Field: "SessionTTL", Value: opts.SessionTTL, Reason: "must lie in [1s, 1h]"}
	}
	if err := opts.Retry.Validate("Retry"); err != nil {
		return nil, err
	}
	opts.Retry = opts.Retry.Or(clock.Backoff{Min: defaultElectorRetryMin, Max: defaultElectorRetryMax})
	if opts.Cleanup == 0 {
		opts.Cleanup = defaultElectorCleanup
	}
	if opts.Cleanup < time.Millisecond || opts.Cleanup > time.Minute {
		return nil, &cutline.ConfigError{Field: "Cleanup", Value: opts.Cleanup, Reason: "must lie in [1ms, 1m]"}
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{cfg: cfg, opts: opts, log: opts.Logger.With("domain", cfg.Controller.Domain), seed: seedOf(cfg.Node)}, nil
}

// Driver returns the driver of the current term, nil while the process
// is not elected: how an operator in the process requests a handoff
// (Driver.Step with a HandoffRequest).
func (e *Elector) Driver() *Driver {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.drv
}

// Run campaigns, drives the controller while elected and campaigns
// again, until ctx ends. Each term's clean-up (detaching the driver,
// giving the election up, closing the session) completes before Run
// returns. Run is not to be called again before it returned.
func (e *Elector) Run(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		elected, err := e.term(ctx)
		if ctx.Err() != nil {
			return
		}
		if elected {
			attempt = 0
		}
		e.log.Warn("authority: out of office; campaigning again", "err", err)
		if e.opts.Retry.Sleep(ctx, e.opts.Clock, attempt, e.seed) != nil {
			return
		}
	}
}

// term is one election: campaign on a new session, load the state, drive
// the controller until ctx ends or the election is lost. It reports
// whether the process was elected.
func (e *Elector) term(ctx context.Context) (elected bool, _ error) {
	sess, err := e.cfg.Store.NewSession(ctx, e.opts.SessionTTL)
	if err != nil {
		return false, err
	}
	defer e.cleanup(ctx, sess.Close)
	el, err := Campaign(ctx, e.cfg.Store, e.cfg.Root, e.cfg.Controller.Domain, e.cfg.Node, sess)
	if err != nil {
		return false, err
	}
	defer e.cleanup(ctx, el.Resign)
	st, err := el.Load(ctx)
	if err != nil {
		return true, err
	}
	now, fresh := e.opts.Clock.Now(), st.Phase == Vacant && st.Token == 0
	if fresh {
		// Never granted: no former holder may still write, nothing to
		// wait out.
		now = now.Add(-e.cfg.Controller.Lease)
	}
	ctl, err := NewController(e.cfg.Controller, st, now)
	if err != nil {
		return true, err
	}
	d, err := NewDriver(el, ctl, e.cfg.Send, DriverOptions{Clock: e.opts.Clock, Logger: e.opts.Logger})
	if err != nil {
		return true, err
	}
	e.attach(d)
	defer e.attach(nil)
	e.log.Info("authority: controller elected", "node", e.cfg.Node, "state", st.String(), "term", st.Term)
	if !fresh {
		// A former holder may still be writing under a grant whose
		// deadline this controller cannot know: it grants nothing before
		// a whole lease has passed.
		e.log.Info("authority: waiting out the former grant before granting anew", "state", st.String(),
			"lease", e.cfg.Controller.Lease, "until", now.Add(e.cfg.Controller.Lease).Format(time.RFC3339))
	}
	return true, d.Run(ctx)
}

// attach makes d the current driver (nil: none) and tells the host.
func (e *Elector) attach(d *Driver) {
	e.mu.Lock()
	e.drv = d
	e.mu.Unlock()
	if e.opts.Attach != nil {
		e.opts.Attach(d)
	}
}

// cleanup runs f on a context of its own, which ctx's end does not
// cancel: Cleanup on the clock does.
func (e *Elector) cleanup(ctx context.Context, f func(context.Context) error) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := e.opts.Clock.AfterFunc(e.opts.Cleanup, cancel)
	defer t.Stop()
	defer cancel()
	if err := f(cctx); err != nil {
		e.log.Warn("authority: clean-up after the term", "err", err)
	}
}

// seedOf keys a retry's jitter on a name, so that processes retrying at
// once spread out.
func seedOf(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}
