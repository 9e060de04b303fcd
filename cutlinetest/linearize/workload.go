package linearize

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// Parts are one process's core objects over the shared stores: what a
// host builds at start-up (lease's "wiring a host", step 1), and what a
// consumer reads with.
type Parts struct {
	Name    string
	Minter  *epoch.Minter
	Fencer  *fence.Fencer
	Refs    *settle.RefIndex
	Settler *settle.Settler
	Reader  *chain.Reader
	// Stream reads a stream's bytes from flights and segments alike.
	Stream *settle.StreamReader
}

// NewParts builds a process's parts named name (its minting and fencing
// identity) over store (under root) and zones, with cutlinetest.Locate
// as the index's Locator, every retry backoff apart.
func NewParts(name string, store metastore.Store, root string, zones chain.Zones, backoff clock.Backoff, logger *slog.Logger) (*Parts, error) {
	p := &Parts{Name: name}
	var err error
	if p.Minter, err = epoch.NewMinter(store, epoch.Options{Root: root, Identity: name, Logger: logger}); err != nil {
		return nil, err
	}
	if p.Fencer, err = fence.New(p.Minter, zones, fence.Options{Identity: name, Backoff: backoff, Logger: logger}); err != nil {
		return nil, err
	}
	if p.Refs, err = settle.NewRefIndex(store, root, cutlinetest.Locate); err != nil {
		return nil, err
	}
	if p.Settler, err = settle.New(p.Minter, zones, p.Refs, settle.Options{Fencer: p.Fencer, Backoff: backoff, Logger: logger}); err != nil {
		return nil, err
	}
	if p.Reader, err = chain.NewReader(p.Minter, zones, chain.ReaderOptions{Logger: logger}); err != nil {
		return nil, err
	}
	if p.Stream, err = settle.NewStreamReader(p.Minter, zones, p.Refs, settle.StreamReaderOptions{Logger: logger}); err != nil {
		return nil, err
	}
	return p, nil
}

// StepKind is what happens to the serving star during a history.
type StepKind int

const (
	// Crash: the serving star crashes (lease.Star.Abort) with appends in
	// flight and its session ends; a new star opens the stream, and the
	// open gate fences and settles the crashed star's epoch (the registry
	// has converged on its death).
	Crash StepKind = iota + 1
	// Restart: as Crash, but the successor is a new incarnation of the
	// same star: Start settles its earlier epochs, and the gate finds the
	// stream's epoch superseded.
	Restart
	// Handoff: the serving star leaves cleanly (lease.Star.Close: Finish,
	// the clean-release mark) with appends in flight; a new star opens
	// the stream and consumes the mark.
	Handoff
	// SessionLost: the serving star's session ends while it runs and
	// appends (a partition from the metastore): it evicts the stream on
	// its own, while a new star opens it through the gate, which fences
	// and settles its epoch. The old star is closed once the new one
	// serves.
	SessionLost
	// Roll: the serving star rolls to its next constants (Options.Rolls)
	// while appends run.
	Roll
	// Hook: Step.Do runs (a zone is taken down, a server killed).
	Hook
)

func (k StepKind) String() string {
	switch k {
	case Crash:
		return "crash"
	case Restart:
		return "restart"
	case Handoff:
		return "handoff"
	case SessionLost:
		return "session lost"
	case Roll:
		return "roll"
	case Hook:
		return "hook"
	}
	return fmt.Sprintf("StepKind(%d)", int(k))
}

// Step is one event of a history, started once After appends were
// acknowledged.
type Step struct {
	After int
	Kind  StepKind
	// Name and Do are a Hook's.
	Name string
	Do   func(ctx context.Context) error
}

// Config is what Run requires: where the history runs, and how its first
// epoch is made.
type Config struct {
	// Store is the metastore; Root the stars' root in it ("" or ending in
	// '/').
	Store metastore.Store
	Root  string
	// Zones are the buckets every party writes and reads through (fault
	// injection, or real servers).
	Zones []objstore.Bucket
	// Constants are the epoch constants the first star starts with; every
	// successor starts with the constants in effect (Options.Rolls).
	Constants epoch.Constants
}

// validate refuses a Config that cannot run a history, naming the field.
func (c Config) validate() error {
	if c.Store == nil {
		return &cutline.ConfigError{Field: "Store", Value: nil, Reason: "required"}
	}
	if len(c.Zones) == 0 {
		return &cutline.ConfigError{Field: "Zones", Value: "[]", Reason: "required"}
	}
	if err := c.Constants.Validate(); err != nil {
		return fmt.Errorf("linearize: Constants: %w", err)
	}
	return nil
}

