package node

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/settle"
)

// The lifecycle keeps what the broker stores bounded. Every flight holds
// one record and stays in K zones, and every ref stays in the index, for
// as long as nothing deletes them: the holder runs a pass every
// -compact-interval that
//
//  1. applies each stream's retention (settle.RefIndex.RetainPolicy): the
//     stream's retention point moves up as far as -retention-age,
//     -retention-bytes and -retention-records allow, and the ref pages
//     wholly below it go;
//  2. settles the epochs that earlier holders left open (a planned
//     handoff leaves its holder's epoch open: nothing needs settling to
//     go on): the last ref page of each stream in an open epoch stays
//     with its writer, and holds back the compaction and the trim of
//     everything past it. Only epochs minted before the node's grant are
//     settled (their creation revision is below the grant's token's), so
//     that a pass that outlives its grant never fences the epoch of the
//     next holder;
//  3. compacts every epoch below its checkpoint (settle.Compactor): the
//     records of each stream, one flight each, are rewritten into
//     segments, an object per stream and run of ref pages, and the refs
//     moved onto them. What retention dropped is not rewritten: no
//     retained ref needs it;
//  4. trims each epoch below its rewritten cursor (Settler.TrimRewritten):
//     its flights go, since no ref reads them any more;
//  5. collects garbage (Compactor.Collect): the segments no ref page
//     names any more, whether retention dropped their records or a
//     compactor that crashed or lost a race left them.
//
// Retention runs first so that compaction never rewrites what it is about
// to drop. Only the node holding the grant runs passes: the epochs'
// cursors (rewritten, trimmed) get one writer, and no two compactors
// rewrite the same flights only for one of them to lose every
// compare-and-set. The library tolerates both (segments never share a
// key, pages and cursors move by compare-and-set, and a crash anywhere
// leaves only garbage that Collect deletes), and the node's writes go
// through its Guarded store, so that a node whose grant ended has its
// cursor moves refused before it deletes anything.

// LifecycleConfig says how often the holder runs a lifecycle pass, and
// what it keeps of each stream.
type LifecycleConfig struct {
	// Interval is the time between passes, on Clock. 0 means
	// defaultLifecycleInterval; a negative value turns passes off.
	Interval time.Duration
	// Policy is every stream's retention; the zero Policy keeps
	// everything.
	Policy settle.Policy
	// Clock times the passes and the age of the oldest uncompacted
	// flight, and stamps the index's pages with the time their newest
	// record joined (what -retention-age reads); nil means the node's.
	Clock clock.Clock
}

// Defaults and bounds of the lifecycle.
const (
	defaultLifecycleInterval = time.Minute
	minLifecycleInterval     = time.Second
	maxLifecycleInterval     = 24 * time.Hour
	maxRetentionAge          = 100 * 365 * 24 * time.Hour
	minRetentionBytes        = 1 << 10
	// A pass compacts and trims at most lifecycleEpochs epochs, collects
	// at most lifecycleCollects, and applies the retention of at most
	// lifecycleStreams streams, taking each in turn across passes; it
	// gives up after passBudget, and the next goes on from there (every
	// step of the library is idempotent and moves its cursor as it goes).
	lifecycleEpochs   = 64
	lifecycleCollects = 16
	lifecycleStreams  = 1024
	minPassBudget     = 30 * time.Second
	maxPassBudget     = 10 * time.Minute
)

// clock returns Clock, or def when it is nil.
func (c LifecycleConfig) clock(def clock.Clock) clock.Clock {
	if c.Clock == nil {
		return def
	}
	return c.Clock
}

func (c LifecycleConfig) validate() error {
	if p := c.Policy; p.MaxAge < 0 || p.MaxBytes < 0 {
		return Refuse("retention-age", p.MaxAge, "0 or more, and -retention-bytes %d too", p.MaxBytes)
	}
	return nil
}

func (c LifecycleConfig) or() LifecycleConfig {
	if c.Interval == 0 {
		c.Interval = defaultLifecycleInterval
	}
	return c
}

// lifecycleFlags are the flags of the lifecycle.
type lifecycleFlags struct {
	interval time.Duration
	age      time.Duration
	bytes    int64
	records  uint64
}

func (f *lifecycleFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.interval, "compact-interval", defaultLifecycleInterval, fmt.Sprintf("time between the holder's passes that apply retention, compact flights into per-stream segments, trim them and collect garbage, %v to %v (0: none; the zones and the index then keep every flight and ref)", minLifecycleInterval, maxLifecycleInterval))
	fs.DurationVar(&f.age, "retention-age", 0, "drop a stream's records once they joined the index longer ago than this, a ref page (64 records) at a time, 1m to 100 years (0: no limit by age)")
	fs.Int64Var(&f.bytes, "retention-bytes", 0, "keep at most this many bytes of each stream's records, the newest, 1 KiB or more (0: no limit by size)")
	fs.Uint64Var(&f.records, "retention-records", 0, "keep at most this many of each stream's records, the newest (0: no limit by count)")
}

