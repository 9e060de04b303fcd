package settle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/metastore"
)

// ErrPassBudget ends a maintenance pass that ran out of time
// (MaintainerOptions.Budget). The next pass goes on from where it
// stopped.
var ErrPassBudget = errkind.New(cutline.ErrUnavailable, "settle: the maintenance pass ran out of time")

// Stages of a maintenance pass, as StageError names them.
const (
	StageRetain  = "retain"  // applying a stream's retention
	StageList    = "list"    // listing the epoch records
	StageSettle  = "settle"  // settling an epoch left open
	StageCompact = "compact" // Compactor.Compact
	StageTrim    = "trim"    // Settler.TrimRewritten, TrimUnneeded
	StageCollect = "collect" // Compactor.Collect
	StageBudget  = "budget"  // the pass ran out of time
)

// StageError is a step of a maintenance pass that failed: the pass went
// on with the next, and the next pass tries it again.
type StageError struct {
	Stage string // one of the Stage constants
	Err   error
}

func (e *StageError) Error() string { return e.Stage + ": " + e.Err.Error() }

func (e *StageError) Unwrap() error { return e.Err }

// Bounds and defaults of MaintainerOptions.
const (
	DefaultMaintainInterval = time.Minute
	MinMaintainInterval     = time.Second
	MaxMaintainInterval     = 24 * time.Hour
	DefaultMaintainEpochs   = 64
	DefaultMaintainCollects = 16
	DefaultMaintainStreams  = 1024
	// MaxMaintainBound bounds MaxEpochs, MaxCollects and MaxStreams.
	MaxMaintainBound = 1 << 20
	minPassBudget    = 30 * time.Second
	maxPassBudget    = 10 * time.Minute
)

// MaintainerConfig holds what a Maintainer requires.
type MaintainerConfig struct {
	// Store is the metastore the epoch records are listed from: the
	// Minter's, or a view of it.
	Store metastore.Store
	// Minter reads the epoch records; its root is where they are listed.
	Minter *epoch.Minter
	// Settler settles the epochs left open and trims.
	Settler *Settler
	// Compactor rewrites flights into segments and collects garbage.
	Compactor *Compactor
	// Refs is the index retention applies to. Required with a Policy or
	// TrimUnneeded.
	Refs *RefIndex
	// Streams lists the streams whose retention a pass applies, in any
	// order. Required with a Policy.
	Streams func(ctx context.Context) ([]string, error)
}

// MaintainerOptions tune a Maintainer. The zero value keeps everything,
// settles nothing and runs a pass a minute.
type MaintainerOptions struct {
	// Policy is every stream's retention (RefIndex.RetainPolicy); the
	// zero Policy keeps everything.
	Policy Policy
	// TrimUnneeded also trims each epoch the pass works on below the
	// lowest slot a retained ref still needs (Settler.TrimUnneeded), not
	// only below its rewritten cursor: what a retention dropped goes
	// before compaction reaches it. It lists the index once per epoch.
	TrimUnneeded bool
	// SettleBefore, when set, makes a pass settle the epochs left open
	// (fenced, or never fenced) whose record was created at a metastore
	// revision below what it returns: a host returns the revision its
	// right to write began at (a grant's token), so that a pass never
	// fences the epoch of a writer that came after it. 0 settles none.
	// Nil settles none.
	SettleBefore func() int64
	// Held, when set, is asked before each step: a pass stops as soon as
	// it returns false (the host lost its right to maintain), and Run
	// skips the pass.
	Held func() bool
	// Interval is the time between the passes of Run, on Clock: 0 means
	// DefaultMaintainInterval, else MinMaintainInterval to
	// MaxMaintainInterval.
	Interval time.Duration
	// Budget bounds the time of one pass; 0 means the interval, at
	// least 30s and at most 10m. A pass that runs out of time stops
	// with a StageBudget error wrapping ErrPassBudget.
	Budget time.Duration
	// MaxEpochs bounds the epochs a pass settles, and those it compacts
	// and trims; MaxCollects those it collects; MaxStreams the streams
	// whose retention it applies. Each pass takes them in turn, going on
	// after where the last stopped. 0 means DefaultMaintainEpochs,
	// DefaultMaintainCollects and DefaultMaintainStreams; at most
	// MaxMaintainBound.
	MaxEpochs, MaxCollects, MaxStreams int
	// Clock times the passes, the budget and the age of the oldest
	// uncompacted flight. Nil means the wall clock.
	Clock clock.Clock
	// OnPass, when set, receives what each pass of Run did.
	OnPass func(MaintenanceReport, error)
	// Logger receives one line per pass, "maintenance pass", with what
	// it did: at info when it did something, as a warning when a step
	// failed, at debug otherwise. Nil discards.
	Logger *slog.Logger
}

