package settle

import (
	"context"
	"fmt"
	"sync"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
)

// TrimReport describes one Trim call.
type TrimReport struct {
	Star    string
	Epoch   uint64
	Trimmed uint64 // the trimmed cursor after the call
	Deleted int    // objects deleted
	Left    int    // objects an unreachable bucket kept; a later Trim deletes them
	// Late counts the flights, among Deleted, found at or past the cut of
	// a settled epoch: a stale writer's creates that landed after
	// settlement deleted the garbage past the cut.
	Late int
}

// Trim deletes the slot objects of an epoch below upTo and advances its
// trimmed cursor there. upTo may not pass the checkpoint: only covered slots
// are trimmed, and the cut slot's poison always stands. The cursor moves
// first, so readers stop asking for those slots before any object goes; a
// crash in between leaves objects that the next Trim of the epoch deletes.
// In a settled epoch it also deletes the flights found at or past the cut
// (TrimReport.Late): a stale writer's creates that landed after
// settlement swept there; one list request per bucket when there are
// none.
func (s *Settler) Trim(ctx context.Context, star string, ep, upTo uint64) (TrimReport, error) {
	rep := TrimReport{Star: star, Epoch: ep}
	rec, err := s.minter.Get(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("trim %s/%d: %w", star, ep, err)
	}
	if upTo > rec.Cursors.Checkpoint {
		return rep, fmt.Errorf("trim %s/%d: %w", star, ep, &epoch.CursorError{Star: star, Epoch: ep, Cursor: "trimmed",
			From: rec.Cursors.Trimmed, To: upTo, Reason: fmt.Sprintf("passes the checkpoint %d", rec.Cursors.Checkpoint), Err: epoch.ErrCursorAhead})
	}
	if upTo > rec.Cursors.Trimmed {
		c := rec.Cursors
		c.Trimmed = upTo
		if rec, err = s.minter.Advance(ctx, star, ep, c); err != nil {
			return rep, fmt.Errorf("trim %s/%d: %w", star, ep, err)
		}
	}
	rep.Trimmed = rec.Cursors.Trimmed
	buckets, err := s.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return rep, fmt.Errorf("trim %s/%d: %w", star, ep, err)
	}
	var mu sync.Mutex
	var firstErr error
	keys := wire.KeysOf(rec)
	prefix := keys.Epoch(star, ep)
	var wg sync.WaitGroup
	for _, b := range buckets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deleted, left, err := s.trimBucket(ctx, b, keys, prefix, star, ep, rec.Cursors.Trimmed)
			if err == nil && rec.State == epoch.StateSettled {
				var late int
				late, err = s.sweepLate(ctx, b, keys, prefix, star, ep, rec.Cut)
				deleted += late
				mu.Lock()
				rep.Late += late
				mu.Unlock()
			}
			mu.Lock()
			defer mu.Unlock()
			rep.Deleted += deleted
			rep.Left += left
			if err != nil {
				rep.Left++
				s.opts.Logger.WarnContext(ctx, "trim left objects in an unreachable bucket", "bucket", b.Name(), "err", err)
				if firstErr == nil && ctx.Err() != nil {
					firstErr = ctx.Err()
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return rep, fmt.Errorf("trim %s/%d: %w", star, ep, firstErr)
	}
	return rep, nil
}

// sweepLate deletes the flights at and past the cut of a settled epoch in
// one bucket: creates of the epoch's stale writer that landed after
// settlement swept there. No reader asks for them (nothing at or past
// the cut is served, and the cut stays dead by its poison). It lists from
// the cut on only, so that a bucket with nothing there costs one list
// request, and it reads each object's header first: poison and objects
// that are not the epoch's flights stay.
func (s *Settler) sweepLate(ctx context.Context, b objstore.Bucket, keys wire.Keys, prefix, star string, ep, cut uint64) (deleted int, err error) {
	from := ""
	if cut > 0 {
		from = keys.Slot(star, ep, cut-1)
	}
	for o, err := range objstore.AllAfter(ctx, b, prefix, from) {
		if err != nil {
			return deleted, err
		}
		n, ok := keys.ParseSlot(star, ep, o.Key)
		if !ok || n < cut {
			continue
		}
		obs := wire.ObserveHeader(ctx, b, wire.Addr{Keys: keys, Star: star, Epoch: ep, Slot: n})
		if obs.State != wire.SlotFlight {
			continue
		}
		if err := b.Delete(ctx, o.Key); err == nil {
			deleted++
		}
	}
	return deleted, nil
}

// trimBucket deletes the epoch's objects below upTo in one bucket, by
// listing, so that leftovers of an interrupted trim are found too.
func (s *Settler) trimBucket(ctx context.Context, b objstore.Bucket, keys wire.Keys, prefix, star string, ep, upTo uint64) (deleted, left int, err error) {
	for o, err := range objstore.All(ctx, b, prefix) {
		if err != nil {
			return deleted, left, err
		}
		n, ok := keys.ParseSlot(star, ep, o.Key)
		if !ok {
			continue // not a slot object: never ours to delete
		}
		if n >= upTo {
			break // keys are in slot order
		}
		if err := b.Delete(ctx, o.Key); err != nil {
			left++
			continue
		}
		deleted++
	}
	return deleted, left, nil
}

// TrimRewritten trims star's epoch ep below its rewritten cursor: every
// span of those flights is in a segment, or no retained ref needs it (see
// Compactor.Compact), so no ref is left pointing into a deleted flight.
// Unlike Needed, it reads one record, whatever the size of the index.
func (s *Settler) TrimRewritten(ctx context.Context, star string, ep uint64) (TrimReport, error) {
	rec, err := s.minter.Get(ctx, star, ep)
	if err != nil {
		return TrimReport{Star: star, Epoch: ep}, fmt.Errorf("trim %s/%d: %w", star, ep, err)
	}
	return s.Trim(ctx, star, ep, rec.Cursors.Rewritten)
}

// TrimUnneeded trims star's epoch ep below the lowest slot a retained ref
// of x still points into (RefIndex.Needed), or below its checkpoint when
// none does: the flights retention left behind, whose every span lies
// below its stream's retention point or in a segment. It reads the
// epoch's record before the index, so a ref covered meanwhile points at
// or past the checkpoint it read, which trimming never passes. Needed
// lists the whole index: run it as maintenance, not per request.
func (s *Settler) TrimUnneeded(ctx context.Context, x *RefIndex, star string, ep uint64) (TrimReport, error) {
	rep := TrimReport{Star: star, Epoch: ep}
	if x == nil {
		return rep, &cutline.ConfigError{Field: "index", Value: nil, Reason: "required"}
	}
	rec, err := s.minter.Get(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("trim %s/%d: %w", star, ep, err)
	}
	upTo := rec.Cursors.Checkpoint
	slot, ok, err := x.Needed(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("trim %s/%d: %w", star, ep, err)
	}
	if ok {
		upTo = min(upTo, slot)
	}
	// Never below the cursor: Trim at it deletes what an interrupted
	// trim left.
	return s.Trim(ctx, star, ep, max(upTo, rec.Cursors.Trimmed))
}