// check refuses a value out of its bounds, and retention without passes
// to apply it.
func (f *lifecycleFlags) check() error {
	switch {
	case f.interval != 0 && (f.interval < minLifecycleInterval || f.interval > maxLifecycleInterval):
		return Refuse("compact-interval", f.interval, "0 (none) or %v to %v", minLifecycleInterval, maxLifecycleInterval)
	case f.age != 0 && (f.age < time.Minute || f.age > maxRetentionAge):
		return Refuse("retention-age", f.age, "0 (no limit) or 1m to %v", maxRetentionAge)
	case f.bytes != 0 && f.bytes < minRetentionBytes:
		return Refuse("retention-bytes", f.bytes, "0 (no limit) or %d bytes or more", minRetentionBytes)
	case f.interval == 0 && f.policy() != (settle.Policy{}):
		return Refuse("compact-interval", f.interval, "more than 0 with -retention-age, -retention-bytes or -retention-records: the holder's passes apply them")
	}
	return nil
}

func (f *lifecycleFlags) policy() settle.Policy {
	return settle.Policy{MaxAge: f.age, MaxBytes: f.bytes, MaxRecords: f.records}
}

// config is the flags in the node's terms, where 0 is the default and a
// negative interval turns passes off.
func (f *lifecycleFlags) config() LifecycleConfig {
	c := LifecycleConfig{Interval: f.interval, Policy: f.policy()}
	if c.Interval == 0 {
		c.Interval = -1
	}
	return c
}

// lifecycle is the state a node's passes keep from one to the next.
type lifecycle struct {
	cfg LifecycleConfig
	clk clock.Clock
	// Where the last pass stopped in each round: the last stream
	// retained, the last epoch compacted and the last collected.
	streamAfter, epochAfter, collectAfter string
	// retrim holds the epochs a trim left objects in.
	retrim map[string]bool
	// stuck holds, for each epoch with uncompacted flights, its rewritten
	// cursor and when a pass first found it there.
	stuck map[string]stuckAt
}

type stuckAt struct {
	rewritten uint64
	since     time.Time
}

// passReport is what one pass did.
type passReport struct {
	streams, retained, settled, epochs, collected int
	expired                                       uint64 // offsets retention dropped
	pagesDropped                                  int
	segments, pages                               int
	compacted                                     int64 // bytes rewritten into segments
	flightsDeleted, segmentsDeleted               int
	backlog                                       uint64
	oldest                                        time.Duration
	errs                                          []error
}

func (r *passReport) did() bool {
	return r.expired > 0 || r.pagesDropped > 0 || r.settled > 0 || r.segments > 0 || r.flightsDeleted > 0 || r.segmentsDeleted > 0
}

// StartLifecycle runs the node's lifecycle passes every cfg.Interval
// while it holds the grant, until stopLifecycle.
func (n *Node) StartLifecycle(cfg LifecycleConfig) {
	var ctx context.Context
	ctx, n.lifecycleStop = context.WithCancel(context.Background())
	n.lifecycleDone = make(chan struct{})
	go func() {
		defer close(n.lifecycleDone)
		n.runLifecycle(ctx, cfg)
	}()
}

// StopLifecycle ends the lifecycle passes and waits for the one running.
func (n *Node) StopLifecycle() {
	if n.lifecycleStop != nil {
		n.lifecycleStop()
		<-n.lifecycleDone
		n.lifecycleStop = nil
	}
}

// runLifecycle runs a pass every cfg.Interval until ctx ends, while the
// node holds the grant and its star runs.
func (n *Node) runLifecycle(ctx context.Context, cfg LifecycleConfig) {
	lc := &lifecycle{cfg: cfg, clk: cfg.clock(n.clk), retrim: map[string]bool{}, stuck: map[string]stuckAt{}}
	budget := min(max(cfg.Interval, minPassBudget), maxPassBudget)
	for clock.Sleep(ctx, lc.clk, cfg.Interval) == nil {
		h, err := n.holder()
		if err != nil {
			// The gauges are the holder's.
			n.Metrics.backlog.Set(0)
			n.Metrics.oldestUncompacted.Set(0)
			continue
		}
		pctx, cancel := context.WithCancelCause(ctx)
		t := lc.clk.AfterFunc(budget, func() { cancel(errPassBudget) })
		lc.pass(pctx, n, h)
		t.Stop()
		cancel(nil)
		n.LifecyclePasses.Add(1)
	}
}