func (o MaintainerOptions) validate() error {
	switch {
	case o.Interval != 0 && (o.Interval < MinMaintainInterval || o.Interval > MaxMaintainInterval):
		return &cutline.ConfigError{Field: "Interval", Value: o.Interval, Reason: fmt.Sprintf("must be 0 (%v) or %v to %v", DefaultMaintainInterval, MinMaintainInterval, MaxMaintainInterval)}
	case o.Budget < 0:
		return &cutline.ConfigError{Field: "Budget", Value: o.Budget, Reason: "must be 0 (the interval) or more"}
	}
	for _, b := range []struct {
		field string
		v     int
	}{{"MaxEpochs", o.MaxEpochs}, {"MaxCollects", o.MaxCollects}, {"MaxStreams", o.MaxStreams}} {
		if b.v < 0 || b.v > MaxMaintainBound {
			return &cutline.ConfigError{Field: b.field, Value: b.v, Reason: fmt.Sprintf("must be 0 (the default) to %d", MaxMaintainBound)}
		}
	}
	return o.Policy.validate()
}

// MaintenanceReport is what one pass did: the counts a host's metrics
// need.
type MaintenanceReport struct {
	// Streams whose retention the pass applied, Retained those whose
	// retention point moved, Expired the offsets it dropped (ExpiredBy
	// by limit: ByAge, ByBytes, ByRecords), PagesDropped the ref pages
	// deleted.
	Streams, Retained int
	Expired           uint64
	ExpiredBy         map[string]uint64
	PagesDropped      int
	// Settled holds a Report per epoch the pass settled.
	Settled []SettleReport
	// Epochs counts the epochs compacted or trimmed; Segments the
	// segments written, Pages the ref pages moved onto them, Bytes the
	// bytes rewritten into them; FlightsDeleted the slot objects trimmed.
	Epochs, Segments, Pages int
	Bytes                   int64
	FlightsDeleted          int
	// Collected counts the epochs collected, Garbage the segments found
	// that no page names or ever will, SegmentsDeleted their copies
	// deleted.
	Collected, Garbage, SegmentsDeleted int
	// Backlog counts the slots below a checkpoint not yet rewritten or
	// trimmed after the pass, over every epoch; OldestUncompacted is how
	// long the oldest of them has waited at its epoch's rewritten
	// cursor, as passes found it (0 after a first pass).
	Backlog           uint64
	OldestUncompacted time.Duration
	// Errors holds every step that failed, in order.
	Errors []*StageError
	// Took is the pass's time on the Clock.
	Took time.Duration
}

// Did reports whether the pass changed anything.
func (r *MaintenanceReport) Did() bool {
	return r.Expired > 0 || r.PagesDropped > 0 || len(r.Settled) > 0 || r.Segments > 0 || r.FlightsDeleted > 0 || r.SegmentsDeleted > 0
}

// Maintainer runs a host's maintenance passes over every epoch under a
// Minter's root: retention, settlement of epochs left open, compaction,
// trim and collection, bounded in epochs, streams and time (see the
// package documentation, "Maintenance"). It keeps, from one pass to the
// next, where each round stopped and which epochs still have objects to
// trim. Passes are serialised; it is safe for concurrent use.
type Maintainer struct {
	cfg  MaintainerConfig
	opts MaintainerOptions
	clk  clock.Clock

	mu                                    sync.Mutex
	streamAfter, epochAfter, collectAfter string
	retrim                                map[string]bool
	stuck                                 map[string]stuckAt
}

type stuckAt struct {
	rewritten uint64
	since     time.Time
}

