package fence

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/objstore"
)

// FenceAt ends an epoch whose writer closed cleanly, at release, its
// release point, without walking: it poisons slot release in B = K−W+1
// buckets and publishes release as the cut. It is for the writer's own
// host, right after chain.Writer.Close returned nil with the writer not
// halted (Err nil) and every slot it assigned acknowledged
// (Released() == Stats().Submitted): release is then Released(). It costs
// one round trip of B parallel creates, a second round of reads only when
// a bucket already holds an object at release, and the record's read and
// compare-and-set.
//
// How it decides:
//
//   - it reads the record: a fenced epoch returns the published cut, as
//     Fence does (Report.AlreadyFenced);
//   - it creates poison at release in the first B buckets, in parallel.
//     A create that succeeds is poison: buckets are create-only, so the
//     object there is the one created. A bucket that answers "exists" is
//     read whole: poison for the slot (a racing fencer's, or an earlier
//     try of this one) counts as poison; anything else, a flight above
//     all (a straggling create of the same writer), ends the fast path;
//   - with B poisons at release the slot is dead, and release is published
//     by compare-and-set (epoch.Minter.Publish), as Fence publishes its
//     cut (Report.AtRelease). A racing fencer publishing the same cut, or
//     a late one, is handled as in Fence.
//
// Anything the fast path cannot decide on its own (a flight at release, a
// create or read without an answer, a foreign object) falls back to the
// full fence (FenceReport), which treats the poison already created like
// any other: the result is exactly what Fence alone would have returned.
// The report then counts the requests and rounds of both.
//
// Why it is as safe as a full fence, for a writer that closed cleanly. A
// full fence finds the first dead slot, every slot below it committed.
// Here the writer vouches for the slots below release: Close waited until
// every slot it assigned was decided, and each below release was
// acknowledged, so it holds W verified identical copies; objects are
// never overwritten, and W + B = K + 1, so none of them can ever be dead.
// The writer assigned nothing at or past release, so it never issues a
// create there again. Once B buckets hold poison at release, that slot can
// never reach W copies, whatever lands later; and acknowledgements go out
// in slot order, so nothing past it can be acknowledged either: any
// straggling create at or past release (which a clean writer does not
// have, but the argument does not need that) is garbage past the cut. So
// release is the first dead slot: the cut every fencer finds (a racing
// full fence walks the committed slots and meets the same dead slot, or
// poisons the empty one itself), and guarantees 1 to 4 of the README hold
// as for Fence. A flight at release is the one case the argument does not
// cover (a fence would complete it rather than kill it), so the fast path
// never decides around one.
//
// release must not be below the record's checkpoint (which never passes
// what was acknowledged): a *cutline.ConfigError otherwise, with nothing written.
// A release point that is not the writer's (too high: slots below it are
// not committed) breaks the argument above: FenceAt is no place for a
// guess. When in doubt, call Fence.
//
// Errors are those of FenceReport.
func (f *Fencer) FenceAt(ctx context.Context, star string, ep, release uint64) (Report, error) {
	start := f.opts.Clock.Now()
	rep := Report{Star: star, Epoch: ep, Estimate: -1}
	rec, err := f.minter.Get(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("fence %s/%d: %w", star, ep, err)
	}
	if rec.Fenced() {
		f.clearUndecided(rec)
		rep.Cut, rep.AlreadyFenced = rec.Cut, true
		return rep, nil
	}
	if release < rec.Cursors.Checkpoint {
		return rep, fmt.Errorf("fence %s/%d: %w", star, ep, &cutline.ConfigError{Field: "release", Value: release,
			Reason: fmt.Sprintf("below the epoch's checkpoint %d: not the release point of its writer", rec.Cursors.Checkpoint)})
	}
	buckets, err := f.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return rep, fmt.Errorf("fence %s/%d: %w", star, ep, err)
	}
	w := &walk{f: f, rec: rec, buckets: buckets, rep: &rep}
	rep.WalkStart = release
	dead := w.poisonRelease(ctx, release)
	rep.Reads, rep.Creates, rep.Poisoned = w.reads.Load(), w.creates.Load(), w.poisoned.Load()
	if !dead {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("fence %s/%d: release slot %d: %w", star, ep, release, err)
		}
		f.opts.Logger.DebugContext(ctx, "fence at the release point undecided; walking", "star", star, "epoch", ep, "slot", release)
		full, err := f.FenceReport(ctx, star, ep)
		full.Rounds += rep.Rounds
		full.Reads += rep.Reads
		full.Creates += rep.Creates
		full.Poisoned += rep.Poisoned
		full.Duration = f.opts.Clock.Now().Sub(start)
		return full, err
	}
	if _, err := f.minter.Publish(ctx, star, ep, release); err != nil {
		if pub, ok := f.lateCut(ctx, star, ep, release, err); ok {
			return f.adopt(ctx, rep, pub, start), nil
		}
		return rep, fmt.Errorf("fence %s/%d: publish cut %d: %w", star, ep, release, err)
	}
	f.clearUndecided(rec)
	rep.Cut, rep.AtRelease = release, true
	rep.Duration = f.opts.Clock.Now().Sub(start)
	f.opts.Logger.InfoContext(ctx, "epoch fenced at its writer's release point", "star", star, "epoch", ep, "cut", release,
		"rounds", rep.Rounds, "reads", rep.Reads, "creates", rep.Creates, "poisoned", rep.Poisoned)
	return rep, nil
}

// poisonRelease creates poison at slot s in the first B buckets at once
// and reads back the buckets that answered "exists". It reports whether B
// buckets are known to hold poison at s; false means the full fence must
// decide (a flight there, a request without an answer, a foreign object).
func (w *walk) poisonRelease(ctx context.Context, s uint64) bool {
	b := w.rec.Constants.B()
	if planted.On(planted.ReleaseShortPoison) && b > 1 {
		b-- // planted: one poison short of a dead slot
	}
	addr := w.slot(s)
	data := wire.EncodePoison(w.rec.Star, w.rec.Epoch, s, w.f.opts.Identity)
	w.rep.Rounds++
	errs := make([]error, b)
	var wg sync.WaitGroup
	for j := range b {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.creates.Add(1)
			errs[j] = w.buckets[j].Create(ctx, addr.Key(), data)
		}()
	}
	wg.Wait()
	poisons := 0
	var exists []int
	for j, err := range errs {
		switch {
		case err == nil:
			w.poisoned.Add(1)
			poisons++
		case errors.Is(err, objstore.ErrExists):
			exists = append(exists, j)
		default:
			// Unknown outcome: the full fence reads the slot again.
			w.f.opts.Logger.DebugContext(ctx, "fence poison create at the release point failed", "bucket", w.buckets[j].Name(), "slot", s, "err", err)
			return false
		}
	}
	if len(exists) == 0 {
		return poisons >= b
	}
	// Something is there already: only poison for this very slot counts.
	// A flight is a straggling create of the writer (or a repair of one):
	// the slot may yet be completed, which only the full fence decides.
	w.rep.Rounds++
	obs := make([]wire.Observation, len(exists))
	for i, j := range exists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.reads.Add(1)
			obs[i] = wire.ObserveObject(ctx, w.buckets[j], addr)
		}()
	}
	wg.Wait()
	for _, o := range obs {
		if o.State != wire.SlotPoison {
			return false
		}
		poisons++
	}
	return poisons >= b
}