// errPassBudget ends a pass that ran out of time.
var errPassBudget = errors.New("broker: the lifecycle pass ran out of time; the next goes on from where it stopped")

// pass runs one pass, records it in the metrics and logs it in one line.
func (lc *lifecycle) pass(ctx context.Context, n *Node, h *Holding) passReport {
	start := lc.clk.Now()
	var rep passReport
	fail := func(stage string, err error) {
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errPassBudget) {
			return // ended by the node's shutdown: not a failure
		}
		n.Metrics.lifecycleErrors.WithLabelValues(stage).Inc()
		rep.errs = append(rep.errs, fmt.Errorf("%s: %w", stage, err))
	}
	// held reports whether the pass may go on: a pass that outlived its
	// holding would have every write refused anyway.
	held := func() bool { return ctx.Err() == nil && n.Current() == h }
	// The checkpoint moves past what was acknowledged and not covered
	// yet: more to compact.
	if err := h.Star.Absorb(ctx); err != nil {
		fail("absorb", err)
	}
	if lc.cfg.Policy != (settle.Policy{}) && held() {
		lc.retain(ctx, n, &rep, fail, held)
	}
	if held() {
		lc.epochs(ctx, n, &rep, fail, held)
	}
	if cause := context.Cause(ctx); errors.Is(cause, errPassBudget) {
		fail("budget", cause)
	}
	m := n.Metrics
	m.compactedBytes.Add(float64(rep.compacted))
	m.segmentsWritten.Add(float64(rep.segments))
	m.objectsDeleted.WithLabelValues("flight").Add(float64(rep.flightsDeleted))
	m.objectsDeleted.WithLabelValues("segment").Add(float64(rep.segmentsDeleted))
	m.refPagesDropped.Add(float64(rep.pagesDropped))
	result := "ok"
	if len(rep.errs) > 0 {
		result = "error"
	}
	m.lifecyclePasses.WithLabelValues(result).Inc()
	took := lc.clk.Now().Sub(start)
	m.lifecycleSeconds.Observe(took.Seconds())

	level := slog.LevelDebug
	switch {
	case len(rep.errs) > 0:
		level = slog.LevelWarn
	case rep.did():
		level = slog.LevelInfo
	}
	attrs := []any{"streams", rep.streams, "retained", rep.retained, "records_expired", rep.expired, "ref_pages_dropped", rep.pagesDropped,
		"settled", rep.settled, "epochs", rep.epochs, "segments_written", rep.segments, "pages_moved", rep.pages, "bytes_compacted", rep.compacted,
		"flights_deleted", rep.flightsDeleted, "epochs_collected", rep.collected, "segments_deleted", rep.segmentsDeleted,
		"backlog_flights", rep.backlog, "oldest_uncompacted", rep.oldest.Round(time.Millisecond), "took", took.Round(time.Millisecond)}
	if len(rep.errs) > 0 {
		attrs = append(attrs, "errors", len(rep.errs), "err", rep.errs[0])
	}
	n.log.Log(context.WithoutCancel(ctx), level, "lifecycle pass", attrs...)
	return rep
}

