package fence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
)

// BarrierSuffix ends the fencer identity written into barrier poison: poison
// a fencer puts ahead of a writer that is still appending (see
// Report.Barriers). Barrier poison lies past the cut; like all poison it
// stands until the star is decommissioned.
const BarrierSuffix = " (barrier)"

// Options configures a Fencer. The zero value works.
type Options struct {
	// Identity is written into every poison object this fencer creates,
	// for forensics: at most MaxIdentity bytes. Default "fencer".
	Identity string
	// Fanout is how many slots the end estimate probes per round (a k-ary
	// search), at most MaxFanout. 1 gives the literal doubling and binary
	// search, one slot per round trip. Default 8.
	Fanout int
	// Span is how many slots the walk reads ahead in one parallel round,
	// at most MaxSpan. Decisions stay per slot and in order. Default 64; 1
	// reads one slot at a time.
	Span int
	// MaxParallel bounds the object requests in flight at once, at most
	// MaxParallelLimit. Default 64. The walk reads slot objects whole, so
	// it holds up to MaxParallel objects in memory at once.
	MaxParallel int
	// Backoff times the retries while a slot is undecided or a step's
	// every request failed. Zero fields mean clock.DefaultMinBackoff and
	// clock.DefaultMaxBackoff; each is at most clock.MaxBackoff.
	Backoff clock.Backoff
	// Clock drives backoff and the undecided age. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives each fence's outcome and barriers at info level, the
	// walk's progress at debug level, and undecided
	// slots at warn level. Nil discards.
	Logger *slog.Logger
}

// Bounds of Options.
const (
	// MaxFanout bounds Options.Fanout.
	MaxFanout = 64
	// MaxSpan bounds Options.Span.
	MaxSpan = 4096
	// MaxParallelLimit bounds Options.MaxParallel.
	MaxParallelLimit = 4096
	// MaxIdentity bounds Options.Identity, so that it fits poison's body
	// together with BarrierSuffix.
	MaxIdentity = chain.MaxPoisonBody - len(BarrierSuffix)
)

