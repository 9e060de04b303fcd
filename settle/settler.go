package settle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
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

// Bounds of Options.
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
		return nil, &cutline.ConfigError{Field: "minter", Value: nil, Reason: "required"}
	}
	if cov == nil {
		return nil, &cutline.ConfigError{Field: "coverage", Value: nil, Reason: "required"}
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
			return nil, &cutline.ConfigError{Field: b.field, Value: *b.v, Reason: fmt.Sprintf("must satisfy 0 ≤ %s ≤ %d (0 means %d)", b.field, b.max, b.def)}
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
	// Coverage reads the whole of [checkpoint, cut), so it reads ahead as
	// far as the requests in flight are bounded.
	r, err := chain.NewReader(m, zones, chain.ReaderOptions{Logger: opts.Logger, Clock: opts.Clock, ReadAhead: min(opts.MaxParallel, chain.MaxReadAhead)})
	if err != nil {
		return nil, err
	}
	return &Settler{minter: m, zones: zones, cov: cov, reader: r, opts: opts, seed: rand.Uint64()}, nil
}

// SettleReport describes one Settle call.
type SettleReport struct {
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
	// Covered counts flights handed to the coverage hook. Kept counts
	// the flights coverage took from the copies the fence this call ran
	// had read whole and verified, instead of reading them again (they
	// are not in Reads).
	Covered, Kept int
	// Reads, Deletes and Lists count object requests.
	Reads, Deletes, Lists int
	// NoGarbageSweep: step 2 was skipped. Only SettleFencedAt does that
	// (a roll.Roller's planned roll), and only when the fence decided the
	// cut at the release point of the caller's own writer, which had
	// closed cleanly (fence.Fencer.FenceAt): that writer created no flight at or past
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
//     hook, in order (no bytes move), side by side with step 2: the two
//     touch disjoint slots. It reads only the flights that the fence of
//     step 1 did not keep (Report.Kept);
//  4. once both are done, it marks the record settled, which moves the
//     checkpoint to the cut.
//
// A settled epoch is a no-op. A successor serves or appends only after
// Settle returned nil.
func (s *Settler) Settle(ctx context.Context, star string, ep uint64) (SettleReport, error) {
	return s.settle(ctx, star, ep, nil)
}

// SettleFencedAt settles the epoch fr fenced, where fr is the report of
// the caller's own fence.Fencer.FenceAt: the one way to settle without the
// garbage sweep of step 2. When fr.AtRelease (the fence decided the cut at
// the release point of the caller's writer, which had closed cleanly) and
// the record's cut is fr.Cut, the sweep is skipped (Report.NoGarbageSweep
// says why that is safe); otherwise it is Settle. A writer across epochs
// (package roll) settles its planned rolls this way. fr must be a report
// FenceAt returned for a release point of the caller's own writer: a
// report made up or taken from another fence leaves garbage standing past
// the cut (harmless to readers, but never deleted).
func (s *Settler) SettleFencedAt(ctx context.Context, fr fence.Report) (SettleReport, error) {
	if fr.Star == "" {
		return SettleReport{}, &cutline.ConfigError{Field: "fence report", Value: fr.Star, Reason: "names no star: pass the report FenceAt returned"}
	}
	var skip *fence.Report
	if fr.AtRelease {
		skip = &fr
	}
	return s.settle(ctx, fr.Star, fr.Epoch, skip)
}

// Minter returns the minter the Settler reads and marks epochs with, for
// a writer across epochs (package roll) that mints, reads and advances the
// same star's records.
func (s *Settler) Minter() *epoch.Minter { return s.minter }

// Zones returns the zones the Settler resolves an epoch's buckets in, for
// a writer across epochs (package roll) that writes where it settles.
func (s *Settler) Zones() chain.Zones { return s.zones }

// Fencer returns Options.Fencer: nil when the Settler has none (it then
// settles only fenced epochs).
func (s *Settler) Fencer() *fence.Fencer { return s.opts.Fencer }

// settle is Settle. With skip, a FenceAt report that decided the cut at
// a cleanly closed writer's release point, it skips step 2 if the
// record's cut is skip's (Report.NoGarbageSweep says why that is safe).
func (s *Settler) settle(ctx context.Context, star string, ep uint64, skip *fence.Report) (SettleReport, error) {
	rep := SettleReport{Star: star, Epoch: ep}
	rec, err := s.minter.Get(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("settle %s/%d: %w", star, ep, err)
	}
	if rec.State == epoch.StateSettled {
		rep.Cut, rep.AlreadySettled = rec.Cut, true
		return rep, nil
	}
	var kept *fence.Kept // the fence's copies for coverage
	defer func() { kept.Release() }()
	if rec.State == epoch.StateOpen {
		if s.opts.Fencer == nil {
			return rep, fmt.Errorf("settle %s/%d: %w", star, ep, &epoch.StateError{Star: star, Epoch: ep, Have: rec.State, Op: "settle (no fencer configured)"})
		}
		kept = fence.NewKept(keptBytes)
		fr, err := s.opts.Fencer.FenceKeep(ctx, star, ep, kept)
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
	// Steps 2 and 3 touch disjoint slots ([cut, cut+window] and
	// [checkpoint, cut)) and neither reads what the other writes, so they
	// run side by side; both must be done before the record is marked.
	var garbage SettleReport
	var garbageErr error
	var wg sync.WaitGroup
	if skip != nil && skip.AtRelease && rec.Cut == skip.Cut {
		rep.NoGarbageSweep = true
	} else {
		var known []fence.Copy
		if rep.Fence != nil && rep.Fence.Cut == rec.Cut {
			known = rep.Fence.Garbage
		}
		wg.Go(func() { garbageErr = s.deleteGarbage(ctx, rec, buckets, known, &garbage) })
	}
	coverErr := s.cover(ctx, rec, &rep, kept)
	wg.Wait()
	rep.GarbageDeleted, rep.GarbageLeft = garbage.GarbageDeleted, garbage.GarbageLeft
	rep.Reads += garbage.Reads
	rep.Deletes, rep.Lists = garbage.Deletes, garbage.Lists
	if err := errors.Join(garbageErr, coverErr); err != nil {
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
// Each bucket lists the span a page at a time (slot keys sort in slot
// order, so a page of window+1 keys and the empty page after it usually
// cover it), and only the objects listed are probed and, when they hold a
// flight, deleted; so an epoch that ended cleanly costs about 2·K lists and
// a probe per poison at the cut. Probes and deletes are made MaxParallel at
// a time across the buckets, and memory holds one page per bucket, not the
// window. A bucket that stays unreachable through Retries is given up for
// the rest of the span (its garbage is harmless: nothing reads past the
// cut).
func (s *Settler) deleteGarbage(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, known []fence.Copy, rep *SettleReport) error {
	sw := &sweep{s: s, rec: rec, keys: wire.KeysOf(rec), rep: rep, known: map[string]map[uint64]bool{},
		from: rec.Cut, end: rec.Cut + uint64(rec.Constants.Window),
		// The jitter is keyed on the epoch, so that settlers racing on it
		// spread out.
		seed: clock.Seed(s.seed, rec.Epoch),
		sem:  make(chan struct{}, s.opts.MaxParallel)}
	if sw.end < rec.Cut {
		sw.end = ^uint64(0)
	}
	if planted.On(planted.SettleBelowCut) && sw.from > 0 {
		sw.from-- // planted: deletes from the slot below the cut
	}
	for _, c := range known {
		if c.Slot >= rec.Cut {
			if sw.known[c.Bucket] == nil {
				sw.known[c.Bucket] = map[uint64]bool{}
			}
			sw.known[c.Bucket][c.Slot] = true
		}
	}
	errs := make([]error, len(buckets))
	var wg sync.WaitGroup
	for i, b := range buckets {
		wg.Go(func() { errs[i] = sw.bucket(ctx, b) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("settle %s/%d: garbage: %w", rec.Star, rec.Epoch, err)
	}
	return nil
}

// sweep is one deleteGarbage call.
type sweep struct {
	s         *Settler
	rec       *epoch.Record
	keys      wire.Keys
	from, end uint64
	seed      uint64
	sem       chan struct{} // bounds probes and deletes in flight
	// known holds, by bucket name, the slots where the fence this
	// settlement ran read a flight copy at or past the cut: deleted
	// without a probe, since a flight copy is never overwritten.
	known map[string]map[uint64]bool

	mu  sync.Mutex
	rep *SettleReport
}

// bucket sweeps one bucket. Its error is the context's only.
func (sw *sweep) bucket(ctx context.Context, b objstore.Bucket) error {
	rec, opts := sw.rec, sw.s.opts
	prefix := sw.keys.Epoch(rec.Star, rec.Epoch)
	after := "" // every key under prefix sorts after ""
	if sw.from > 0 {
		after = sw.keys.Slot(rec.Star, rec.Epoch, sw.from-1)
	}
	limit := int(min(sw.end-sw.from+1, 1000))
	next := sw.from // the first slot not yet seen
	// A page's objects are dropped while the next page is listed: a span
	// that ends cleanly costs a list, then its drop beside the empty list
	// that ends it. At most one drop runs at a time.
	var dropping sync.WaitGroup
	var dropErr error
	defer dropping.Wait()
	for attempt := 0; ; {
		page, err := b.List(ctx, prefix, after, limit)
		sw.count(func(r *SettleReport) { r.Lists++ })
		if err != nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			if attempt++; attempt > opts.Retries {
				opts.Logger.WarnContext(ctx, "garbage left unlisted in an unreachable bucket (harmless: nothing reads past the cut)",
					"star", rec.Star, "epoch", rec.Epoch, "bucket", b.Name(), "from", next, "err", err)
				sw.count(func(r *SettleReport) { r.GarbageLeft += int(min(sw.end-next, 1<<31)) + 1 })
				dropping.Wait()
				return dropErr
			}
			if err := opts.Backoff.Sleep(ctx, opts.Clock, attempt-1, sw.seed); err != nil {
				return err
			}
			continue
		}
		attempt = 0
		var slots []uint64
		done := len(page) == 0 // only an empty page ends a listing
		for _, o := range page {
			n, ok := sw.keys.ParseSlot(rec.Star, rec.Epoch, o.Key)
			if !ok || n < sw.from {
				continue // not a slot object of this epoch: never ours to delete
			}
			if n > sw.end {
				done = true // keys are in slot order
				break
			}
			slots = append(slots, n)
			if next = n + 1; next == 0 {
				done = true // the last slot there is
			}
		}
		dropping.Wait()
		if dropErr != nil {
			return dropErr
		}
		if done || next > sw.end {
			return sw.drop(ctx, b, slots)
		}
		dropping.Go(func() { dropErr = sw.drop(ctx, b, slots) })
		after = page[len(page)-1].Key
	}
}

// drop probes the listed slots of one bucket and deletes the flights among
// them, asking again up to Retries times where the bucket did not answer.
func (sw *sweep) drop(ctx context.Context, b objstore.Bucket, slots []uint64) error {
	rec, opts := sw.rec, sw.s.opts
	for attempt := 0; len(slots) > 0; attempt++ {
		if attempt > 0 {
			if attempt > opts.Retries {
				sw.count(func(r *SettleReport) { r.GarbageLeft += len(slots) })
				opts.Logger.WarnContext(ctx, "garbage left standing in an unreachable bucket (harmless: nothing reads past the cut)",
					"star", rec.Star, "epoch", rec.Epoch, "cut", rec.Cut, "bucket", b.Name(), "objects", len(slots))
				return nil
			}
			if err := opts.Backoff.Sleep(ctx, opts.Clock, attempt-1, sw.seed); err != nil {
				return err
			}
		}
		var mu sync.Mutex
		var retry []uint64
		var wg sync.WaitGroup
		for _, n := range slots {
			taken := false
			select {
			case sw.sem <- struct{}{}:
				taken = true
			case <-ctx.Done():
			}
			if err := ctx.Err(); err != nil {
				if taken {
					<-sw.sem // taken just as ctx ended
				}
				wg.Wait()
				return err
			}
			wg.Go(func() {
				defer func() { <-sw.sem }()
				slot := wire.Addr{Keys: sw.keys, Star: rec.Star, Epoch: rec.Epoch, Slot: n}
				var o wire.Observation
				if sw.known[b.Name()][n] && attempt == 0 {
					o.State = wire.SlotFlight // read by the fence
				} else {
					o = wire.ObserveHeader(ctx, b, slot)
					sw.count(func(r *SettleReport) { r.Reads++ })
				}
				switch o.State {
				case wire.SlotFlight:
					err := b.Delete(ctx, slot.Key())
					sw.count(func(r *SettleReport) {
						r.Deletes++
						if err == nil {
							r.GarbageDeleted++
						}
					})
					if err != nil {
						mu.Lock()
						retry = append(retry, n)
						mu.Unlock()
					}
				case wire.SlotUnreachable:
					mu.Lock()
					retry = append(retry, n)
					mu.Unlock()
				case wire.SlotForeign:
					opts.Logger.WarnContext(ctx, "foreign object past the cut left untouched", "err", o.Err)
				}
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return err
		}
		slices.Sort(retry)
		slots = retry
	}
	return nil
}

// count updates the report under the sweep's lock.
func (sw *sweep) count(f func(r *SettleReport)) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	f(sw.rep)
}

// coverBatch bounds the flights settlement hands to a FlightCoverage in
// one call. It holds their spans, not their payloads.
const coverBatch = 64

// keptBytes bounds the copies of committed flights that a settlement's
// fence keeps for its coverage (fence.Kept): the largest flight there can
// be, so that the largest flight the fence reads is never read again.
const keptBytes = wire.MaxPayload + wire.HeaderProbeLen

// cover hands the committed flights in [checkpoint, cut) to the hook: to a
// FlightCoverage in batches of coverBatch flights (a cover costs per
// batch, not per span), to any other Coverage one flight at a time. The
// flights kept holds (the fence's verified copies) are taken from it, and
// the rest read.
func (s *Settler) cover(ctx context.Context, rec *epoch.Record, rep *SettleReport, kept *fence.Kept) error {
	if rec.Cursors.Checkpoint >= rec.Cut {
		return nil
	}
	fc, batched := s.cov.(FlightCoverage)
	var batch []Placed
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := fc.CoverFlights(ctx, rec.Star, batch); err != nil {
			return fmt.Errorf("settle %s/%d: coverage of slots %d to %d: %w", rec.Star, rec.Epoch, batch[0].Position.Slot, batch[len(batch)-1].Position.Slot, err)
		}
		rep.Covered += len(batch)
		batch = batch[:0]
		return nil
	}
	var mu sync.Mutex
	taken := map[uint64]bool{} // slots whose payload came from kept
	have := func(slot uint64) ([]byte, bool) {
		p, ok := kept.Take(slot)
		if ok {
			mu.Lock()
			taken[slot] = true
			mu.Unlock()
		}
		return p, ok
	}
	for f, err := range s.reader.RangeHaving(ctx, rec, max(rec.Cursors.Checkpoint, rec.Cursors.Trimmed), rec.Cut, have) {
		if err != nil {
			return fmt.Errorf("settle %s/%d: coverage: %w", rec.Star, rec.Epoch, err)
		}
		mu.Lock()
		if taken[f.Slot] {
			rep.Kept++
		} else {
			rep.Reads++
		}
		mu.Unlock()
		if !batched {
			if err := s.cov.Cover(ctx, rec.Star, f); err != nil {
				return fmt.Errorf("settle %s/%d: coverage of slot %d: %w", rec.Star, rec.Epoch, f.Slot, err)
			}
			rep.Covered++
			continue
		}
		spans, err := fc.Locate(f.Payload)
		if err != nil {
			return fmt.Errorf("settle %s/%d: coverage of slot %d: %w", rec.Star, rec.Epoch, f.Slot, err)
		}
		batch = append(batch, Placed{Position: f.Position, Spans: spans})
		if len(batch) == coverBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
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
func (s *Settler) SettleAll(ctx context.Context, star string) ([]SettleReport, error) {
	var out []SettleReport
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
