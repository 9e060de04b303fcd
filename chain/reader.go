package chain

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
)

// ReaderOptions configures a Reader. The zero value works.
type ReaderOptions struct {
	// Keys lays out slot objects; it must match the writers'.
	Keys Keys
	// Logger receives fallbacks between buckets (debug). Nil discards.
	Logger *slog.Logger
	// Clock times reads for the log. Nil means the wall clock.
	Clock clock.Clock
}

// Flight is one committed flight of a star's chain.
type Flight struct {
	Position
	// Payload is the flight's payload; it belongs to the caller.
	Payload []byte
}

// Reader serves a star's committed flights across its epochs, in order.
// It is safe for concurrent use.
type Reader struct {
	minter *epoch.Minter
	zones  Zones
	keys   Keys
	log    *slog.Logger
	clock  clock.Clock
}

// NewReader returns a Reader over the epochs recorded by m, whose buckets
// are resolved by name in zones.
func NewReader(m *epoch.Minter, zones Zones, opts ReaderOptions) (*Reader, error) {
	if m == nil {
		return nil, &epoch.ConfigError{Field: "minter", Value: nil, Reason: "required"}
	}
	if len(zones) == 0 {
		return nil, &epoch.ConfigError{Field: "zones", Value: "{}", Reason: "no buckets"}
	}
	for name, b := range zones {
		if b == nil || b.Name() != name {
			return nil, &epoch.ConfigError{Field: "zones", Value: fmt.Sprintf("%q", name), Reason: "nil bucket or name mismatch"}
		}
	}
	if err := opts.Keys.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{minter: m, zones: zones, keys: opts.Keys, log: log, clock: clock.Or(opts.Clock)}, nil
}

// Flights yields star's committed flights at or after from, in chain order:
// epochs in number order (burned numbers have no record and are skipped).
//
//   - A fenced or settled epoch yields its slots [max(from, trimmed), cut).
//   - An open epoch yields its contiguous committed prefix (slots whose
//     flight W buckets hold, every lower slot since the checkpoint
//     included) and then iteration ends: later epochs come after the open
//     epoch's eventual cut, which is not known yet. Resume later from the
//     position after the last flight yielded.
//
// Each flight is read from any bucket holding a valid copy (checksum and
// coordinates verified), falling back to the next bucket on an error,
// poison, absence or corruption. A slot below a published cut that no bucket
// can serve yields a *DataUnavailableError (errors.Is ErrDataUnavailable).
// Iteration ends after the first error. Flights below an epoch's trimmed
// cursor were deleted and are skipped.
func (r *Reader) Flights(ctx context.Context, star string, from Position) iter.Seq2[Flight, error] {
	return func(yield func(Flight, error) bool) {
		for rec, err := range r.minter.Epochs(ctx, star) {
			if err != nil {
				yield(Flight{}, err)
				return
			}
			if rec.Epoch < from.Epoch {
				continue
			}
			start := uint64(0)
			if rec.Epoch == from.Epoch {
				start = from.Slot
			}
			start = max(start, rec.Cursors.Trimmed)
			buckets, err := r.zones.Resolve(rec.Constants.Buckets)
			if err != nil {
				yield(Flight{}, fmt.Errorf("chain read %s/%d: %w", rec.Star, rec.Epoch, err))
				return
			}
			if rec.Fenced() {
				for s := start; s < rec.Cut; s++ {
					p, err := r.readFlight(ctx, rec, buckets, s, nil)
					if err != nil {
						yield(Flight{}, err)
						return
					}
					if !yield(Flight{Position: Position{Epoch: rec.Epoch, Slot: s}, Payload: p}, nil) {
						return
					}
				}
				continue
			}
			// Open: below start, the prefix must be committed too, or
			// nothing at start is part of the chain yet.
			if base := max(rec.Cursors.Checkpoint, rec.Cursors.Trimmed); base < start {
				ok, err := r.prefixCommitted(ctx, rec, buckets, base, start)
				if err != nil {
					yield(Flight{}, err)
				}
				if !ok || err != nil {
					return
				}
			}
			for s := start; ; s++ {
				holders, ok, err := r.committed(ctx, rec, buckets, s)
				if err != nil {
					yield(Flight{}, err)
					return
				}
				if !ok {
					return
				}
				p, err := r.readFlight(ctx, rec, buckets, s, holders)
				if err != nil {
					yield(Flight{}, err)
					return
				}
				if !yield(Flight{Position: Position{Epoch: rec.Epoch, Slot: s}, Payload: p}, nil) {
					return
				}
			}
		}
	}
}

