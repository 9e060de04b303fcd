package chain

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
)

// ReaderOptions configures a Reader. The zero value works.
type ReaderOptions struct {
	// Logger receives fallbacks between buckets (debug). Nil discards.
	Logger *slog.Logger
	// Clock times reads for the log. Nil means the wall clock.
	Clock clock.Clock
	// ReadAhead is how many slots Flights may fetch ahead of the one it
	// yields, in parallel. Within each epoch it starts at one and doubles
	// with every flight yielded up to ReadAhead, so that a short read or a
	// tail at the end of an open epoch costs few extra requests. Zero means
	// DefaultReadAhead; 1 reads one slot at a time; at most MaxReadAhead.
	ReadAhead int
}

// DefaultReadAhead is the default ReaderOptions.ReadAhead, MaxReadAhead
// the largest accepted.
const (
	DefaultReadAhead = 16
	MaxReadAhead     = 1024
)

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
	log    *slog.Logger
	clock  clock.Clock
	ahead  int
}

// NewReader returns a Reader over the epochs recorded by m, whose buckets
// are resolved by name in zones.
func NewReader(m *epoch.Minter, zones Zones, opts ReaderOptions) (*Reader, error) {
	if m == nil {
		return nil, &cutline.ConfigError{Field: "minter", Value: nil, Reason: "required"}
	}
	if len(zones) == 0 {
		return nil, &cutline.ConfigError{Field: "zones", Value: "{}", Reason: "no buckets"}
	}
	for name, b := range zones {
		if b == nil || b.Name() != name {
			return nil, &cutline.ConfigError{Field: "zones", Value: fmt.Sprintf("%q", name), Reason: "nil bucket or name mismatch"}
		}
	}
	if opts.ReadAhead < 0 || opts.ReadAhead > MaxReadAhead {
		return nil, &cutline.ConfigError{Field: "ReadAhead", Value: opts.ReadAhead, Reason: fmt.Sprintf("must satisfy 0 ≤ ReadAhead ≤ %d (0 means %d)", MaxReadAhead, DefaultReadAhead)}
	}
	if opts.ReadAhead == 0 {
		opts.ReadAhead = DefaultReadAhead
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{minter: m, zones: zones, log: log, clock: clock.Or(opts.Clock), ahead: opts.ReadAhead}, nil
}

// Flights yields star's committed flights at or after from, in chain order:
// epochs in number order (burned numbers have no record and are skipped).
// It reads epoch records from from.Epoch on (epoch.Minter.EpochsFrom), so
// what it reads does not grow with the epochs before from.
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
		for rec, err := range r.minter.EpochsFrom(ctx, star, from.Epoch) {
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
				done := true
				r.ordered(ctx, start, rec.Cut, 1, func(ctx context.Context, s uint64) ([]byte, bool, error) {
					p, err := r.readFlight(ctx, rec, buckets, s)
					return p, true, err
				}, func(s uint64, p []byte, err error) bool {
					if err != nil {
						yield(Flight{}, err)
						done = false
					} else {
						done = yield(Flight{Position: Position{Epoch: rec.Epoch, Slot: s}, Payload: p}, nil)
					}
					return done
				})
				if !done {
					return
				}
				continue
			}
			// Open: below start, the prefix must be committed too, or
			// nothing at start is part of the chain yet. Only the last
			// window of it needs checking: nothing is yielded unless
			// start is committed, and then so is every slot below
			// windowFloor.
			if base := max(rec.Cursors.Checkpoint, rec.Cursors.Trimmed); base < start {
				ok, err := r.prefixCommitted(ctx, rec, buckets, max(base, windowFloor(rec, start)), start)
				if err != nil {
					yield(Flight{}, err)
				}
				if !ok || err != nil {
					return
				}
			}
			r.ordered(ctx, start, ^uint64(0), 1, func(ctx context.Context, s uint64) ([]byte, bool, error) {
				return r.committed(ctx, rec, buckets, s)
			}, func(s uint64, p []byte, err error) bool {
				if err != nil {
					yield(Flight{}, err)
					return false
				}
				return yield(Flight{Position: Position{Epoch: rec.Epoch, Slot: s}, Payload: p}, nil)
			})
			// An open epoch ends the iteration: what follows comes after
			// its eventual cut.
			return
		}
	}
}

