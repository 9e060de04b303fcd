package settle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/objstore"
)

// Options configures a Settler. The zero value works, except that an open
// epoch can only be settled when Fencer is set.
type Options struct {
	// Fencer, when set, fences an open epoch before settling it. Without
	// it, settling an open epoch is a *epoch.StateError.
	Fencer *fence.Fencer
	// Retries is how many times an unreachable bucket is asked again
	// while deleting garbage before the garbage is left standing (it is
	// harmless: nothing reads past the cut). Default 3, at most
	// MaxRetries.
	Retries int
	// Backoff times those retries. Zero fields mean a fixed 50ms (a zero
	// Max becomes at least Min); each is at most clock.MaxBackoff.
	Backoff clock.Backoff
	// MaxParallel bounds object requests in flight, and the garbage
	// probes held at once. Default 64, at most MaxParallelLimit.
	MaxParallel int
	// Clock drives retries. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives progress (debug) and garbage left behind (warn).
	// Nil discards.
	Logger *slog.Logger
}

// Bounds of Options and RollerOptions.
const (
	// MaxRetries bounds Options.Retries.
	MaxRetries = 100
	// MaxParallelLimit bounds Options.MaxParallel.
	MaxParallelLimit = 4096
)

// Settler restores the chain after a fence: it deletes the garbage past the
// cut, restores coverage below it, and marks the epoch settled. It is safe
// for concurrent use, and every step is idempotent: a settler that crashed
// anywhere is finished by running Settle again, by anyone.
type Settler struct {
	minter *epoch.Minter
	zones  chain.Zones
	cov    Coverage
	reader *chain.Reader
	opts   Options
	seed   uint64 // keys the backoff jitter
}

// New returns a Settler. cov receives the committed flights the host has not
// covered yet.
func New(m *epoch.Minter, zones chain.Zones, cov Coverage, opts Options) (*Settler, error) {
	if m == nil {
		return nil, &config.Error{Field: "minter", Value: nil, Reason: "required"}
	}
	if cov == nil {
		return nil, &config.Error{Field: "coverage", Value: nil, Reason: "required"}
	}
	for _, b := range []struct {
		field    string
		v        *int
		def, max int
	}{
		{"Retries", &opts.Retries, 3, MaxRetries},
		{"MaxParallel", &opts.MaxParallel, 64, MaxParallelLimit},
	} {
		if *b.v < 0 || *b.v > b.max {
			return nil, &config.Error{Field: b.field, Value: *b.v, Reason: fmt.Sprintf("must satisfy 0 ≤ %s ≤ %d (0 means %d)", b.field, b.max, b.def)}
		}
		if *b.v == 0 {
			*b.v = b.def
		}
	}
	if err := opts.Backoff.Validate("Backoff"); err != nil {
		return nil, err
	}
	opts.Backoff = opts.Backoff.Or(clock.Backoff{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond})
	opts.Clock = clock.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := chain.NewReader(m, zones, chain.ReaderOptions{Logger: opts.Logger, Clock: opts.Clock})
	if err != nil {
		return nil, err
	}
	return &Settler{minter: m, zones: zones, cov: cov, reader: r, opts: opts, seed: rand.Uint64()}, nil
}

// Report describes one Settle call.
type Report struct {
	Star  string
	Epoch uint64
	Cut   uint64
	// Fence is the fence this call ran, if the epoch was open.
	Fence *fence.Report
	// AlreadySettled: nothing was left to do.
	AlreadySettled bool
	// GarbageDeleted counts flight copies deleted in [cut, cut+window];
	// GarbageLeft counts those an unreachable bucket kept (harmless).
	GarbageDeleted, GarbageLeft int
	// Covered counts flights handed to the coverage hook.
	Covered int
	// Reads and Deletes count object requests.
	Reads, Deletes int
	// NoGarbageSweep: step 2 was skipped. Only a Roller's planned roll
	// does that, and only when the fence decided the cut at the release
	// point of its own writer, which had closed cleanly
	// (fence.Fencer.FenceAt): that writer created no flight at or past
	// its release point, so [cut, cut+window] holds no garbage of its
	// own, and garbage past the cut is harmless anyway (nothing reads past
	// the cut; see GarbageLeft). Every other settlement sweeps.
	NoGarbageSweep bool
}