// Read returns the payload of the flight at pos. A position at or past a
// published cut, past an open epoch's committed prefix, or in an epoch that
// has no record is ErrNotCommitted; below the trimmed cursor ErrTrimmed. In
// an open epoch Read verifies that every slot from the checkpoint up to pos
// is committed (one small read per bucket and slot).
func (r *Reader) Read(ctx context.Context, star string, pos Position) ([]byte, error) {
	rec, err := r.minter.Get(ctx, star, pos.Epoch)
	if errors.Is(err, epoch.ErrNoRecord) {
		return nil, fmt.Errorf("chain read %s/%v: %w: %w", star, pos, ErrNotCommitted, err)
	}
	if err != nil {
		return nil, err
	}
	if pos.Slot < rec.Cursors.Trimmed {
		return nil, fmt.Errorf("chain read %s/%v: %w below %d", star, pos, ErrTrimmed, rec.Cursors.Trimmed)
	}
	buckets, err := r.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return nil, fmt.Errorf("chain read %s/%d: %w", rec.Star, rec.Epoch, err)
	}
	if rec.Fenced() {
		if pos.Slot >= rec.Cut {
			return nil, fmt.Errorf("chain read %s/%v: %w: at or past the cut %d", star, pos, ErrNotCommitted, rec.Cut)
		}
		return r.readFlight(ctx, rec, buckets, pos.Slot, nil)
	}
	ok, err := r.prefixCommitted(ctx, rec, buckets, rec.Cursors.Checkpoint, pos.Slot)
	if err != nil {
		return nil, err
	}
	var holders []int
	if ok {
		holders, ok, err = r.committed(ctx, rec, buckets, pos.Slot)
		if err != nil {
			return nil, err
		}
	}
	if !ok {
		return nil, fmt.Errorf("chain read %s/%v: %w: past the committed prefix of the open epoch", star, pos, ErrNotCommitted)
	}
	return r.readFlight(ctx, rec, buckets, pos.Slot, holders)
}

// prefixCommitted reports whether every slot in [from, to) is committed.
func (r *Reader) prefixCommitted(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, from, to uint64) (bool, error) {
	for s := from; s < to; s++ {
		_, ok, err := r.committed(ctx, rec, buckets, s)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// committed probes slot s's header in every bucket in parallel and reports
// whether W of them hold its flight, with the holders found. It returns
// as soon as W holders are known. Unreachable buckets count as not holding:
// for an open epoch that only ends the committed prefix early.
func (r *Reader) committed(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, s uint64) ([]int, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	w := rec.Constants.W
	slot := Slot{Keys: r.keys, Star: rec.Star, Epoch: rec.Epoch, Slot: s}
	if len(buckets) == 1 {
		o := ObserveHeader(ctx, buckets[0], slot)
		if o.State == HasFlight {
			return []int{0}, true, nil
		}
		return nil, false, ctx.Err()
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		i int
		o Observation
	}
	answers := make(chan answer, len(buckets))
	for i, b := range buckets {
		go func() { answers <- answer{i, ObserveHeader(pctx, b, slot)} }()
	}
	var holders []int
	n := 0
	for ; n < len(buckets) && len(holders) < w; n++ {
		a := <-answers
		if a.o.State == HasFlight {
			holders = append(holders, a.i)
		}
	}
	cancel()
	for ; n < len(buckets); n++ {
		<-answers // the rest stop promptly once cancelled
	}
	if len(holders) >= w {
		return holders, true, nil
	}
	return nil, false, ctx.Err()
}

// readFlight reads slot s's flight from the buckets, holders first, then
// the others starting at a slot-dependent bucket to spread the load.
func (r *Reader) readFlight(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, s uint64, holders []int) ([]byte, error) {
	slot := Slot{Keys: r.keys, Star: rec.Star, Epoch: rec.Epoch, Slot: s}
	k := len(buckets)
	order := make([]int, 0, k)
	tried := make([]bool, k)
	for _, i := range holders {
		order = append(order, i)
		tried[i] = true
	}
	for j := range k {
		if i := int((s + uint64(j)) % uint64(k)); !tried[i] {
			order = append(order, i)
		}
	}
	var reasons []error
	start := r.clock.Now()
	for _, i := range order {
		b := buckets[i]
		o := ObserveObject(ctx, b, slot)
		if o.State == HasFlight {
			if len(reasons) > 0 {
				r.log.Debug("flight read after fallback", "star", rec.Star, "epoch", rec.Epoch, "slot", s,
					"bucket", b.Name(), "elapsed", r.clock.Now().Sub(start), "skipped", errors.Join(reasons...))
			}
			return o.Data[o.Header.Len():], nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch o.State {
		case Empty:
			reasons = append(reasons, fmt.Errorf("%s: absent", b.Name()))
		case HasPoison:
			reasons = append(reasons, fmt.Errorf("%s: poison", b.Name()))
		default:
			reasons = append(reasons, fmt.Errorf("%s: %s: %w", b.Name(), o.State, o.Err))
		}
	}
	return nil, &DataUnavailableError{Star: rec.Star, Epoch: rec.Epoch, Slot: s, Err: errors.Join(reasons...)}
}
