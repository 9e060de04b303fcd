package node

import (
	"cmp"
	"context"
	"log/slog"
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

// lifecycleFlags are the flags of the lifecycle (flags.go registers and
// checks them).
type lifecycleFlags struct {
	interval, age time.Duration
	bytes         int64
	records       uint64
}

func (f *lifecycleFlags) policy() settle.Policy {
	return settle.Policy{MaxAge: f.age, MaxBytes: f.bytes, MaxRecords: f.records}
}

// config is the flags in the node's terms: -compact-interval 0 turns
// passes off.
func (f *lifecycleFlags) config() LifecycleConfig {
	return LifecycleConfig{Interval: cmp.Or(f.interval, -1), Policy: f.policy()}
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

// pass runs one pass under h, records it in the metrics and logs it in
// one line.
func (n *Node) pass(ctx context.Context, m *settle.Maintainer, h *Holding) {
	var errs []*settle.StageError
	// The checkpoint moves past what was acknowledged: more to compact.
	if err := h.Star.Absorb(ctx); err != nil && ctx.Err() == nil {
		errs = append(errs, &settle.StageError{Stage: "absorb", Err: err})
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
	result, level, attrs := "ok", slog.LevelDebug, []any{}
	switch {
	case len(errs) > 0:
		result, level, attrs = "error", slog.LevelWarn, []any{"errors", len(errs), "err", errs[0]}
	case r.Did():
		level = slog.LevelInfo
	}
	met.lifecyclePasses.WithLabelValues(result).Inc()
	n.log.Log(context.WithoutCancel(ctx), level, "lifecycle pass", append(attrs, "streams", r.Streams, "retained", r.Retained,
		"records_expired", r.Expired, "ref_pages_dropped", r.PagesDropped, "settled", len(r.Settled), "epochs", r.Epochs,
		"segments_written", r.Segments, "pages_moved", r.Pages, "bytes_compacted", r.Bytes, "flights_deleted", r.FlightsDeleted,
		"epochs_collected", r.Collected, "segments_deleted", r.SegmentsDeleted, "backlog_flights", r.Backlog,
		"oldest_uncompacted", r.OldestUncompacted.Round(time.Millisecond), "took", r.Took.Round(time.Millisecond))...)
}
