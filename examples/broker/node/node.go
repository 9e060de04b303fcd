package node

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// NodeConfig is what a broker node is built from.
type NodeConfig struct {
	// Name is the node's identity to the controller, and its star's.
	Name string
	// Domain is the authority domain of the broker cluster; Root the
	// metastore root of everything the node keeps ("" or ending in '/').
	Domain, Root string
	// Store is the shared metastore; the node writes through an
	// authority.Guarded view of it that follows its grant.
	Store metastore.Store
	// Buckets are the zones, in zone order; Constants those of the
	// node's epochs (Buckets is filled in).
	Buckets   []objstore.Bucket
	Constants epoch.Constants
	// Dial opens the node's control channel to the controller.
	Dial dialFunc
	// SessionTTL is the TTL of each star's metastore session.
	SessionTTL time.Duration
	// HeartbeatEvery and DecisionDelay time the agent and its runtime.
	HeartbeatEvery, DecisionDelay time.Duration
	// Poll is how often the node compares its star with its grant.
	Poll time.Duration
	// Pinger, when set, runs the node's direct health links
	// (AgentOptions.Pinger) and the node votes: its reports count in the
	// controller's fast fence. Nil: no links and no vote.
	Pinger func(ctx context.Context, peer string, token authority.Token) error
	// Producers bounds each stream's producer table; Streams how the
	// holder serves its streams (batch.DedupAppenderOptions: the streams
	// it leads at once, how long a produce waits for a deferred open, when
	// the tables are saved; Clock nil means the node's). The node sets
	// the hooks and the logger.
	Producers batch.DedupOptions
	Streams   batch.DedupAppenderOptions
	// Lifecycle times the holder's lifecycle passes (lifecycle.go).
	Lifecycle LifecycleConfig
	Clock     clock.Clock
	Logger    *slog.Logger
}

// restartAfter is the wait before a star that failed to start is
// started again.
const restartAfter = time.Second

// Errors of a node that the server answers with 503.
var (
	errStarting     = errors.New("broker: this node holds the grant; its star is starting")
	errShuttingDown = errors.New("broker: this node is shutting down")
)

// Node is one broker: an authority.Agent that follows the grant of the
// cluster's domain, and, while it holds the grant, a lease.Star that
// leads the streams produced to it. It is the agent's authority.AgentHost.
type Node struct {
	Config  NodeConfig
	log     *slog.Logger
	clk     clock.Clock
	Metrics *metrics
	caps    authority.Capabilities
	consts  epoch.Constants

	guard   *authority.Guarded
	minter  *epoch.Minter
	fencer  *fence.Fencer
	refs    *settle.RefIndex
	settler *settle.Settler
	// chunks reads the streams, from segments and flights alike;
	// compactor rewrites flights into segments (lifecycle.go).
	chunks    *settle.StreamReader
	compactor *settle.Compactor
	health    http.Handler // answers the peers' pings (authhttp.RouteHealth)

	link *authority.Connector // the control channel to the controller

	agentStop, pollStop, lifecycleStop context.CancelFunc
	agentDone, pollDone, lifecycleDone chan struct{}
	LifecyclePasses                    atomic.Uint64

	mu        sync.Mutex
	hold      *Holding // the star of the grant held; nil when none runs
	progress  chain.Position
	recovered map[string]chain.Position // frontiers reached by Recover
	granted   authority.Token           // the grant last seen held, for the metrics
	retryAt   time.Time                 // no star starts before, after one failed to
	closing   bool
	rebuilds  map[string]batch.RebuildInfo // how each stream's producers were last rebuilt
}