// Options tunes Run. The zero value works.
type Options struct {
	// Rolls are the constants each Roll step moves to, in turn (cycling).
	// Only Roll steps need them: one without Rolls fails.
	Rolls []epoch.Constants
	// Stream is the stream appended to. Default "s".
	Stream string
	// Appenders and Readers are the concurrent clients. Defaults 3 and 2.
	Appenders, Readers int
	// Appends is how many acknowledged appends end the history. Default
	// 100.
	Appends int
	// Steps happen in order, each once its After is reached.
	Steps []Step
	// SessionTTL is each star's session TTL. Default 10s.
	SessionTTL time.Duration
	// EndSession ends a star's session as a crash (or a partition) does:
	// its TTL runs out. Nil means Session.Close, which revokes it.
	EndSession func(ctx context.Context, s metastore.Session) error
	// Backoff spaces every party's retries. Default 2ms–50ms.
	Backoff clock.Backoff
	// OpTimeout bounds each client's wait for one append; one that times
	// out is recorded with an unknown outcome. Default 20s.
	OpTimeout time.Duration
	// StepTimeout bounds each step (a takeover's open through the gate).
	// Default 60s.
	StepTimeout time.Duration
	// ReadEvery is the pause of each reader between reads. Default 2ms.
	ReadEvery time.Duration
	// Maintenance, when its Every is set, runs a maintenance process
	// beside the stars and the clients, as a host runs one: compaction,
	// trim, retention and collection, concurrently with the appends and
	// the reads. The readers then read through settle.StreamReader (from
	// flights and segments alike), from offset 0 and, once that is below
	// the retention point, from the point the trimmed answer names.
	Maintenance Maintenance
	// Logger is given to every party. Nil discards.
	Logger *slog.Logger
	// Logf, when set, receives the history's progress (a test's Logf).
	Logf func(format string, args ...any)
}

// Maintenance tunes the maintenance process of Options. Each round,
// every Every, when Keep is set it moves the stream's retention point to
// Keep records before the end of its coverage (RefIndex.Retain, recorded
// in the history as a Retain); then a pass of a settle.Maintainer
// compacts every epoch of every star that served the stream
// (settle.Compactor, with SegmentBytes and PassSlots), trims the flights
// it rewrote and, with Keep, those no retained ref needs (RefIndex.Needed),
// and collects the segments no page names. A step that fails is left to
// the next round.
type Maintenance struct {
	Every        time.Duration
	Keep         uint64
	SegmentBytes int
	PassSlots    int
}

// MaintenanceReport is what the maintenance process did.
type MaintenanceReport struct {
	Rounds int
	// Pages moved onto Segments by compaction, flights Trimmed (copies
	// deleted), Retains acknowledged, segments Collected.
	Pages, Segments, Trimmed, Retains, Collected int
	// Failures of a step, left to the next round, and the last one.
	Failures int
	Last     string
	// ChunksFromSegments counts the chunks readers were served from
	// segments.
	ChunksFromSegments int
}

// Report is what Run did besides the history.
type Report struct {
	// Stars started (the first, and one per takeover).
	Stars int
	// Steps, one line each: what happened and what the gate decided.
	Steps []string
	// Elapsed is how long the history ran.
	Elapsed time.Duration
	// Maintenance is what the maintenance process did (zero without one).
	Maintenance MaintenanceReport
}