func (o *Options) validate() error {
	if o.Identity == "" {
		o.Identity = "fencer"
	}
	if len(o.Identity) > MaxIdentity {
		return &epoch.ConfigError{Field: "Identity", Value: fmt.Sprintf("%.20q…", o.Identity), Reason: fmt.Sprintf("longer than %d bytes", MaxIdentity)}
	}
	for _, b := range []struct {
		field    string
		v        *int
		def, max int
	}{
		{"Fanout", &o.Fanout, 8, MaxFanout},
		{"Span", &o.Span, 64, MaxSpan},
		{"MaxParallel", &o.MaxParallel, 64, MaxParallelLimit},
	} {
		if *b.v < 0 || *b.v > b.max {
			return &epoch.ConfigError{Field: b.field, Value: *b.v, Reason: fmt.Sprintf("must satisfy 0 ≤ %s ≤ %d (0 means %d)", b.field, b.max, b.def)}
		}
		if *b.v == 0 {
			*b.v = b.def
		}
	}
	var be *clock.BackoffError
	if errors.As(o.Backoff.Validate("Backoff"), &be) {
		return &epoch.ConfigError{Field: be.Field, Value: be.Value, Reason: be.Reason}
	}
	o.Backoff = o.Backoff.Or(clock.Backoff{Min: clock.DefaultMinBackoff, Max: clock.DefaultMaxBackoff})
	o.Clock = clock.Or(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Fencer ends epochs: it computes the cut of an epoch by poisoning the slots
// its writer has not filled, and publishes it on the epoch record. It is safe
// for concurrent use; several Fencers (in one process or many) may fence the
// same epoch at once and converge on the same cut.
type Fencer struct {
	minter *epoch.Minter
	zones  chain.Zones
	opts   Options
	seed   uint64 // keys the backoff jitter, so that fencers spread out

	mu        sync.Mutex
	undecided map[epochID]Undecided
}

type epochID struct {
	star  string
	epoch uint64
}

// Undecided describes a slot a fence is blocked on.
type Undecided struct {
	Star    string
	Epoch   uint64
	Slot    uint64
	Waiting []string
	Since   time.Time
}

// New returns a Fencer over the epoch records of m and the buckets of zones.
func New(m *epoch.Minter, zones chain.Zones, opts Options) (*Fencer, error) {
	if m == nil {
		return nil, &epoch.ConfigError{Field: "minter", Value: nil, Reason: "required"}
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Fencer{minter: m, zones: zones, opts: opts, seed: rand.Uint64(), undecided: make(map[epochID]Undecided)}, nil
}

// Undecided lists the slots this fencer is currently blocked on, with the
// time each was first found undecided. Alert on their age.
func (f *Fencer) Undecided() []Undecided {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Undecided, 0, len(f.undecided))
	for _, u := range f.undecided {
		out = append(out, u)
	}
	return out
}

// Report describes one Fence call.
type Report struct {
	Star  string
	Epoch uint64
	Cut   uint64
	// AlreadyFenced: the record already carried the cut; nothing was walked.
	AlreadyFenced bool
	// Estimate is the highest slot the end estimate saw holding a flight
	// (-1 when none), and WalkStart where the walk began.
	Estimate  int64
	WalkStart uint64
	// Rounds counts sequential round trips to the buckets (a batch of
	// parallel requests is one round).
	Rounds int
	// Reads and Creates count object requests.
	Reads, Creates int64
	// Repaired counts flight copies made; Poisoned counts poison objects
	// this fencer created.
	Repaired, Poisoned int64
	// Barriers counts the slots ahead of a live writer that this fencer
	// killed to stop chasing it (see walk), and BarrierAttempts the tries.
	Barriers, BarrierAttempts int
	// Late: another fencer published the cut while this one walked (and
	// settlement may have trimmed slots under it); Cut is the published
	// cut, adopted, and this fencer wrote nothing after it noticed.
	Late bool
	// Duration is the fence's time on the fencer's clock.
	Duration time.Duration
}

// Fence ends the epoch and returns its cut: the first slot that can never be
// acknowledged. Every slot below the cut is committed. When the record is
// already fenced (or settled) it returns the published cut: a later fence is
// a read.
//
// Errors: epoch.ErrNoRecord (the epoch was never minted: nothing to fence),
// ErrUndecided (ctx ended while unreachable buckets held the deciding vote),
// ErrBlocked (a foreign object blocks a slot), epoch.ErrCutMismatch (another
// fencer published a different cut: a bug, never retried), and metastore or
// context errors.
func (f *Fencer) Fence(ctx context.Context, star string, ep uint64) (uint64, error) {
	r, err := f.FenceReport(ctx, star, ep)
	return r.Cut, err
}

// FenceReport is Fence with a report of the work done.
func (f *Fencer) FenceReport(ctx context.Context, star string, ep uint64) (Report, error) {
	start := f.opts.Clock.Now()
	rep := Report{Star: star, Epoch: ep, Estimate: -1}
	rec, err := f.minter.Get(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("fence %s/%d: %w", star, ep, err)
	}
	if rec.Fenced() {
		// Another fencer finished: a slot this fencer was blocked on is
		// decided, so it must stop showing in Undecided.
		f.clearUndecided(rec)
		rep.Cut, rep.AlreadyFenced = rec.Cut, true
		return rep, nil
	}
	buckets, err := f.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return rep, fmt.Errorf("fence %s/%d: %w", star, ep, err)
	}
	w := &walk{f: f, rec: rec, buckets: buckets, rep: &rep}
	from := rec.Cursors.Checkpoint
	if x, ok := w.estimate(ctx); ok {
		rep.Estimate = int64(x)
		// Slot x holds a flight, so its writer assigned it, which it does
		// only while x < release + window. Every slot below the release
		// point was committed, so [0, x−window] is committed. The probe
		// saw only a header: x is trusted only once a copy there is read
		// whole and verifies, since a corrupt copy proves nothing.
		if x >= uint64(rec.Constants.Window) {
			if t := chain.TallySlot(w.observe(ctx, []uint64{x}, true)[0]); t.Copies > 0 {
				from = max(from, x-uint64(rec.Constants.Window))
			} else {
				f.opts.Logger.WarnContext(ctx, "fence estimate rests on a copy that does not verify; walking from the checkpoint",
					"star", star, "epoch", ep, "slot", x)
			}
		}
	}
	rep.WalkStart = from
	cut, err := w.walk(ctx, from)
	rep.Reads, rep.Creates = w.reads.Load(), w.creates.Load()
	rep.Repaired, rep.Poisoned = w.repaired.Load(), w.poisoned.Load()
	var late *fencedMeanwhile
	if errors.As(err, &late) {
		return f.adopt(ctx, rep, late.rec, start), nil
	}
	if err != nil {
		return rep, err
	}
	if _, err := f.minter.Publish(ctx, star, ep, cut); err != nil {
		if pub, ok := f.lateCut(ctx, star, ep, cut, err); ok {
			return f.adopt(ctx, rep, pub, start), nil
		}
		return rep, fmt.Errorf("fence %s/%d: publish cut %d: %w", star, ep, cut, err)
	}
	rep.Cut = cut
	rep.Duration = f.opts.Clock.Now().Sub(start)
	f.opts.Logger.InfoContext(ctx, "epoch fenced", "star", star, "epoch", ep, "cut", cut,
		"rounds", rep.Rounds, "reads", rep.Reads, "creates", rep.Creates, "poisoned", rep.Poisoned, "repaired", rep.Repaired)
	return rep, nil
}

// lateCut tells a late fencer from a real disagreement after Publish
// refused cut. A fencer that walked while another fenced, settled and
// trimmed the epoch finds trimmed slots empty and poisons one of them: its
// cut lies below the published one and below the trimmed cursor. Any
// other difference is a real disagreement (ErrCutMismatch stands).
func (f *Fencer) lateCut(ctx context.Context, star string, ep, cut uint64, err error) (*epoch.Record, bool) {
	if !errors.Is(err, epoch.ErrCutMismatch) {
		return nil, false
	}
	rec, gerr := f.minter.Get(ctx, star, ep)
	if gerr != nil || !rec.Fenced() || cut >= rec.Cut || cut >= rec.Cursors.Trimmed {
		return nil, false
	}
	return rec, true
}

// adopt returns the cut another fencer published while this one walked.
func (f *Fencer) adopt(ctx context.Context, rep Report, rec *epoch.Record, start time.Time) Report {
	f.clearUndecided(rec)
	rep.Cut, rep.AlreadyFenced, rep.Late = rec.Cut, true, true
	rep.Duration = f.opts.Clock.Now().Sub(start)
	f.opts.Logger.InfoContext(ctx, "epoch fenced by another fencer meanwhile; adopting its cut", "star", rec.Star, "epoch", rec.Epoch, "cut", rec.Cut)
	return rep
}

// fencedMeanwhile stops a walk that found the record fenced by another
// fencer before it wrote poison.
type fencedMeanwhile struct{ rec *epoch.Record }

func (e *fencedMeanwhile) Error() string {
	return fmt.Sprintf("fence %s/%d: fenced meanwhile with cut %d", e.rec.Star, e.rec.Epoch, e.rec.Cut)
}

// checkOpen re-reads the record before the walk writes poison, so that a
// fencer held while another fenced, settled and trimmed the epoch stops
// instead of poisoning slots that settlement already trimmed.
func (w *walk) checkOpen(ctx context.Context) error {
	rec, err := w.f.minter.Get(ctx, w.rec.Star, w.rec.Epoch)
	if err != nil {
		return fmt.Errorf("fence %s/%d: %w", w.rec.Star, w.rec.Epoch, err)
	}
	if rec.Fenced() {
		return &fencedMeanwhile{rec: rec}
	}
	return nil
}

// walk is the state of one Fence call.
type walk struct {
	f       *Fencer
	rec     *epoch.Record
	buckets []objstore.Bucket
	rep     *Report

	reads, creates, repaired, poisoned atomic.Int64
}

func (w *walk) slot(n uint64) chain.Addr {
	return chain.Addr{Keys: chain.KeysOf(w.rec), Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: n}
}

// observe reads slots in every bucket, all in parallel: one round trip.
// With whole, each object is read whole and verified, and only its digest
// is kept (so that memory holds at most MaxParallel objects at once);
// otherwise only its header is probed.
func (w *walk) observe(ctx context.Context, slots []uint64, whole bool) [][]chain.Observation {
	w.rep.Rounds++
	out := make([][]chain.Observation, len(slots))
	var g errgroup.Group
	g.SetLimit(w.f.opts.MaxParallel)
	for i, n := range slots {
		out[i] = make([]chain.Observation, len(w.buckets))
		for j, b := range w.buckets {
			g.Go(func() error {
				w.reads.Add(1)
				if !whole {
					out[i][j] = chain.ObserveHeader(ctx, b, w.slot(n))
					return nil
				}
				o := chain.ObserveObject(ctx, b, w.slot(n))
				o.Data = nil
				out[i][j] = o
				return nil
			})
		}
	}
	_ = g.Wait() // observations carry their own errors
	return out
}

func hasFlight(obs []chain.Observation) bool {
	for _, o := range obs {
		if o.State == chain.SlotFlight {
			return true
		}
	}
	return false
}

// estimate finds roughly where the chain ends: the highest slot it sees
// holding a flight in some bucket. It probes from the checkpoint, growing
// the step by doubling until a probe finds nothing, then narrows with a
// k-ary search, Fanout probes per round in parallel. An unreachable bucket
// reads as "no flight", which can only lower the estimate: the walk then
// starts lower, which is always safe.
func (w *walk) estimate(ctx context.Context) (uint64, bool) {
	lo := w.rec.Cursors.Checkpoint
	if !hasFlight(w.observe(ctx, []uint64{lo}, false)[0]) {
		return 0, false
	}
	k := w.f.opts.Fanout
	// Grow: probe lo+2^e for the next k exponents per round until one is
	// empty; hi is the first empty probe, lo the present one before it.
	var hi uint64
	found := false
	for e := 0; !found && e < 64; e += k {
		var probes []uint64
		for i := e; i < e+k && i < 64; i++ {
			d := uint64(1) << i
			if lo > ^uint64(0)-d {
				break
			}
			probes = append(probes, lo+d)
		}
		if len(probes) == 0 {
			break
		}
		obs := w.observe(ctx, probes, false)
		prev := lo
		for i, p := range probes {
			if !hasFlight(obs[i]) {
				lo, hi, found = prev, p, true
				break
			}
			prev = p
		}
		if !found {
			lo = prev
		}
		if err := ctx.Err(); err != nil {
			return lo, true
		}
	}
	if !found {
		return lo, true
	}
	// Narrow: lo holds a flight, hi does not; split (lo, hi) into k+1 parts.
	for hi-lo > 1 {
		gap := hi - lo
		var probes []uint64
		for i := 1; i <= k; i++ {
			p := lo + gap*uint64(i)/uint64(k+1)
			if p > lo && p < hi && (len(probes) == 0 || p > probes[len(probes)-1]) {
				probes = append(probes, p)
			}
		}
		if len(probes) == 0 {
			probes = []uint64{lo + gap/2}
		}
		obs := w.observe(ctx, probes, false)
		next := hi
		for i, p := range probes {
			if !hasFlight(obs[i]) {
				next = p
				break
			}
			lo = p
		}
		hi = next
		if err := ctx.Err(); err != nil {
			break
		}
	}
	return lo, true
}

// verdict is the classification of one slot from its observations.
type verdict int

const (
	committed verdict = iota // ≥ W flights
	dead                     // ≥ B poison: the cut
	repair                   // some flight, fewer than W, an empty bucket to copy into
	poison                   // no flight anywhere reachable, an empty bucket to poison
	undecided                // unreachable buckets hold the deciding vote
	blocked                  // foreign objects hold the deciding vote
	conflict                 // two different flights: two writers wrote the epoch
)

func (v verdict) String() string {
	return [...]string{"committed", "dead", "repair", "poison", "undecided", "blocked", "conflict"}[v]
}

// classify decides a slot from one observation per bucket, for quorum w of
// k buckets. Only identical verified copies count toward w (see
// chain.TallySlot); two different flights are a conflict, never committed.
// It is a pure function so that every combination is table tested.
func classify(obs []chain.Observation, w int) verdict {
	t := chain.TallySlot(obs)
	k := len(obs)
	switch {
	case t.Conflict:
		return conflict
	case t.Copies >= w:
		return committed
	case t.Poisons >= k-w+1:
		return dead
	case t.Copies > 0 && t.Empty > 0:
		// Completing a slot always wins over killing it: one writer per
		// epoch means the flight has exactly one possible content.
		return repair
	case t.Copies == 0 && t.Empty > 0:
		return poison
	case t.Unreachable > 0:
		return undecided
	default:
		return blocked
	}
}

// conflictError names a slot holding two different flights.
func (w *walk) conflictError(s uint64, obs []chain.Observation) error {
	t := chain.TallySlot(obs)
	return &chain.ConflictError{Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: s, Object: &chain.ObjectError{
		Bucket: w.buckets[t.ConflictAt].Name(), Key: w.slot(s).Key(),
		Reason: "a well-formed flight that differs from another bucket's: two writers wrote the epoch", Err: chain.ErrConflictingFlight}}
}

// walk classifies slots in order from start and returns the cut.
func (w *walk) walk(ctx context.Context, start uint64) (uint64, error) {
	span := uint64(w.f.opts.Span)
	window := uint64(w.rec.Constants.Window)
	// A stopped writer's cut lies within 2·window+1 slots of the start;
	// past that the walk is chasing a live writer, so it plants a barrier
	// ahead of it, doubling the lead each time the writer wins (see "A
	// live writer" in the package guide).
	chaseAfter := start + 3*window + 2
	lead := 2*window + 1
	planted := false
	n := start
	tryBarrier := func(from uint64) {
		if planted || from <= chaseAfter || from > ^uint64(0)-lead {
			return
		}
		if planted = w.barrier(ctx, from+lead); !planted {
			// The writer got there first, or a zone did not answer: aim
			// further ahead next time.
			lead = min(2*lead, 1<<40)
		}
	}
	for {
		tryBarrier(n)
		slots := make([]uint64, 0, span)
		for i := uint64(0); i < span && n+i >= n; i++ {
			slots = append(slots, n+i)
		}
		ahead := w.observe(ctx, slots, true)
		for i, s := range slots {
			obs := ahead[i]
			// Committed, dead and conflict are terminal, so an
			// observation read ahead stays true; anything else is acted
			// on and re-read.
			switch classify(obs, w.rec.Constants.W) {
			case committed:
				continue
			case dead:
				w.f.clearUndecided(w.rec)
				return s, nil
			case conflict:
				return 0, w.conflictError(s, obs)
			}
			cut, done, err := w.decideSlot(ctx, s, obs)
			if err != nil {
				return 0, err
			}
			if done {
				return cut, nil
			}
			tryBarrier(s)
		}
		n += uint64(len(slots))
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("fence %s/%d: walk at slot %d: %w", w.rec.Star, w.rec.Epoch, n, err)
		}
	}
}

