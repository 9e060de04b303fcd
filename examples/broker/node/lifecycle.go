package node

import (
	"cmp"
	"context"
	"time"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/settle"
)

// The lifecycle keeps what the broker stores bounded: every
// -compact-interval the holder covers what its star acknowledged
// (lease.Star.Absorb) and runs a pass of a settle.Maintainer (package
// settle, "Maintenance"): each stream's retention, the settlement of the
// epochs earlier holders left open (a planned handoff leaves its
// holder's epoch open), compaction into per-stream segments, trim and
// collection.
//
// Only the grant's holder runs passes, so that the epochs' cursors get
// one writer and no two compactors race on the same flights. A pass
// settles only the epochs minted before the node's grant, so that one
// that outlives its grant never fences the next holder's epoch; its
// writes go through the Guarded store, which refuses them once the grant
// ended.

// LifecycleConfig says how often the holder runs a lifecycle pass, and
// what it keeps of each stream.
type LifecycleConfig struct {
	// Interval is the time between passes, on Clock. 0 means
	// settle.DefaultMaintainInterval; a negative value turns passes off.
	Interval time.Duration
	// Policy is every stream's retention; the zero Policy keeps
	// everything.
	Policy settle.Policy
	// Clock times the passes and the age of the oldest uncompacted
	// flight, and stamps the index's pages with the time their newest
	// record joined (what -retention-age reads); nil means the node's.
	Clock clock.Clock
}

// Bounds of the retention flags.
const (
	maxRetentionAge   = 100 * 365 * 24 * time.Hour
	minRetentionBytes = 1 << 10
)

func (c LifecycleConfig) validate() error {
	if p := c.Policy; p.MaxAge < 0 || p.MaxBytes < 0 {
		return Refuse("retention-age", p.MaxAge, "0 or more, and -retention-bytes %d too", p.MaxBytes)
	}
	return nil
}

// lifecycleConfig is the flags in the node's terms: -compact-interval 0
// turns passes off.
func (c *Settings) lifecycleConfig() LifecycleConfig {
	lc := c.lifecycle
	lc.Interval = cmp.Or(lc.Interval, -1)
	return lc
}

// StartLifecycle runs the node's lifecycle passes every cfg.Interval
// while it holds the grant, until StopLifecycle.
func (n *Node) StartLifecycle(cfg LifecycleConfig) {
	n.lifecycleStop, n.lifecycleDone = goStop(func(ctx context.Context) { n.runLifecycle(ctx, cfg) })
}

// StopLifecycle ends the lifecycle passes and waits for the one running.
func (n *Node) StopLifecycle() {
	if n.lifecycleStop != nil {
		n.lifecycleStop()
		<-n.lifecycleDone
		n.lifecycleStop = nil
	}
}

func (n *Node) runLifecycle(ctx context.Context, cfg LifecycleConfig) {
	clk := cmp.Or(cfg.Clock, n.clk)
	var h *Holding // the holding of the pass running
	m, err := settle.NewMaintainer(settle.MaintainerConfig{
		Store: n.Config.Store, Minter: n.minter, Settler: n.settler, Compactor: n.compactor, Refs: n.refs,
		Streams: func(ctx context.Context) ([]string, error) {
			return lease.Streams(ctx, n.Config.Store, n.Config.Root, "")
		},
	}, settle.MaintainerOptions{
		Policy: cfg.Policy,
		// Only the epochs minted before the node's grant (0, none, once
		// the agent cleared it); a pass stops once its holding ended.
		SettleBefore: n.guard.Revision,
		Held:         func() bool { return n.Current() == h },
		Clock:        clk,
		Logger:       n.log,
		// The loop below times the passes; the interval sizes a pass's
		// budget.
		Interval: min(max(cfg.Interval, settle.MinMaintainInterval), settle.MaxMaintainInterval),
	})
	if err != nil {
		n.log.Error("lifecycle: no passes", "err", err)
		return
	}
	for clock.Sleep(ctx, clk, cfg.Interval) == nil {
		if h, err = n.holder(); err != nil {
			n.Metrics.backlog.Set(0) // the gauges are the holder's
			n.Metrics.oldestUncompacted.Set(0)
			continue
		}
		n.pass(ctx, m, h)
		n.LifecyclePasses.Add(1)
	}
}

// pass runs one pass under h (the Maintainer logs it) and records it in
// the metrics.
func (n *Node) pass(ctx context.Context, m *settle.Maintainer, h *Holding) {
	var errs []*settle.StageError
	// The checkpoint moves past what was acknowledged: more to compact.
	if err := h.Star.Absorb(ctx); err != nil && ctx.Err() == nil {
		errs = append(errs, &settle.StageError{Stage: "absorb", Err: err})
		n.log.Warn("lifecycle: absorb before the pass", "err", err)
	}
	// Pass's error joins r.Errors, or is ctx's cause: no failure.
	r, _ := m.Pass(ctx)
	errs = append(errs, r.Errors...)
	met := n.Metrics
	met.compactedBytes.Add(float64(r.Bytes))
	met.segmentsWritten.Add(float64(r.Segments))
	met.objectsDeleted.WithLabelValues("flight").Add(float64(r.FlightsDeleted))
	met.objectsDeleted.WithLabelValues("segment").Add(float64(r.SegmentsDeleted))
	met.refPagesDropped.Add(float64(r.PagesDropped))
	for by, expired := range r.ExpiredBy {
		met.recordsExpired.WithLabelValues(by).Add(float64(expired))
	}
	for _, s := range r.Settled {
		met.settle("lifecycle", s)
	}
	for _, e := range errs {
		met.lifecycleErrors.WithLabelValues(e.Stage).Inc()
	}
	met.lifecycleSeconds.Observe(r.Took.Seconds())
	met.backlog.Set(float64(r.Backlog))
	met.oldestUncompacted.Set(r.OldestUncompacted.Seconds())
	result := "ok"
	if len(errs) > 0 {
		result = "error"
	}
	met.lifecyclePasses.WithLabelValues(result).Inc()
}