// ordered runs fetch for the slots [from, end) with limit of them in flight
// at first, doubling with each result up to r.ahead, and hands the results to yield in slot order. It stops at the
// first result that is not ok (an end, not an error), after the first
// error, or when yield returns false; the fetches still running are
// cancelled and waited for before it returns.
func (r *Reader) ordered(ctx context.Context, from, end, limit uint64,
	fetch func(ctx context.Context, s uint64) ([]byte, bool, error),
	yield func(s uint64, p []byte, err error) bool) {
	type result struct {
		p   []byte
		ok  bool
		err error
	}
	fctx, cancel := context.WithCancel(ctx)
	var queue []chan result
	defer func() {
		cancel()
		for _, ch := range queue {
			<-ch
		}
	}()
	next := from
	for s := from; s < end; s++ {
		for next < end && next-s < limit {
			ch := make(chan result, 1)
			slot := next
			go func() {
				p, ok, err := fetch(fctx, slot)
				ch <- result{p, ok, err}
			}()
			queue = append(queue, ch)
			next++
		}
		res := <-queue[0]
		queue = queue[1:]
		if res.err == nil && !res.ok {
			return
		}
		if !yield(s, res.p, res.err) || res.err != nil {
			return
		}
		limit = min(2*limit, uint64(r.ahead))
	}
}

// Range yields the flights [from, to) of rec's fenced epoch, in order, for
// a caller that reads them all, as settlement does: it keeps ReadAhead of
// them in flight from the first, where Flights starts at one and doubles.
// It reads no record: rec is the caller's, and must be fenced, with to at
// most its cut and from at least its trimmed cursor; otherwise the first
// item is an error (ErrNotCommitted, cutline.ErrTrimmed). A slot that no bucket
// serves is a *DataUnavailableError, which ends the iteration.
func (r *Reader) Range(ctx context.Context, rec *epoch.Record, from, to uint64) iter.Seq2[Flight, error] {
	return r.RangeHaving(ctx, rec, from, to, nil)
}

// RangeHaving is Range for a caller that holds some of the flights
// already, read whole and verified (the copies a fence kept, say): have
// returns the payload of a slot the caller holds, which is yielded as it
// is, without a read. have is called at most once per slot, from several
// goroutines at once; nil holds nothing.
func (r *Reader) RangeHaving(ctx context.Context, rec *epoch.Record, from, to uint64, have func(slot uint64) ([]byte, bool)) iter.Seq2[Flight, error] {
	return func(yield func(Flight, error) bool) {
		switch {
		case !rec.Fenced():
			yield(Flight{}, fmt.Errorf("chain read %s/%d: %w: the epoch is %s", rec.Star, rec.Epoch, ErrNotCommitted, rec.State))
			return
		case to > rec.Cut:
			yield(Flight{}, fmt.Errorf("chain read %s/%d: %w: slot %d is past the cut %d", rec.Star, rec.Epoch, ErrNotCommitted, to-1, rec.Cut))
			return
		case from < rec.Cursors.Trimmed && from < to:
			yield(Flight{}, fmt.Errorf("chain read %s/%d: %w: slot %d is below %d", rec.Star, rec.Epoch, errTrimmed, from, rec.Cursors.Trimmed))
			return
		}
		buckets, err := r.zones.Resolve(rec.Constants.Buckets)
		if err != nil {
			yield(Flight{}, fmt.Errorf("chain read %s/%d: %w", rec.Star, rec.Epoch, err))
			return
		}
		r.ordered(ctx, from, to, uint64(r.ahead), func(ctx context.Context, s uint64) ([]byte, bool, error) {
			if have != nil {
				if p, ok := have(s); ok {
					return p, true, nil
				}
			}
			p, err := r.readFlight(ctx, rec, buckets, s)
			return p, true, err
		}, func(s uint64, p []byte, err error) bool {
			if err != nil {
				yield(Flight{}, err)
				return false
			}
			return yield(Flight{Position: Position{Epoch: rec.Epoch, Slot: s}, Payload: p}, nil)
		})
	}
}

// Read returns the payload of the flight at pos. A position at or past a
// published cut, past an open epoch's committed prefix, or in an epoch that
// has no record is ErrNotCommitted; below the trimmed cursor cutline.ErrTrimmed. In
// an open epoch Read verifies that pos is committed and that so is every
// slot below it from max(checkpoint, pos − window + 1): at most a window of
// slots, read whole from up to K buckets each, ReaderOptions.ReadAhead at
// a time, however long the epoch. A flight at pos proves that its writer
// assigned pos, which a writer does only while pos is below its release
// point plus the window, so every slot up to pos − window was acknowledged.
func (r *Reader) Read(ctx context.Context, star string, pos Position) ([]byte, error) {
	rec, err := r.minter.Get(ctx, star, pos.Epoch)
	if errors.Is(err, epoch.ErrNoRecord) {
		return nil, fmt.Errorf("chain read %s/%v: %w: %w", star, pos, ErrNotCommitted, err)
	}
	if err != nil {
		return nil, err
	}
	if pos.Slot < rec.Cursors.Trimmed {
		return nil, fmt.Errorf("chain read %s/%v: %w below %d", star, pos, errTrimmed, rec.Cursors.Trimmed)
	}
	buckets, err := r.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return nil, fmt.Errorf("chain read %s/%d: %w", rec.Star, rec.Epoch, err)
	}
	if rec.Fenced() {
		if pos.Slot >= rec.Cut {
			return nil, fmt.Errorf("chain read %s/%v: %w: at or past the cut %d", star, pos, ErrNotCommitted, rec.Cut)
		}
		return r.readFlight(ctx, rec, buckets, pos.Slot)
	}
	p, ok, err := r.committed(ctx, rec, buckets, pos.Slot)
	if err != nil {
		return nil, err
	}
	if ok {
		ok, err = r.prefixCommitted(ctx, rec, buckets, max(rec.Cursors.Checkpoint, windowFloor(rec, pos.Slot)), pos.Slot)
		if err != nil {
			return nil, err
		}
	}
	if !ok {
		return nil, fmt.Errorf("chain read %s/%v: %w: past the committed prefix of the open epoch", star, pos, ErrNotCommitted)
	}
	return p, nil
}