// barrier tries to kill slot b ahead of a live writer: it poisons b's empty
// buckets one at a time while no flight shows there. It gives up (false) as
// soon as a flight appears (the writer is there already) or a bucket does
// not answer: a barrier is an accelerator, never a reason to block. Poison
// in an empty bucket can never displace a flight, so a barrier is as safe
// as any poison: a slot that reaches W copies anyway is simply committed.
func (w *walk) barrier(ctx context.Context, b uint64) bool {
	w.rep.BarrierAttempts++
	failed := make([]bool, len(w.buckets))
	for range w.rec.Constants.B() + 2 {
		if ctx.Err() != nil {
			return false
		}
		obs := w.observe(ctx, []uint64{b}, true)[0]
		switch classify(obs, w.rec.Constants.W) {
		case dead:
			w.rep.Barriers++
			w.f.opts.Logger.InfoContext(ctx, "fence planted a barrier ahead of a live writer", "star", w.rec.Star, "epoch", w.rec.Epoch, "slot", b)
			return true
		case poison:
			if !w.poison(ctx, b, obs, failed, w.f.opts.Identity+BarrierSuffix) {
				return false
			}
		default:
			return false
		}
	}
	return false
}

// decideSlot drives one slot to committed or dead. It reports done with the
// cut when the slot is dead.
func (w *walk) decideSlot(ctx context.Context, s uint64, obs []chain.Observation) (uint64, bool, error) {
	// attempt counts the backoffs so far; the jitter is keyed on the
	// fencer and the slot, so that fencers racing on a slot spread out.
	attempt, seed := 0, clock.Seed(w.f.seed, s)
	// stuck: the last observation with ctx alive found s undecided, first
	// at since, waiting for the buckets waitingFor.
	stuck, since, waitingFor := false, time.Time{}, []string(nil)
	undecidedErr := func(err error) error {
		return &UndecidedError{Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: s, Waiting: waitingFor, Since: since, Err: err}
	}
	failed := make([]bool, len(w.buckets)) // poison creates with unknown outcome
	checked := false                       // the record was found open before poisoning
	for {
		v := classify(obs, w.rec.Constants.W)
		w.f.opts.Logger.DebugContext(ctx, "fence slot", "star", w.rec.Star, "epoch", w.rec.Epoch, "slot", s, "verdict", v.String())
		progress := true
		switch v {
		case committed:
			w.f.clearUndecided(w.rec)
			return 0, false, nil
		case dead:
			w.f.clearUndecided(w.rec)
			return s, true, nil
		case repair:
			stuck = false
			progress = w.repair(ctx, s, obs)
		case poison:
			stuck = false
			if !checked {
				if err := w.checkOpen(ctx); err != nil {
					return 0, false, err
				}
				checked = true
			}
			progress = w.poison(ctx, s, obs, failed, w.f.opts.Identity)
		case blocked:
			return 0, false, w.blockedError(s, obs)
		case conflict:
			return 0, false, w.conflictError(s, obs)
		case undecided:
			if err := ctx.Err(); err != nil {
				// Buckets read as unreachable because ctx ended, not
				// because they failed. Unless the previous observation
				// found the slot undecided, the fence stopped; it was not
				// blocked.
				if !stuck {
					return 0, false, fmt.Errorf("fence %s/%d: slot %d: %w", w.rec.Star, w.rec.Epoch, s, err)
				}
				return 0, false, undecidedErr(err)
			}
			stuck, waitingFor = true, waiting(w.buckets, obs)
			since = w.f.markUndecided(w.rec, s, obs)
			if err := w.f.opts.Backoff.Sleep(ctx, w.f.opts.Clock, attempt, seed); err != nil {
				return 0, false, undecidedErr(err)
			}
			attempt++
		}
		if !progress {
			// Every request of the step failed: back off instead of
			// hammering a failing bucket.
			if err := w.f.opts.Backoff.Sleep(ctx, w.f.opts.Clock, attempt, seed); err != nil {
				return 0, false, fmt.Errorf("fence %s/%d: slot %d: %w", w.rec.Star, w.rec.Epoch, s, err)
			}
			attempt++
		}
		if err := ctx.Err(); err != nil {
			if stuck {
				return 0, false, undecidedErr(err)
			}
			return 0, false, fmt.Errorf("fence %s/%d: slot %d: %w", w.rec.Star, w.rec.Epoch, s, err)
		}
		obs = w.observe(ctx, []uint64{s}, true)[0]
	}
}