// NewNode builds a node's parts over a Guarded view of the store.
func NewNode(cfg NodeConfig) (*Node, error) {
	if _, err := batch.NewDedup(cfg.Producers); err != nil {
		return nil, err
	}
	if err := cfg.Lifecycle.validate(); err != nil {
		return nil, err
	}
	n := &Node{Config: cfg, log: cfg.Logger.With("node", cfg.Name), clk: clock.Or(cfg.Clock), recovered: map[string]chain.Position{},
		rebuilds: map[string]batch.RebuildInfo{},
		// A node that runs no health links has nothing to vote with.
		caps: authority.Capabilities{Vote: cfg.Pinger != nil, Storage: true, Promotable: true}}
	n.Metrics = newMetrics(
		n.ofStar(func(s *lease.Star) float64 { st := s.Stats(); return float64(st.Submitted - st.Released) }),
		n.undecidedAge, func() float64 { return float64(n.link.HealthyPeers()) },
		n.ofStar(func(s *lease.Star) float64 { return float64(s.AbsorbStats().Pending) }))
	var err error
	if n.health, err = authhttp.NewHealthHandler(cfg.Name, n.HealthToken, authhttp.HealthOptions{Logger: n.log}); err != nil {
		return nil, err
	}
	if n.guard, err = authority.NewGuarded(cfg.Store, cfg.Root, cfg.Domain); err != nil {
		return nil, err
	}
	if n.link, err = n.connector(); err != nil {
		return nil, err
	}
	buckets := n.Metrics.counting(cfg.Buckets)
	n.consts = cfg.Constants
	n.consts.Buckets = chain.Names(buckets...)
	zones, err := chain.NewZones(buckets...)
	if err == nil {
		err = n.consts.Validate()
	}
	if err != nil {
		return nil, err
	}
	if n.minter, err = epoch.NewMinter(n.guard, epoch.Options{Root: cfg.Root, Identity: cfg.Name, Clock: n.clk, Logger: n.log}); err != nil {
		return nil, err
	}
	if n.fencer, err = fence.New(n.minter, zones, fence.Options{Identity: cfg.Name, Clock: n.clk, Logger: n.log}); err != nil {
		return nil, err
	}
	if n.refs, err = settle.NewRefIndex(n.guard, cfg.Root, Locate); err != nil {
		return nil, err
	}
	n.refs.WithClock(cmp.Or(cfg.Lifecycle.Clock, n.clk)) // page times, for -retention-age
	if n.settler, err = settle.New(n.minter, zones, n.refs, settle.Options{Fencer: n.fencer, Logger: n.log}); err != nil {
		return nil, err
	}
	if n.chunks, err = settle.NewStreamReader(n.minter, zones, n.refs, settle.StreamReaderOptions{Logger: n.log}); err != nil {
		return nil, err
	}
	// The compactor's identity, in its segments' keys, is the node's.
	if n.compactor, err = settle.NewCompactor(n.minter, zones, n.refs, cfg.Name, settle.CompactorOptions{Logger: n.log}); err != nil {
		return nil, err
	}
	return n, nil
}

// connector builds the node's control channel to the controller, dialed
// with Config.Dial. Its agents write through the node's Guarded store
// and, with a Pinger, run the node's health links.
func (n *Node) connector() (*authority.Connector, error) {
	agent := authority.AgentOptions{HeartbeatEvery: n.Config.HeartbeatEvery, Guard: n.guard}
	if n.Config.Pinger != nil {
		agent.Pinger = n.ping
	}
	rt := authority.RuntimeConfig{Node: n.Config.Name, Domain: n.Config.Domain, Caps: n.caps, DecisionDelay: n.Config.DecisionDelay}
	return authority.NewConnector(authority.ConnectorConfig{Runtime: rt, Dial: n.Config.Dial, Host: n},
		authority.ConnectorOptions{Agent: agent, Clock: n.clk, Logger: n.log})
}

// Start runs the node's control channel and the loop that keeps its star
// in step with its grant.
func (n *Node) Start() {
	n.agentStop, n.agentDone = goStop(n.link.Run)
	n.pollStop, n.pollDone = goStop(func(ctx context.Context) {
		for ok := true; ok; ok = clock.Sleep(ctx, n.clk, n.Config.Poll) == nil {
			n.reconcile(ctx)
		}
	})
	if lc := n.Config.Lifecycle; lc.Interval >= 0 {
		lc.Interval = cmp.Or(lc.Interval, settle.DefaultMaintainInterval)
		n.StartLifecycle(lc)
	}
}

// goStop runs f in a goroutine until stop; done is closed once f returned.
func goStop(f func(context.Context)) (stop context.CancelFunc, done chan struct{}) {
	ctx, stop := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return stop, done
}

// HealthToken is the token the node's health links are bound to now, as
// the topology the controller last described says (0 while none).
func (n *Node) HealthToken() authority.Token {
	_, token := n.link.HealthPeers()
	return token
}

// ping is the agent's Pinger: the configured one, counted. (The agent
// logs a link that comes up or goes down.)
func (n *Node) ping(ctx context.Context, peer string, token authority.Token) error {
	err := n.Config.Pinger(ctx, peer, token)
	result := "ok"
	if err != nil {
		result = "failed"
	}
	n.Metrics.pings.WithLabelValues(result).Inc()
	return err
}

// admit is the star's Options.Admit: the current agent's.
func (n *Node) admit() error { return n.link.Admit() }