// windowFloor is the lowest slot of an open epoch that a committed flight
// at slot s leaves in doubt: its writer assigned s only while s was below
// its release point plus the window, so every slot below s − window + 1
// was acknowledged then (the bound the fence's walk start rests on too).
func windowFloor(rec *epoch.Record, s uint64) uint64 {
	if w := uint64(rec.Constants.Window); s+1 > w {
		return s + 1 - w
	}
	return 0
}

// prefixCommitted reports whether every slot in [from, to) is committed,
// checking up to r.ahead slots at once.
func (r *Reader) prefixCommitted(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, from, to uint64) (bool, error) {
	if from >= to {
		return true, nil
	}
	done := from // every slot below it is committed
	var ferr error
	r.ordered(ctx, from, to, 1, func(ctx context.Context, s uint64) ([]byte, bool, error) {
		_, ok, err := r.committed(ctx, rec, buckets, s)
		return nil, ok, err
	}, func(s uint64, _ []byte, err error) bool {
		if err != nil {
			ferr = err
			return false
		}
		done = s + 1
		return true
	})
	return ferr == nil && done == to, ferr
}

// committed reads slot s whole from every bucket in parallel and reports
// whether W of them hold the same verified flight, returning its payload.
// It returns as soon as W identical copies are known. A copy with a corrupt
// body or other bytes does not count; two different flights are a
// *ConflictError. Unreachable buckets count as not holding: for an open
// epoch that only ends the committed prefix early.
func (r *Reader) committed(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, s uint64) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	w := rec.Constants.W
	slot := wire.Addr{Keys: wire.KeysOf(rec), Star: rec.Star, Epoch: rec.Epoch, Slot: s}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		i int
		o wire.Observation
	}
	answers := make(chan answer, len(buckets))
	for i, b := range buckets {
		go func() { answers <- answer{i, wire.ObserveObject(pctx, b, slot)} }()
	}
	obs := make([]wire.Observation, len(buckets))
	for i := range obs {
		obs[i].State = wire.SlotUnreachable
	}
	var t wire.Tally
	n := 0
	for ; n < len(buckets); n++ {
		a := <-answers
		obs[a.i] = a.o
		if t = wire.TallySlot(obs); t.Conflict || t.Copies >= w {
			n++
			break
		}
	}
	cancel()
	for ; n < len(buckets); n++ {
		<-answers // the rest stop promptly once cancelled
	}
	if t.Conflict {
		return nil, false, &ConflictError{Star: rec.Star, Epoch: rec.Epoch, Slot: s, Object: &wire.ObjectError{
			Bucket: buckets[t.ConflictAt].Name(), Key: slot.Key(), Reason: "a well-formed flight that differs from another bucket's", Err: ErrConflictingFlight}}
	}
	if t.Copies >= w {
		o := obs[t.Holders[0]]
		return o.Data[o.Header.Len():], true, nil
	}
	return nil, false, ctx.Err()
}

// readFlight reads slot s's flight of a fenced epoch from the buckets,
// starting at a slot-dependent bucket to spread the load.
func (r *Reader) readFlight(ctx context.Context, rec *epoch.Record, buckets []objstore.Bucket, s uint64) ([]byte, error) {
	slot := wire.Addr{Keys: wire.KeysOf(rec), Star: rec.Star, Epoch: rec.Epoch, Slot: s}
	k := len(buckets)
	order := make([]int, 0, k)
	for j := range k {
		order = append(order, int((s+uint64(j))%uint64(k)))
	}
	var reasons []error
	start := r.clock.Now()
	for _, i := range order {
		b := buckets[i]
		o := wire.ObserveObject(ctx, b, slot)
		if o.State == wire.SlotFlight {
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
		case wire.SlotEmpty:
			reasons = append(reasons, fmt.Errorf("%s: absent", b.Name()))
		case wire.SlotPoison:
			reasons = append(reasons, fmt.Errorf("%s: poison", b.Name()))
		default:
			reasons = append(reasons, fmt.Errorf("%s: %s: %w", b.Name(), o.State, o.Err))
		}
	}
	return nil, &DataUnavailableError{Star: rec.Star, Epoch: rec.Epoch, Slot: s, Err: errors.Join(reasons...)}
}