// repair copies the slot's flight, read whole and verified from a bucket
// that holds it, into every empty bucket, in parallel. Outcomes are not
// trusted: the caller re-observes. It reports whether any request got an
// answer (the flight was read and some create succeeded or found an
// object).
func (w *walk) repair(ctx context.Context, s uint64, obs []chain.Observation) bool {
	var data []byte
	w.rep.Rounds++
	for _, j := range chain.TallySlot(obs).Holders {
		w.reads.Add(1)
		full := chain.ObserveObject(ctx, w.buckets[j], w.slot(s))
		// The copy must be the very one observed: a flight that changed
		// in between would be a second writer's.
		if full.State == chain.SlotFlight && full.Digest == obs[j].Digest {
			data = full.Data
			break
		}
	}
	if data == nil {
		return false // the copy could not be read; re-observe and try again
	}
	w.rep.Rounds++
	var wg sync.WaitGroup
	var answered atomic.Bool
	for j, o := range obs {
		if o.State != chain.SlotEmpty {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.creates.Add(1)
			err := w.buckets[j].Create(ctx, w.slot(s).Key(), data)
			if err == nil {
				w.repaired.Add(1)
			}
			if err == nil || errors.Is(err, objstore.ErrExists) {
				answered.Store(true)
			}
		}()
	}
	wg.Wait()
	return answered.Load()
}