// Run records one history of appends and reads on a stream: Appenders
// clients append through the serving lease.Star, as a host does (the offset is the stream's next, the payload a
// cutlinetest.Record, the client answered once the flight is acknowledged
// and covered in the index: settle's "cover on acknowledgement"), while
// Readers clients read the stream back through another process's
// index and chain reader (ReadStream), and the Steps take the stream over
// and roll the chain. Each client retries a failed append as a new value.
// It ends once Options.Appends appends were acknowledged: the serving star
// closes cleanly and one last read is recorded.
//
// A Config without a Store, without Zones or with invalid Constants is
// refused with a *cutline.ConfigError naming the field, before anything
// runs. The history is returned also when Run fails; the error joins what
// went wrong beyond a history's verdict: a step that failed, a read that
// found the stream inconsistent (ErrInconsistent), a setup that failed.
func Run(ctx context.Context, cfg Config, o Options) (*History, Report, error) {
	if err := cfg.validate(); err != nil {
		return &History{}, Report{}, err
	}
	if o.Stream == "" {
		o.Stream = "s"
	}
	if o.Appenders <= 0 {
		o.Appenders = 3
	}
	if o.Readers < 0 {
		o.Readers = 0
	} else if o.Readers == 0 {
		o.Readers = 2
	}
	if o.Appends <= 0 {
		o.Appends = 100
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 10 * time.Second
	}
	if o.EndSession == nil {
		o.EndSession = func(ctx context.Context, s metastore.Session) error { return s.Close(ctx) }
	}
	if o.Backoff == (clock.Backoff{}) {
		o.Backoff = clock.Backoff{Min: 2 * time.Millisecond, Max: 50 * time.Millisecond}
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 20 * time.Second
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 60 * time.Second
	}
	if o.ReadEvery <= 0 {
		o.ReadEvery = 2 * time.Millisecond
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	r := &run{cfg: cfg, o: o, hist: &History{}, changed: make(chan struct{}), stop: make(chan struct{}), constants: cfg.Constants}
	start := time.Now()
	err := r.run(ctx)
	r.report.Elapsed = time.Since(start)
	r.report.Maintenance = r.maintained
	r.report.Maintenance.ChunksFromSegments = int(r.fromSegs.Load())
	return r.hist, r.report, err
}

type run struct {
	cfg       Config
	o         Options
	hist      *History
	zones     chain.Zones
	report    Report
	constants epoch.Constants // those in effect
	rolls     int

	mu      sync.Mutex
	cur     *host         // the serving star; nil during a takeover
	changed chan struct{} // closed when cur changes
	errs    []error

	acked   atomic.Int64
	stop    chan struct{} // closed once the appends are in
	stopped sync.Once

	stars      atomic.Int64 // stars named so far: star-1 … star-N
	fromSegs   atomic.Int64 // chunks readers were served from segments
	maintained MaintenanceReport
}

// host is a running star and what its clients need of it.
type host struct {
	name  string
	parts *Parts
	star  *lease.Star
	sess  metastore.Session
	mu    sync.Mutex // orders Next with Submit
}

func (r *run) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *run) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

func (r *run) done() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *run) run(ctx context.Context) error {
	var err error
	if r.zones, err = chain.NewZones(r.cfg.Zones...); err != nil {
		return err
	}
	first, err := r.startHost(ctx, r.starName())
	if err != nil {
		return fmt.Errorf("the first star: %w", err)
	}
	r.serve(first)
	var readers []*Parts
	for i := range r.o.Readers + 1 { // the last one reads once, at the end
		p, err := NewParts(fmt.Sprintf("reader-%d", i), r.cfg.Store, r.cfg.Root, r.zones, r.o.Backoff, r.o.Logger)
		if err != nil {
			return err
		}
		readers = append(readers, p)
	}

	var wg sync.WaitGroup
	for c := range r.o.Appenders {
		wg.Go(func() { r.appender(ctx, c) })
	}
	for i := range r.o.Readers {
		wg.Go(func() { r.reader(ctx, r.o.Appenders+i, readers[i]) })
	}
	if r.o.Maintenance.Every > 0 {
		p, err := NewParts("maintenance", r.cfg.Store, r.cfg.Root, r.zones, r.o.Backoff, r.o.Logger)
		if err != nil {
			r.end()
			wg.Wait()
			return err
		}
		wg.Go(func() { r.maintain(ctx, r.o.Appenders+r.o.Readers+1, p) })
	}
	stepsDone := make(chan struct{})
	go func() {
		defer close(stepsDone)
		r.steps(ctx)
	}()
	// The history ends once the appends are in (or ctx ends).
	for r.acked.Load() < int64(r.o.Appends) && ctx.Err() == nil && !r.done() {
		sleep(ctx, time.Millisecond)
	}
	r.end()
	<-stepsDone
	wg.Wait()

	// The serving star closes cleanly; one last read sees everything.
	if h := r.take(); h != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.StepTimeout)
		if err := h.star.Close(cctx); err != nil {
			r.fail(fmt.Errorf("closing %s: %w", h.name, err))
		}
		_ = h.sess.Close(cctx)
		cancel()
	}
	// A read that fails (a fault) is tried again, a while.
	last := r.o.Appenders + r.o.Readers
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.StepTimeout)
	defer cancel()
	for {
		err := r.readOnce(lctx, last, readers[r.o.Readers])
		if err == nil {
			break
		}
		if errors.Is(err, ErrInconsistent) || lctx.Err() != nil {
			r.fail(fmt.Errorf("the last read: %w", err))
			break
		}
		sleep(lctx, r.o.ReadEvery)
	}
	if n := r.acked.Load(); n < int64(r.o.Appends) {
		r.fail(fmt.Errorf("%d appends acknowledged of %d: %w", n, r.o.Appends, ctx.Err()))
	}
	return r.err()
}

