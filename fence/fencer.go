package fence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted"
)

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
	// it holds up to about 3·MaxParallel objects in memory at once,
	// besides what a Kept holds for FenceKeep's caller (see the package
	// guide).
	MaxParallel int
	// Backoff times the retries while a slot is undecided or a step's
	// every request failed. Zero fields mean clock.DefaultMinBackoff and
	// clock.DefaultMaxBackoff; each is at most clock.MaxBackoff.
	Backoff clock.Backoff
	// Clock drives backoff and the undecided age. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives each fence's outcome and barriers at info level, the
	// walk's progress at debug level, and two warnings: an undecided slot,
	// and an estimate that rests on a copy that does not verify (the walk
	// then starts at the checkpoint). Nil discards.
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
	MaxIdentity = wire.MaxPoisonBody - len(BarrierSuffix)
)

func (o *Options) validate() error {
	if o.Identity == "" {
		o.Identity = "fencer"
	}
	if len(o.Identity) > MaxIdentity {
		return &cutline.ConfigError{Field: "Identity", Value: fmt.Sprintf("%.20q…", o.Identity), Reason: fmt.Sprintf("longer than %d bytes", MaxIdentity)}
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
			return &cutline.ConfigError{Field: b.field, Value: *b.v, Reason: fmt.Sprintf("must satisfy 0 ≤ %s ≤ %d (0 means %d)", b.field, b.max, b.def)}
		}
		if *b.v == 0 {
			*b.v = b.def
		}
	}
	if err := o.Backoff.Validate("Backoff"); err != nil {
		return err
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

// New returns a Fencer over the epoch records of m and the buckets of zones.
func New(m *epoch.Minter, zones chain.Zones, opts Options) (*Fencer, error) {
	if m == nil {
		return nil, &cutline.ConfigError{Field: "minter", Value: nil, Reason: "required"}
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Fencer{minter: m, zones: zones, opts: opts, seed: rand.Uint64(), undecided: make(map[epochID]Undecided)}, nil
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
	// AtRelease: FenceAt decided the cut at the writer's release point
	// without a walk (false when it fell back to the full fence).
	AtRelease bool
	// Late: another fencer published the cut while this one walked (and
	// settlement may have trimmed slots under it); Cut is the published
	// cut, adopted, and this fencer wrote nothing after it noticed.
	Late bool
	// Duration is the fence's time on the fencer's clock.
	Duration time.Duration
	// Garbage lists the flight copies the walk read at or past the cut,
	// in slot order, so that settlement can delete them without probing
	// them again: a flight copy is never overwritten, only deleted. It is
	// what one read ahead saw (at most Span+4 slots), not all there is;
	// empty when the cut was adopted or found published.
	Garbage []Copy
}

// Copy names one object of the epoch: a slot in a bucket.
type Copy struct {
	Bucket string
	Slot   uint64
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
	return f.FenceKeep(ctx, star, ep, nil)
}

// FenceKeep is FenceReport for a caller that reads the epoch's flights
// below the cut next, as settlement's coverage does: the walk hands kept
// the payload of each committed flight it read whole and verified, within
// kept's budget, so that the caller takes it (Kept.Take) instead of
// reading the flight again. What kept holds when FenceKeep returns lies
// below the cut; nothing is kept when the record is fenced already, and
// kept is released when the fence fails. kept may be nil.
func (f *Fencer) FenceKeep(ctx context.Context, star string, ep uint64, kept *Kept) (Report, error) {
	rep, err := f.fence(ctx, star, ep, kept)
	if err != nil {
		kept.Release()
	} else {
		kept.dropFrom(rep.Cut)
	}
	return rep, err
}

// fence is FenceKeep, but for what kept holds at or past the cut.
func (f *Fencer) fence(ctx context.Context, star string, ep uint64, kept *Kept) (Report, error) {
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
	w := &walk{f: f, rec: rec, buckets: buckets, rep: &rep, cover: kept}
	from := rec.Cursors.Checkpoint
	if x, ok := w.estimate(ctx); ok {
		rep.Estimate = int64(x)
		// Slot x holds a flight, so its writer assigned it, which it does
		// only while x < release + window. Every slot below the release
		// point was committed, so [0, x−window] is committed. The probe
		// saw only a header: x is trusted only once a copy there is read
		// whole and verifies, since a corrupt copy proves nothing.
		win := uint64(rec.Constants.Window)
		if x >= win || f.opts.Span > 1 {
			around := w.readAround(ctx, x)
			switch {
			case x < win:
				// x only bounds the walk's first read, which it makes
				// from the checkpoint.
			case wire.TallySlot(around).Copies > 0 || planted.On(planted.WalkAboveHole):
				from = max(from, x-win)
			default:
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
	if planted.On(planted.CutPastDead) {
		cut++ // planted: one past the dead slot
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