// poison creates poison in the first empty bucket, in the bucket set's fixed
// order: one at a time, so that no more poison is written than needed and a
// flight that appears meanwhile sends the slot back to repair. A bucket
// whose create failed (failed[j], outcome unknown) is tried again only
// after the other empty buckets, so that one zone refusing writes cannot
// stall a slot the others can decide. It reports whether the create got an
// answer (created, or found an object).
func (w *walk) poison(ctx context.Context, s uint64, obs []chain.Observation, failed []bool, identity string) bool {
	j := -1
	for i, o := range obs {
		if o.State == chain.SlotEmpty && (j < 0 || failed[j] && !failed[i]) {
			j = i
		}
	}
	if j < 0 {
		return true
	}
	w.rep.Rounds++
	w.creates.Add(1)
	data := chain.EncodePoison(w.rec.Star, w.rec.Epoch, s, identity)
	err := w.buckets[j].Create(ctx, w.slot(s).Key(), data)
	switch {
	case err == nil:
		w.poisoned.Add(1)
	case errors.Is(err, objstore.ErrExists):
	default:
		w.f.opts.Logger.DebugContext(ctx, "fence poison create failed", "bucket", w.buckets[j].Name(), "slot", s, "err", err)
		failed[j] = true
		// Once every empty bucket failed, start over in the fixed order.
		all := true
		for i, o := range obs {
			all = all && (o.State != chain.SlotEmpty || failed[i])
		}
		if all {
			clear(failed)
		}
		return false
	}
	failed[j] = false
	return true
}