// end stops the clients and the steps.
func (r *run) end() { r.stopped.Do(func() { close(r.stop) }) }

func (r *run) starName() string {
	r.report.Stars++
	r.stars.Store(int64(r.report.Stars))
	return fmt.Sprintf("star-%d", r.report.Stars)
}

// startHost starts star name over parts of its own and opens the stream
// through the gate.
func (r *run) startHost(ctx context.Context, name string) (*host, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.StepTimeout)
	defer cancel()
	parts, err := NewParts(name, r.cfg.Store, r.cfg.Root, r.zones, r.o.Backoff, r.o.Logger)
	if err != nil {
		return nil, err
	}
	sess, err := r.cfg.Store.NewSession(ctx, r.o.SessionTTL)
	if err != nil {
		return nil, fmt.Errorf("%s: session: %w", name, err)
	}
	star, err := lease.Start(ctx, lease.Config{
		Star: name, Store: r.cfg.Store, Root: r.cfg.Root, Session: sess,
		Minter: parts.Minter, Settler: parts.Settler, Index: parts.Refs, Constants: r.constants,
	}, lease.Options{
		Roller:  roll.Options{Backoff: r.o.Backoff, Writer: chain.WriterOptions{Backoff: r.o.Backoff, Logger: r.o.Logger}, Logger: r.o.Logger},
		Backoff: r.o.Backoff,
		Logger:  r.o.Logger,
	})
	if err != nil {
		_ = sess.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	h := &host{name: name, parts: parts, star: star, sess: sess}
	ten, err := star.OpenWait(ctx, r.o.Stream, lease.OpenOptions{}, 5*time.Millisecond)
	if err != nil {
		star.Abort()
		_ = sess.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%s: open %s: %w", name, r.o.Stream, err)
	}
	line := fmt.Sprintf("%s opened %s at offset %d, tenure %d: %s", name, r.o.Stream, ten.Next, ten.Tenure, ten.Decision)
	if ten.Settled != nil {
		line += fmt.Sprintf(" (%s/%d: cut %d, covered %d)", ten.Predecessor.Star, ten.Predecessor.Epoch, ten.Settled.Cut, ten.Settled.Covered)
	}
	r.o.Logf("%s", line)
	r.report.Steps = append(r.report.Steps, line)
	return h, nil
}

// serve makes h the serving star.
func (r *run) serve(h *host) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = h
	close(r.changed)
	r.changed = make(chan struct{})
}

// take stops the serving star from taking new appends and returns it.
func (r *run) take() *host {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.cur
	r.cur = nil
	close(r.changed)
	r.changed = make(chan struct{})
	return h
}