// reconcile keeps one star running exactly while the node holds a grant:
// it aborts the star of a grant that ended (the star writes nothing
// more; its successor settles what it left), and starts a star on a
// fresh session under a new grant.
func (n *Node) reconcile(ctx context.Context) {
	g := n.link.Grant() // zero before the first channel
	held := g.Token != 0 && g.Holder == n.Config.Name
	n.mu.Lock()
	switch {
	case held && g.Token != n.granted:
		n.Metrics.grantChanges.WithLabelValues("gained").Inc()
		n.log.Info("grant gained", "token", g.Token, "deadline", g.Deadline)
		n.granted = g.Token
	case !held && n.granted != 0:
		n.Metrics.grantChanges.WithLabelValues("lost").Inc()
		n.log.Warn("grant lost", "token", n.granted)
		n.granted = 0
	}
	h, closing, retryAt := n.hold, n.closing, n.retryAt
	n.mu.Unlock()
	if h != nil && (!held || h.token != g.Token || h.lost()) {
		n.drop(h, "its grant ended or its session was lost")
		h = nil
	}
	if h != nil || !held || closing || n.clk.Now().Before(retryAt) || n.admit() != nil {
		return
	}
	h, err := n.startHolding(ctx, g.Token)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err == nil {
		n.hold = h
		return
	}
	if ctx.Err() == nil {
		// ErrStarRunning, say: the session of a crashed run of this node
		// has not expired yet.
		n.log.Warn("star did not start; trying again", "in", restartAfter, "err", err)
	}
	n.retryAt = n.clk.Now().Add(restartAfter)
}

// drop aborts h's star, as a crash would.
func (n *Node) drop(h *Holding, why string) {
	n.mu.Lock()
	if n.hold == h {
		n.hold = nil
	}
	n.mu.Unlock()
	if h.abort() {
		n.log.Warn("star aborted", "token", h.token, "why", why)
	}
}

// Current is the holding of the star running now (nil when none).
func (n *Node) Current() *Holding {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hold
}

// holder returns the holding that may take a produce now.
func (n *Node) holder() (*Holding, error) {
	if err := n.admit(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closing:
		return nil, errShuttingDown
	case n.hold == nil:
		return nil, errStarting
	}
	return n.hold, nil
}

// Shutdown is the node's SIGTERM: it closes its star (every held stream
// leaves through Finish and gets its clean-release mark) while its grant
// still guards the writes, then says goodbye to the controller.
func (n *Node) Shutdown(ctx context.Context) error {
	n.pollStop()
	<-n.pollDone
	n.StopLifecycle()
	n.mu.Lock()
	n.closing = true
	h := n.hold
	n.hold = nil
	n.mu.Unlock()
	var err error
	if h != nil {
		err = h.close(ctx)
	}
	n.agentStop()
	<-n.agentDone
	return err
}

var _ authority.AgentHost = (*Node)(nil)

// Progress is the position past the node's last acknowledged slot.
func (n *Node) Progress() chain.Position {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.progress
}

// acknowledged is the appender's OnAck: the progress the node's
// heartbeats report, and the append's time.
func (n *Node) acknowledged(_ string, r batch.Receipt, took time.Duration) {
	n.Metrics.appendSeconds.Observe(took.Seconds())
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := (chain.Position{Epoch: r.Position.Epoch, Slot: r.Position.Slot + 1}); n.progress.Less(p) {
		n.progress = p
	}
}

// Recover recovers the last holder's chain: a star of this node still
// running is aborted first (it admits nothing any more), then every epoch
// of the last holder is fenced and settled through the Guarded store,
// which the agent points at the recovery placement.
func (n *Node) Recover(ctx context.Context, order authority.RecoverMsg) (chain.Position, error) {
	if h := n.Current(); h != nil {
		n.drop(h, "recovery")
	}
	star := order.Required.Star
	pos, reps, err := authority.RecoverChain(ctx, n.minter, n.settler, star)
	for _, r := range reps {
		n.Metrics.settle("recovery", r)
	}
	if err != nil {
		return chain.Position{}, err
	}
	n.mu.Lock()
	n.recovered[star] = pos
	n.mu.Unlock()
	n.log.Info("recovered", "star", star, "frontier", pos, "required", order.Required.Pos)
	return pos, nil
}

// Release drains every stream the node holds for a planned handoff: each
// one leaves through Finish and gets its clean-release mark, which the
// target's open consumes.
func (n *Node) Release(ctx context.Context) (chain.Position, error) {
	if h := n.Current(); h != nil {
		if err := h.app.Release(ctx); err != nil {
			return chain.Position{}, err
		}
		n.log.Info("released for a handoff", "token", h.token)
	}
	return n.Progress(), nil
}

// Frontier is how far Recover got on star's chain; the storage serves
// whenever the process runs.
func (n *Node) Frontier(star string) (chain.Position, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.recovered[star], true
}

// ofStar is a metric of the current star (0 while none runs).
func (n *Node) ofStar(f func(*lease.Star) float64) func() float64 {
	return func() float64 {
		if h := n.Current(); h != nil {
			return f(h.Star)
		}
		return 0
	}
}

// undecidedAge is the metric of the oldest undecided slot.
func (n *Node) undecidedAge() float64 {
	var age time.Duration
	now := n.clk.Now()
	for _, u := range n.fencer.Undecided() {
		age = max(age, now.Sub(u.Since))
	}
	return age.Seconds()
}