// Settle settles an epoch:
//
//  1. it requires the epoch fenced (fencing it first when Options.Fencer is
//     set);
//  2. it deletes every flight copy found in [cut, cut+window] — the cut
//     slot's stray copies included — and leaves every poison standing: a
//     zombie's PUT may arrive arbitrarily late, and only standing poison
//     keeps it harmless;
//  3. it hands every committed flight in [checkpoint, cut) to the coverage
//     hook, in order (no bytes move);
//  4. it marks the record settled, which moves the checkpoint to the cut.
//
// A settled epoch is a no-op. A successor serves or appends only after
// Settle returned nil.
func (s *Settler) Settle(ctx context.Context, star string, ep uint64) (Report, error) {
	return s.settle(ctx, star, ep, true)
}

// settle is Settle; without sweep it skips step 2, which only a Roller
// asks for, and only after fence.Fencer.FenceAt decided the cut at its own
// cleanly closed writer's release point (Report.NoGarbageSweep says why
// that is safe).
func (s *Settler) settle(ctx context.Context, star string, ep uint64, sweep bool) (Report, error) {
	rep := Report{Star: star, Epoch: ep}
	rec, err := s.minter.Get(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("settle %s/%d: %w", star, ep, err)
	}
	if rec.State == epoch.StateSettled {
		rep.Cut, rep.AlreadySettled = rec.Cut, true
		return rep, nil
	}
	if rec.State == epoch.StateOpen {
		if s.opts.Fencer == nil {
			return rep, fmt.Errorf("settle %s/%d: %w", star, ep, &epoch.StateError{Star: star, Epoch: ep, Have: rec.State, Op: "settle (no fencer configured)"})
		}
		fr, err := s.opts.Fencer.FenceReport(ctx, star, ep)
		rep.Fence = &fr
		if err != nil {
			return rep, fmt.Errorf("settle %s/%d: %w", star, ep, err)
		}
		if rec, err = s.minter.Get(ctx, star, ep); err != nil {
			return rep, fmt.Errorf("settle %s/%d: %w", star, ep, err)
		}
	}
	rep.Cut = rec.Cut
	buckets, err := s.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return rep, fmt.Errorf("settle %s/%d: %w", star, ep, err)
	}
	if !sweep {
		rep.NoGarbageSweep = true
	} else if err := s.deleteGarbage(ctx, rec, buckets, &rep); err != nil {
		return rep, err
	}
	if err := s.cover(ctx, rec, &rep); err != nil {
		return rep, err
	}
	if _, err := s.minter.MarkSettled(ctx, star, ep); err != nil {
		return rep, fmt.Errorf("settle %s/%d: mark settled: %w", star, ep, err)
	}
	s.opts.Logger.InfoContext(ctx, "epoch settled", "star", star, "epoch", ep, "cut", rec.Cut,
		"garbage_deleted", rep.GarbageDeleted, "garbage_left", rep.GarbageLeft, "covered", rep.Covered)
	return rep, nil
}