// NewMaintainer returns a Maintainer. It refuses a missing input or an
// option out of bounds with a *cutline.ConfigError.
func NewMaintainer(cfg MaintainerConfig, opts MaintainerOptions) (*Maintainer, error) {
	switch {
	case cfg.Store == nil:
		return nil, &cutline.ConfigError{Field: "Store", Reason: "required"}
	case cfg.Minter == nil:
		return nil, &cutline.ConfigError{Field: "Minter", Reason: "required"}
	case cfg.Settler == nil:
		return nil, &cutline.ConfigError{Field: "Settler", Reason: "required"}
	case cfg.Compactor == nil:
		return nil, &cutline.ConfigError{Field: "Compactor", Reason: "required"}
	case cfg.Refs == nil && (opts.Policy != (Policy{}) || opts.TrimUnneeded):
		return nil, &cutline.ConfigError{Field: "Refs", Reason: "required with a Policy or TrimUnneeded"}
	case cfg.Streams == nil && opts.Policy != (Policy{}):
		return nil, &cutline.ConfigError{Field: "Streams", Reason: "required with a Policy"}
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.Interval = cmp.Or(opts.Interval, DefaultMaintainInterval)
	if opts.Budget == 0 {
		opts.Budget = min(max(opts.Interval, minPassBudget), maxPassBudget)
	}
	opts.MaxEpochs = cmp.Or(opts.MaxEpochs, DefaultMaintainEpochs)
	opts.MaxCollects = cmp.Or(opts.MaxCollects, DefaultMaintainCollects)
	opts.MaxStreams = cmp.Or(opts.MaxStreams, DefaultMaintainStreams)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Maintainer{cfg: cfg, opts: opts, clk: clock.Or(opts.Clock), retrim: map[string]bool{}, stuck: map[string]stuckAt{}}, nil
}

// Run runs a pass every Interval, on Clock, until ctx ends, and hands
// each pass's report to OnPass; it skips a pass while Held says no. It
// returns ctx's cause.
func (m *Maintainer) Run(ctx context.Context) error {
	for clock.Sleep(ctx, m.clk, m.opts.Interval) == nil {
		if m.opts.Held != nil && !m.opts.Held() {
			continue
		}
		rep, err := m.Pass(ctx)
		if ctx.Err() != nil {
			break
		}
		if m.opts.OnPass != nil {
			m.opts.OnPass(rep, err)
		}
	}
	return context.Cause(ctx)
}

// Pass runs one bounded pass:
//
//  1. with a Policy, applies the retention of the next MaxStreams
//     streams in turn;
//  2. with SettleBefore, settles up to MaxEpochs epochs left open,
//     oldest first;
//  3. for the next MaxEpochs epochs with work, compacts those below
//     their checkpoint and trims them below their rewritten cursor (and
//     below the slots no retained ref needs, with TrimUnneeded);
//  4. collects the garbage segments of the next MaxCollects epochs that
//     have segments;
//
// then measures the backlog. A step that fails is recorded in the
// report's Errors and the pass goes on. The error is nil when none
// failed; else it joins the StageErrors. When ctx ends the pass stops
// and returns ctx's cause, and what stopped with it is not counted as
// failed.
func (m *Maintainer) Pass(ctx context.Context) (MaintenanceReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := m.clk.Now()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := m.clk.AfterFunc(m.opts.Budget, func() { cancel(ErrPassBudget) })
	defer t.Stop()
	p := &pass{m: m, ctx: pctx, rep: MaintenanceReport{ExpiredBy: map[string]uint64{}}}
	if m.opts.Policy != (Policy{}) && p.held() {
		p.retain()
	}
	if p.held() {
		p.epochs()
	}
	if ctx.Err() != nil {
		p.rep.Took = m.clk.Now().Sub(start)
		return p.rep, context.Cause(ctx)
	}
	if cause := context.Cause(pctx); errors.Is(cause, ErrPassBudget) {
		p.fail(StageBudget, cause)
	}
	p.rep.Took = m.clk.Now().Sub(start)
	p.rep.log(ctx, m.opts.Logger)
	if len(p.rep.Errors) == 0 {
		return p.rep, nil
	}
	errs := make([]error, len(p.rep.Errors))
	for i, e := range p.rep.Errors {
		errs[i] = e
	}
	return p.rep, errors.Join(errs...)
}

// log logs the report in one line.
func (r MaintenanceReport) log(ctx context.Context, log *slog.Logger) {
	level, attrs := slog.LevelDebug, []any{}
	switch {
	case len(r.Errors) > 0:
		level, attrs = slog.LevelWarn, []any{"errors", len(r.Errors), "err", r.Errors[0]}
	case r.Did():
		level = slog.LevelInfo
	}
	log.Log(ctx, level, "maintenance pass", append(attrs, "streams", r.Streams, "retained", r.Retained,
		"records_expired", r.Expired, "ref_pages_dropped", r.PagesDropped, "settled", len(r.Settled), "epochs", r.Epochs,
		"segments_written", r.Segments, "pages_moved", r.Pages, "bytes_compacted", r.Bytes, "flights_deleted", r.FlightsDeleted,
		"epochs_collected", r.Collected, "segments_deleted", r.SegmentsDeleted, "backlog_flights", r.Backlog,
		"oldest_uncompacted", r.OldestUncompacted.Round(time.Millisecond), "took", r.Took.Round(time.Millisecond))...)
}

// pass is one pass's state.
type pass struct {
	m   *Maintainer
	ctx context.Context
	rep MaintenanceReport
}

func (p *pass) held() bool {
	return p.ctx.Err() == nil && (p.m.opts.Held == nil || p.m.opts.Held())
}

// fail records a failed step, unless the pass's caller ended it.
func (p *pass) fail(stage string, err error) {
	if p.ctx.Err() != nil && !errors.Is(context.Cause(p.ctx), ErrPassBudget) {
		return
	}
	p.rep.Errors = append(p.rep.Errors, &StageError{Stage: stage, Err: err})
}

// retain applies the policy to the next streams in turn.
func (p *pass) retain() {
	m, ctx := p.m, p.ctx
	names, err := m.cfg.Streams(ctx)
	if err != nil {
		p.fail(StageRetain, err)
		return
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, s := range inTurn(names, func(s string) string { return s }, m.streamAfter, m.opts.MaxStreams) {
		if !p.held() {
			return
		}
		m.streamAfter = s
		p.rep.Streams++
		before, err := m.cfg.Refs.Start(ctx, s)
		if err != nil {
			p.fail(StageRetain, err)
			continue
		}
		r, err := m.cfg.Refs.RetainPolicy(ctx, s, m.opts.Policy)
		p.rep.PagesDropped += r.PagesDeleted
		if r.Start > before {
			p.rep.Retained++
			p.rep.Expired += r.Start - before
			p.rep.ExpiredBy[cmp.Or(r.By, "unknown")] += r.Start - before
		}
		if err != nil {
			p.fail(StageRetain, err)
		}
	}
}

// epochRef is an epoch as a pass found it.
type epochRef struct {
	key     string // star/epoch, in epoch order within a star
	star    string
	ep      uint64
	state   epoch.State
	cur     epoch.Cursors
	created int64 // the revision its record was created at
}

func (e epochRef) id() string { return e.key }

func (e epochRef) backlog() uint64 {
	done := max(e.cur.Rewritten, e.cur.Trimmed)
	if e.cur.Checkpoint <= done {
		return 0
	}
	return e.cur.Checkpoint - done
}

// epochs settles, compacts, trims and collects the next epochs in turn,
// and measures the backlog.
func (p *pass) epochs() {
	m, ctx := p.m, p.ctx
	all, err := m.epochRefs(ctx)
	if err != nil {
		p.fail(StageList, err)
		return
	}
	if m.opts.SettleBefore != nil {
		rev := m.opts.SettleBefore()
		settled := 0
		for i, e := range all {
			if e.state == epoch.StateSettled || e.created >= rev || settled == m.opts.MaxEpochs || !p.held() {
				continue
			}
			settled++
			r, err := m.cfg.Settler.Settle(ctx, e.star, e.ep)
			if err != nil {
				p.fail(StageSettle, err)
				continue
			}
			p.rep.Settled = append(p.rep.Settled, r)
			if rec, err := m.cfg.Minter.Get(ctx, e.star, e.ep); err == nil {
				all[i].state, all[i].cur = rec.State, rec.Cursors
			}
		}
	}
	var work, segmented []epochRef
	for _, e := range all {
		if e.backlog() > 0 || e.cur.Trimmed < e.cur.Rewritten || m.retrim[e.key] {
			work = append(work, e)
		}
		if e.cur.Rewritten > 0 {
			segmented = append(segmented, e)
		}
	}
	after := map[string]epochRef{} // the cursors after the pass
	for _, e := range inTurn(work, epochRef.id, m.epochAfter, m.opts.MaxEpochs) {
		if !p.held() {
			break
		}
		m.epochAfter = e.key
		p.rep.Epochs++
		if e.backlog() > 0 {
			cr, err := m.cfg.Compactor.Compact(ctx, e.star, e.ep)
			p.rep.Segments += cr.Segments
			p.rep.Pages += cr.Pages
			p.rep.Bytes += cr.Bytes
			if cr.Passes > 0 {
				e.cur.Rewritten, e.cur.Checkpoint = max(e.cur.Rewritten, cr.Rewritten), max(e.cur.Checkpoint, cr.Checkpoint)
			}
			if err != nil {
				p.fail(StageCompact, err)
			}
		}
		if e.cur.Trimmed < e.cur.Rewritten || m.retrim[e.key] || m.opts.TrimUnneeded {
			p.trim(&e)
		}
		after[e.key] = e
	}
	for _, e := range inTurn(segmented, epochRef.id, m.collectAfter, m.opts.MaxCollects) {
		if !p.held() {
			break
		}
		m.collectAfter = e.key
		cr, err := m.cfg.Compactor.Collect(ctx, e.star, e.ep)
		p.rep.Collected++
		p.rep.Garbage += cr.Garbage
		p.rep.SegmentsDeleted += cr.Deleted
		if err != nil {
			p.fail(StageCollect, err)
		}
	}
	// The backlog, and how long the oldest uncompacted flight has been
	// found waiting at its epoch's rewritten cursor.
	now := m.clk.Now()
	seen := map[string]bool{}
	for _, e := range all {
		if a, ok := after[e.key]; ok {
			e = a
		}
		b := e.backlog()
		if b == 0 {
			continue
		}
		p.rep.Backlog += b
		seen[e.key] = true
		s, ok := m.stuck[e.key]
		if !ok || s.rewritten != e.cur.Rewritten {
			s = stuckAt{rewritten: e.cur.Rewritten, since: now}
			m.stuck[e.key] = s
		}
		p.rep.OldestUncompacted = max(p.rep.OldestUncompacted, now.Sub(s.since))
	}
	for k := range m.stuck {
		if !seen[k] {
			delete(m.stuck, k)
		}
	}
}

// trim trims e below its rewritten cursor and, with TrimUnneeded, below
// what no retained ref needs. An epoch whose trim left objects, or
// deleted any, is trimmed again by the next pass: a write's last zone copy
// (or a stale writer's) that was on its way while this trim listed lands
// below the trimmed cursor afterwards, and only a later listing finds it.
// A trim that deletes nothing and leaves nothing ends the repeats.
func (p *pass) trim(e *epochRef) {
	m, ctx := p.m, p.ctx
	tr, err := m.cfg.Settler.TrimRewritten(ctx, e.star, e.ep)
	left := tr.Left > 0 || tr.Deleted > 0 || err != nil
	p.rep.FlightsDeleted += tr.Deleted
	e.cur.Trimmed = max(e.cur.Trimmed, tr.Trimmed)
	if err != nil {
		p.fail(StageTrim, err)
	}
	if m.opts.TrimUnneeded && err == nil {
		tr, err := m.cfg.Settler.TrimUnneeded(ctx, m.cfg.Refs, e.star, e.ep)
		left = left || tr.Left > 0 || tr.Deleted > 0 || err != nil
		p.rep.FlightsDeleted += tr.Deleted
		e.cur.Trimmed = max(e.cur.Trimmed, tr.Trimmed)
		if err != nil {
			p.fail(StageTrim, err)
		}
	}
	if left {
		m.retrim[e.key] = true
	} else {
		delete(m.retrim, e.key)
	}
}

// inTurn returns up to n of xs, sorted by key, starting after the key
// after and wrapping around: what a pass takes in turn.
func inTurn[T any](xs []T, key func(T) string, after string, n int) []T {
	i, found := slices.BinarySearchFunc(xs, after, func(x T, k string) int { return strings.Compare(key(x), k) })
	if found {
		i++
	}
	out := append(slices.Clone(xs[i:]), xs[:i]...)
	return out[:min(len(out), n)]
}

// epochRefs reads every epoch record under the Minter's root: the stars
// from one listing of the chains, then each star's records, in key
// order.
func (m *Maintainer) epochRefs(ctx context.Context) ([]epochRef, error) {
	prefix := m.cfg.Minter.ChainKey("")
	kvs, _, err := m.cfg.Store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var stars []string
	created := map[string]int64{}
	for _, kv := range kvs {
		if star, _, _ := strings.Cut(kv.Key[len(prefix):], "/"); epoch.ValidateName("star", star) == nil {
			stars = append(stars, star)
		}
		created[kv.Key] = kv.CreateRevision
	}
	slices.Sort(stars)
	stars = slices.Compact(stars)
	var out []epochRef
	for _, star := range stars {
		for rec, err := range m.cfg.Minter.Epochs(ctx, star) {
			if err != nil {
				return nil, err
			}
			c, ok := created[m.cfg.Minter.RecordKey(star, rec.Epoch)]
			if !ok {
				continue // minted after the listing: the next pass sees it
			}
			out = append(out, epochRef{key: fmt.Sprintf("%s/%020d", star, rec.Epoch), star: star, ep: rec.Epoch, state: rec.State, cur: rec.Cursors, created: c})
		}
	}
	slices.SortFunc(out, func(a, b epochRef) int { return strings.Compare(a.key, b.key) })
	return out, nil
}