// retain applies the policy to the next streams in turn.
func (lc *lifecycle) retain(ctx context.Context, n *Node, rep *passReport, fail func(string, error), held func() bool) {
	names, err := n.streamIDs(ctx, "")
	if err != nil {
		fail("retain", err)
		return
	}
	for _, s := range inTurn(names, func(s string) string { return s }, lc.streamAfter, lifecycleStreams) {
		if !held() {
			return
		}
		lc.streamAfter = s
		rep.streams++
		before, err := n.refs.Start(ctx, s)
		if err != nil {
			fail("retain", err)
			continue
		}
		r, err := n.refs.RetainPolicy(ctx, s, lc.cfg.Policy)
		rep.pagesDropped += r.PagesDeleted
		if r.Start > before {
			rep.retained++
			rep.expired += r.Start - before
			n.Metrics.recordsExpired.WithLabelValues(cmp.Or(r.By, "unknown")).Add(float64(r.Start - before))
		}
		if err != nil {
			fail("retain", err)
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

// epochs compacts, trims and collects the next epochs in turn, and
// measures the backlog.
func (lc *lifecycle) epochs(ctx context.Context, n *Node, rep *passReport, fail func(string, error), held func() bool) {
	all, err := n.epochRefs(ctx)
	if err != nil {
		fail("list", err)
		return
	}
	// Settle what earlier holders left open, oldest first. Only a grant
	// still guarding the node's writes lets it: 0 when the agent cleared
	// it.
	rev := n.guard.Revision()
	settled := 0
	for i, e := range all {
		if e.state == epoch.StateSettled || e.created >= rev || settled == lifecycleEpochs || !held() {
			continue
		}
		settled++
		r, err := n.settler.Settle(ctx, e.star, e.ep)
		if err != nil {
			fail("settle", err)
			continue
		}
		n.Metrics.settle("lifecycle", r)
		rep.settled++
		if rec, err := n.minter.Get(ctx, e.star, e.ep); err == nil {
			all[i].state, all[i].cur = rec.State, rec.Cursors
		}
	}
	var work, segmented []epochRef
	for _, e := range all {
		if e.backlog() > 0 || e.cur.Trimmed < e.cur.Rewritten || lc.retrim[e.key] {
			work = append(work, e)
		}
		if e.cur.Rewritten > 0 {
			segmented = append(segmented, e)
		}
	}
	after := map[string]epochRef{} // the cursors after the pass
	for _, e := range inTurn(work, epochRef.id, lc.epochAfter, lifecycleEpochs) {
		if !held() {
			break
		}
		lc.epochAfter = e.key
		rep.epochs++
		if e.backlog() > 0 {
			cr, err := n.compactor.Compact(ctx, e.star, e.ep)
			rep.segments += cr.Segments
			rep.pages += cr.Pages
			rep.compacted += cr.Bytes
			if cr.Passes > 0 {
				e.cur.Rewritten, e.cur.Checkpoint = max(e.cur.Rewritten, cr.Rewritten), max(e.cur.Checkpoint, cr.Checkpoint)
			}
			if err != nil {
				fail("compact", err)
			}
		}
		if e.cur.Trimmed < e.cur.Rewritten || lc.retrim[e.key] {
			tr, err := n.settler.TrimRewritten(ctx, e.star, e.ep)
			rep.flightsDeleted += tr.Deleted
			e.cur.Trimmed = max(e.cur.Trimmed, tr.Trimmed)
			if tr.Left > 0 || err != nil {
				lc.retrim[e.key] = true
			} else {
				delete(lc.retrim, e.key)
			}
			if err != nil {
				fail("trim", err)
			}
		}
		after[e.key] = e
	}
	for _, e := range inTurn(segmented, epochRef.id, lc.collectAfter, lifecycleCollects) {
		if !held() {
			break
		}
		lc.collectAfter = e.key
		cr, err := n.compactor.Collect(ctx, e.star, e.ep)
		rep.collected++
		rep.segmentsDeleted += cr.Deleted
		if err != nil {
			fail("collect", err)
		}
	}
	// The backlog, and how long the oldest uncompacted flight has been
	// found waiting at its epoch's rewritten cursor.
	now := lc.clk.Now()
	seen := map[string]bool{}
	for _, e := range all {
		if a, ok := after[e.key]; ok {
			e = a
		}
		b := e.backlog()
		if b == 0 {
			continue
		}
		rep.backlog += b
		seen[e.key] = true
		s, ok := lc.stuck[e.key]
		if !ok || s.rewritten != e.cur.Rewritten {
			s = stuckAt{rewritten: e.cur.Rewritten, since: now}
			lc.stuck[e.key] = s
		}
		rep.oldest = max(rep.oldest, now.Sub(s.since))
	}
	for k := range lc.stuck {
		if !seen[k] {
			delete(lc.stuck, k)
		}
	}
	n.Metrics.backlog.Set(float64(rep.backlog))
	n.Metrics.oldestUncompacted.Set(rep.oldest.Seconds())
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

// epochRefs reads every epoch record under the node's root: the stars
// from one listing of the chains, then each star's records, in key order.
func (n *Node) epochRefs(ctx context.Context) ([]epochRef, error) {
	prefix := n.Config.Root + "chains/"
	kvs, _, err := n.Config.Store.List(ctx, prefix)
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
		for rec, err := range n.minter.Epochs(ctx, star) {
			if err != nil {
				return nil, err
			}
			c, ok := created[n.minter.RecordKey(star, rec.Epoch)]
			if !ok {
				continue // minted after the listing: the next pass sees it
			}
			out = append(out, epochRef{key: fmt.Sprintf("%s/%020d", star, rec.Epoch), star: star, ep: rec.Epoch, state: rec.State, cur: rec.Cursors, created: c})
		}
	}
	slices.SortFunc(out, func(a, b epochRef) int { return strings.Compare(a.key, b.key) })
	return out, nil
}