func (w *walk) blockedError(s uint64, obs []chain.Observation) error {
	fe := &BlockedError{Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: s}
	for _, o := range obs {
		if o.State == chain.SlotForeign {
			fe.Objects = append(fe.Objects, o.Err)
		}
	}
	return fe
}

func waiting(buckets []objstore.Bucket, obs []chain.Observation) []string {
	var out []string
	for j, o := range obs {
		if o.State == chain.SlotUnreachable {
			out = append(out, buckets[j].Name())
		}
	}
	return out
}

func (f *Fencer) markUndecided(rec *epoch.Record, s uint64, obs []chain.Observation) time.Time {
	buckets, _ := f.zones.Resolve(rec.Constants.Buckets)
	f.mu.Lock()
	id := epochID{rec.Star, rec.Epoch}
	u, ok := f.undecided[id]
	fresh := !ok || u.Slot != s
	if fresh {
		u = Undecided{Star: rec.Star, Epoch: rec.Epoch, Slot: s, Since: f.opts.Clock.Now()}
	}
	u.Waiting = waiting(buckets, obs)
	f.undecided[id] = u
	f.mu.Unlock()
	if fresh {
		// Logged outside the lock: a handler may call Undecided.
		f.opts.Logger.Warn("fence slot undecided: unreachable buckets hold the deciding vote",
			"star", rec.Star, "epoch", rec.Epoch, "slot", s, "waiting", u.Waiting)
	}
	return u.Since
}

func (f *Fencer) clearUndecided(rec *epoch.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.undecided, epochID{rec.Star, rec.Epoch})
}