// serving waits for a serving star other than not; nil once the history
// ends.
func (r *run) serving(ctx context.Context, not *host) *host {
	for {
		r.mu.Lock()
		h, ch := r.cur, r.changed
		r.mu.Unlock()
		if h != nil && h != not {
			return h
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Millisecond): // not may serve again (a failed roll)
			not = nil
		case <-r.stop:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (r *run) appender(ctx context.Context, c int) {
	var last *host // where the last append failed
	for n := 0; !r.done(); n++ {
		h := r.serving(ctx, last)
		if h == nil {
			return
		}
		last = nil
		if !r.append(ctx, h, c, fmt.Sprintf("c%d.%d", c, n)) {
			last = h
		}
	}
}

// append appends value through h as a host does, records it, and reports
// whether it was acknowledged.
func (r *run) append(ctx context.Context, h *host, c int, value string) bool {
	p := r.hist.Append(c, value, 0)
	wctx, cancel := context.WithTimeout(ctx, r.o.OpTimeout)
	defer cancel()
	h.mu.Lock()
	next, err := h.star.Next(r.o.Stream)
	if err != nil {
		h.mu.Unlock()
		p.Absent(err)
		return false
	}
	p.At(next)
	f, err := h.star.Submit(wctx, cutlinetest.Record(r.o.Stream, next, value))
	h.mu.Unlock()
	if err != nil {
		p.Absent(err)
		return false
	}
	pos, err := f.Wait(wctx)
	switch {
	case errors.Is(err, chain.ErrFenced), errors.Is(err, roll.ErrDropped):
		p.Absent(err)
		return false
	case err != nil:
		p.Unknown(err)
		return false
	}
	// Cover on acknowledgement: the client hears of it once the index
	// covers it.
	if err := h.star.Absorb(wctx); err != nil {
		p.Unknown(fmt.Errorf("cover: %w", err))
		return false
	}
	if last, _ := h.star.Absorbed(); last.Less(pos) {
		p.Unknown(fmt.Errorf("cover: absorbed up to %v, acknowledged at %v", last, pos))
		return false
	}
	p.Acked()
	r.acked.Add(1)
	return true
}

func (r *run) reader(ctx context.Context, c int, p *Parts) {
	for !r.done() && ctx.Err() == nil {
		if err := r.readOnce(ctx, c, p); errors.Is(err, ErrInconsistent) {
			r.fail(err)
		}
		sleep(ctx, r.o.ReadEvery)
	}
}

// readOnce records a read of the whole stream by client c through p, and
// returns its error (nil once a log was read). Without maintenance it
// reads the refs and the flights (ReadStream). With it, it reads through
// the StreamReader from offset 0 and, when answered trimmed, again from
// the retention point the answer names, a few times (the point may move
// on meanwhile); each read is recorded.
func (r *run) readOnce(ctx context.Context, c int, p *Parts) error {
	if r.o.Maintenance.Every <= 0 {
		rd := r.hist.Read(c)
		ids, err := ReadStream(ctx, p.Refs, p.Reader, r.o.Stream)
		if err != nil {
			rd.Failed(err)
			return err
		}
		rd.Done(ids)
		return nil
	}
	var from uint64
	for range 4 {
		rd := r.hist.ReadFrom(c, from)
		ids, segs, err := readFrom(ctx, p.Stream, r.o.Stream, from, rd.Admitted)
		r.fromSegs.Add(int64(segs))
		if te, ok := errors.AsType[*settle.TrimmedError](err); ok {
			rd.Trimmed(te.Start)
			from = te.Start
			continue
		}
		if err != nil {
			rd.Failed(err)
			return err
		}
		rd.Done(ids)
		return nil
	}
	return fmt.Errorf("%s: answered trimmed %d times in a row", r.o.Stream, 4)
}

// maintain runs maintenance rounds every Maintenance.Every until the
// history ends; client c records its retains.
func (r *run) maintain(ctx context.Context, c int, p *Parts) {
	mo := r.o.Maintenance
	m, err := r.maintainer(p)
	if err != nil {
		r.fail(fmt.Errorf("maintenance: %w", err))
		return
	}
	tick := time.NewTicker(mo.Every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-r.stop:
			// A run too short for a retention still gets one: every
			// history then holds one, whatever the machine's speed.
			if r.maintained.Retains == 0 {
				r.maintainOnce(ctx, c, p, m)
			}
			return
		case <-ctx.Done():
			return
		}
		r.maintainOnce(ctx, c, p, m)
	}
}

// maintainer is the settle.Maintainer of the maintenance process: every
// epoch of the root each pass, nothing settled (the serving star's
// takeovers settle), the flights no retained ref needs trimmed.
func (r *run) maintainer(p *Parts) (*settle.Maintainer, error) {
	mo := r.o.Maintenance
	comp, err := settle.NewCompactor(p.Minter, r.zones, p.Refs, p.Name, settle.CompactorOptions{
		SegmentBytes: mo.SegmentBytes, PassSlots: mo.PassSlots, Logger: r.o.Logger})
	if err != nil {
		return nil, err
	}
	return settle.NewMaintainer(settle.MaintainerConfig{Store: r.cfg.Store, Minter: p.Minter, Settler: p.Settler, Compactor: comp, Refs: p.Refs},
		settle.MaintainerOptions{TrimUnneeded: mo.Keep > 0, MaxEpochs: settle.MaxMaintainBound, MaxCollects: settle.MaxMaintainBound})
}

// maintainOnce is one maintenance round (see Maintenance): the retention,
// recorded in the history, then a pass of m.
func (r *run) maintainOnce(ctx context.Context, c int, p *Parts, m *settle.Maintainer) {
	mr := &r.maintained
	mr.Rounds++
	if keep := r.o.Maintenance.Keep; keep > 0 {
		if next, err := p.Refs.Next(ctx, r.o.Stream); err != nil {
			mr.Failures++
			mr.Last = fmt.Sprintf("next: %v", err)
		} else if next > keep {
			r.retain(ctx, c, p, next-keep)
		}
	}
	rep, _ := m.Pass(ctx)
	mr.Pages += rep.Pages
	mr.Segments += rep.Segments
	mr.Trimmed += rep.FlightsDeleted
	mr.Collected += rep.Garbage
	mr.Failures += len(rep.Errors)
	if n := len(rep.Errors); n > 0 {
		mr.Last = rep.Errors[n-1].Error()
	}
}

// retain moves the stream's retention point to point, recorded in the
// history by client c.
func (r *run) retain(ctx context.Context, c int, p *Parts, point uint64) {
	pr := r.hist.Retain(c, point)
	_, err := p.Refs.Retain(ctx, r.o.Stream, point)
	switch {
	case err == nil:
		pr.Acked()
		r.maintained.Retains++
	case errors.Is(err, cutline.ErrInvalid):
		pr.Absent(err) // refused before it wrote
	default:
		pr.Unknown(err) // the point may have moved before a page delete failed
		r.maintained.Failures++
		r.maintained.Last = fmt.Sprintf("retain at %d: %v", point, err)
	}
}

func (r *run) steps(ctx context.Context) {
	for i, st := range r.o.Steps {
		for r.acked.Load() < int64(st.After) {
			if r.done() || ctx.Err() != nil {
				return
			}
			sleep(ctx, time.Millisecond)
		}
		if r.done() {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, r.o.StepTimeout)
		err := r.step(sctx, st)
		cancel()
		if err != nil {
			r.fail(fmt.Errorf("step %d (%s after %d): %w", i, st.Kind, st.After, err))
			r.end()
			return
		}
	}
}

func (r *run) step(ctx context.Context, st Step) error {
	r.o.Logf("step %s after %d acknowledged (%d now)", st.Kind, st.After, r.acked.Load())
	switch st.Kind {
	case Hook:
		r.report.Steps = append(r.report.Steps, "hook: "+st.Name)
		return st.Do(ctx)
	case Roll:
		r.mu.Lock()
		h := r.cur
		r.mu.Unlock()
		if h == nil || len(r.o.Rolls) == 0 {
			return errors.New("nothing to roll")
		}
		c := r.o.Rolls[r.rolls%len(r.o.Rolls)]
		r.rolls++
		if err := h.star.Roll(ctx, c); err != nil {
			return err
		}
		r.constants = c
		line := fmt.Sprintf("%s rolled to epoch %d (W=%d, window %d)", h.name, h.star.Epoch().Epoch, c.W, c.Window)
		r.o.Logf("%s", line)
		r.report.Steps = append(r.report.Steps, line)
		return nil
	case Crash, Restart:
		old := r.take()
		old.star.Abort()
		if err := r.o.EndSession(ctx, old.sess); err != nil {
			return fmt.Errorf("ending %s's session: %w", old.name, err)
		}
		name := old.name
		if st.Kind == Crash {
			name = r.starName()
		}
		r.report.Steps = append(r.report.Steps, fmt.Sprintf("%s: %s crashed", st.Kind, old.name))
		h, err := r.startHost(ctx, name)
		if err != nil {
			return err
		}
		r.serve(h)
		return nil
	case Handoff:
		old := r.take()
		if err := old.star.Close(ctx); err != nil {
			return fmt.Errorf("closing %s: %w", old.name, err)
		}
		_ = old.sess.Close(ctx)
		r.report.Steps = append(r.report.Steps, fmt.Sprintf("handoff: %s closed", old.name))
		h, err := r.startHost(ctx, r.starName())
		if err != nil {
			return err
		}
		r.serve(h)
		return nil
	case SessionLost:
		r.mu.Lock()
		old := r.cur
		r.mu.Unlock()
		if err := r.o.EndSession(ctx, old.sess); err != nil {
			return fmt.Errorf("ending %s's session: %w", old.name, err)
		}
		r.report.Steps = append(r.report.Steps, fmt.Sprintf("session lost: %s's session ended", old.name))
		h, err := r.startHost(ctx, r.starName())
		if err != nil {
			return err
		}
		r.serve(h)
		// The old star is gone from the stream; it shuts down.
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = old.star.Close(cctx)
		cancel()
		return nil
	}
	return fmt.Errorf("unknown step %v", st.Kind)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