// deleteGarbage deletes flight copies in [cut, cut+window]. A writer assigns
// a slot only while it is below its release point plus the window, and its
// release point never passes the cut, so no flight lies beyond cut+window.
// The span is probed MaxParallel objects at a time, so memory does not grow
// with the window; a bucket that stays unreachable through Retries
// is given up for the rest of the span (its garbage is harmless: nothing
// reads past the cut).
func (s *Settler) deleteGarbage(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, rep *Report) error {
	type target struct {
		b    int
		slot uint64
	}
	end := rec.Cut + uint64(rec.Constants.Window)
	if end < rec.Cut {
		end = ^uint64(0)
	}
	gaveUp := make([]bool, len(buckets))
	// The jitter is keyed on the epoch, so that settlers racing on it
	// spread out.
	seed := clock.Seed(s.seed, rec.Epoch)
	var mu sync.Mutex
	batch := make([]target, 0, s.opts.MaxParallel)
	n, b := rec.Cut, 0
	if planted.On(planted.SettleBelowCut) && n > 0 {
		n-- // planted: deletes from the slot below the cut
	}
	for {
		batch = batch[:0]
		for len(batch) < cap(batch) && n <= end {
			if gaveUp[b] {
				rep.GarbageLeft++
			} else {
				batch = append(batch, target{b, n})
			}
			if b++; b == len(buckets) {
				b = 0
				if n == end {
					n, end = 1, 0 // past the span (end may be the last slot)
					break
				}
				n++
			}
		}
		if len(batch) == 0 {
			return nil
		}
		todo := batch
		for attempt := 0; len(todo) > 0; attempt++ {
			if attempt > 0 {
				if attempt > s.opts.Retries {
					rep.GarbageLeft += len(todo)
					for _, t := range todo {
						gaveUp[t.b] = true
					}
					s.opts.Logger.WarnContext(ctx, "garbage left standing in unreachable buckets (harmless: nothing reads past the cut)",
						"star", rec.Star, "epoch", rec.Epoch, "cut", rec.Cut, "objects", len(todo))
					break
				}
				if err := s.opts.Backoff.Sleep(ctx, s.opts.Clock, attempt-1, seed); err != nil {
					return fmt.Errorf("settle %s/%d: garbage: %w", rec.Star, rec.Epoch, err)
				}
			}
			var retry []target
			s.parallel(len(todo), func(i int) {
				t := todo[i]
				slot := wire.Addr{Keys: wire.KeysOf(rec), Star: rec.Star, Epoch: rec.Epoch, Slot: t.slot}
				o := wire.ObserveHeader(ctx, buckets[t.b], slot)
				mu.Lock()
				rep.Reads++
				mu.Unlock()
				switch o.State {
				case wire.SlotFlight:
					err := buckets[t.b].Delete(ctx, slot.Key())
					mu.Lock()
					defer mu.Unlock()
					rep.Deletes++
					if err != nil {
						retry = append(retry, t)
						return
					}
					rep.GarbageDeleted++
				case wire.SlotUnreachable:
					mu.Lock()
					retry = append(retry, t)
					mu.Unlock()
				case wire.SlotForeign:
					s.opts.Logger.WarnContext(ctx, "foreign object past the cut left untouched", "err", o.Err)
				}
			})
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("settle %s/%d: garbage: %w", rec.Star, rec.Epoch, err)
			}
			todo = retry
		}
	}
}

// cover hands the committed flights in [checkpoint, cut) to the hook.
func (s *Settler) cover(ctx context.Context, rec *epoch.Record, rep *Report) error {
	if rec.Cursors.Checkpoint >= rec.Cut {
		return nil
	}
	from := chain.Position{Epoch: rec.Epoch, Slot: rec.Cursors.Checkpoint}
	for f, err := range s.reader.Flights(ctx, rec.Star, from) {
		if err != nil {
			return fmt.Errorf("settle %s/%d: coverage: %w", rec.Star, rec.Epoch, err)
		}
		if f.Epoch != rec.Epoch || f.Slot >= rec.Cut {
			break
		}
		rep.Reads++
		if err := s.cov.Cover(ctx, rec.Star, f); err != nil {
			return fmt.Errorf("settle %s/%d: coverage of slot %d: %w", rec.Star, rec.Epoch, f.Slot, err)
		}
		rep.Covered++
		if f.Slot+1 >= rec.Cut {
			// Stop here rather than at the next flight: that one lies in
			// a later epoch, which this settlement must not read (its
			// trouble is not this epoch's).
			break
		}
	}
	return nil
}

// parallel calls f(0) … f(n-1), at most MaxParallel at once, and waits for
// them all.
func (s *Settler) parallel(n int, f func(i int)) {
	var g errgroup.Group
	g.SetLimit(s.opts.MaxParallel)
	for i := range n {
		g.Go(func() error { f(i); return nil })
	}
	_ = g.Wait() // f reports through its closure
}

// SettleAll fences (when a Fencer is configured) and settles every epoch of
// star that is not settled yet, oldest first: what a successor does before
// it serves a takeover. It stops at the first error. It finds them from
// the star's settlement cursor on (epoch.Minter.Unsettled), so its reads
// grow with the unsettled epochs, not with the star's history.
func (s *Settler) SettleAll(ctx context.Context, star string) ([]Report, error) {
	var out []Report
	var pending []uint64
	for rec, err := range s.minter.Unsettled(ctx, star) {
		if err != nil {
			return out, err
		}
		pending = append(pending, rec.Epoch)
	}
	for _, ep := range pending {
		r, err := s.Settle(ctx, star, ep)
		out = append(out, r)
		if err != nil && !errors.Is(err, epoch.ErrNoRecord) {
			return out, err
		}
	}
	return out, nil
}
