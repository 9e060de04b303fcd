package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// Reason names the kind of a departure. Every departure goes through
// Finish; the reason is recorded in the mark and the logs.
type Reason string

const (
	// ReasonClose: the star shuts down (Close).
	ReasonClose Reason = "close"
	// ReasonHandoff: the stream moves to another star, which opens it.
	ReasonHandoff Reason = "handoff"
	// ReasonDrain: the star gives up every stream and keeps running
	// (Drain).
	ReasonDrain Reason = "drain"
	// ReasonSupersede: a newer producer fencing token was installed; the
	// star leaves and reopens under it (Fence).
	ReasonSupersede Reason = "supersede"
	// ReasonReestablish: the star leaves and reopens the stream in a new
	// tenure (Reopen), as after an open whose epoch was poisoned.
	ReasonReestablish Reason = "re-establish"
	// ReasonEvict: the star's session ended; it leaves every stream.
	ReasonEvict Reason = "evict"
)

// reasons lists every Reason a departure may record.
var reasons = []Reason{ReasonClose, ReasonHandoff, ReasonDrain, ReasonSupersede, ReasonReestablish, ReasonEvict}

// valid reports whether r is one of the reasons above: the mark records
// it for whoever reads the stream's history, so an empty or unknown one
// would only say nothing.
func (r Reason) valid() bool { return slices.Contains(reasons, r) }

// Finish is the one door for every departure from a held stream. It
//
//  1. refuses new appends to the stream and waits until every append of
//     it in flight is decided (an append whose outcome is unknown is
//     decided by rolling the star's epoch, which fences and settles it);
//  2. runs the release flush: the stream's span refs, straight from the
//     star's flight index, then Options.Flush; the star's epoch stays
//     open for its other streams;
//  3. stamps the clean-release mark, its final write, by compare-and-set
//     on the tenure's last-writer record and lease (deleting the lease
//     in the same transaction).
//
// A step that cannot land (the metastore does not answer) parks the
// departure in limbo: the star keeps the lease and retries, Options.Backoff
// apart, on its own, until it lands; opens by others bounce
// with ErrDeferred meanwhile. If ctx ends first, Finish returns a
// *LimboError and the retries go on. A tenure that a successor took over
// already (after settling it) ends with ErrSuperseded: nothing to mark.
// A reason that is none of the Reason constants is refused with a
// *cutline.ConfigError, before anything is done.
func (s *Star) Finish(ctx context.Context, stream string, reason Reason) error {
	if !reason.valid() {
		return &cutline.ConfigError{Field: "reason", Value: string(reason), Reason: fmt.Sprintf("must be one of %v", reasons)}
	}
	t, err := s.startDeparture(stream, reason)
	if err != nil {
		return err
	}
	select {
	case <-t.finished:
		return t.finishErr
	case <-ctx.Done():
		s.mu.Lock()
		last := t.lastErr
		s.mu.Unlock()
		if last != nil {
			return &LimboError{Stream: stream, Err: last}
		}
		return ctx.Err()
	}
}

// startDeparture marks the stream departing and starts its departure,
// once; it returns the tenure to wait on.
func (s *Star) startDeparture(stream string, reason Reason) (*tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.held[stream]
	if t == nil {
		return nil, &StreamError{Stream: stream, Err: ErrNotHeld}
	}
	if !t.departing {
		t.departing, t.reason = true, reason
		t.finished = make(chan struct{})
		s.wg.Add(1)
		go s.depart(t)
	}
	return t, nil
}

// depart runs one departure to its end: waits for the stream's appends,
// then lands it, retrying Backoff apart while it cannot.
func (s *Star) depart(t *tenure) {
	defer s.wg.Done()
	stream := t.info.Stream
	end := func(err error) {
		s.mu.Lock()
		t.finishErr = err
		if s.held[stream] == t {
			delete(s.held, stream)
		}
		s.mu.Unlock()
		close(t.finished)
		s.log.Info("stream released", "stream", stream, "reason", t.reason, "err", err)
	}
	for {
		s.mu.Lock()
		n := t.inflight
		if n > 0 && t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ch:
		case <-s.ctx.Done():
			end(errClosed)
			return
		}
	}
	seed := rand.Uint64()
	for attempt := 0; ; attempt++ {
		err := s.land(s.ctx, t)
		if err == nil || errors.Is(err, ErrSuperseded) {
			end(err)
			return
		}
		if s.ctx.Err() != nil {
			end(&LimboError{Stream: stream, Err: errClosed})
			return
		}
		s.mu.Lock()
		t.lastErr = err
		s.mu.Unlock()
		delay := s.opts.Backoff.Delay(attempt, seed)
		s.log.Warn("departure in limbo: the lease is kept, retrying", "stream", stream, "reason", t.reason, "in", delay, "err", err)
		if clock.Sleep(s.ctx, s.clock, delay) != nil {
			end(&LimboError{Stream: stream, Err: errClosed})
			return
		}
	}
}

// land is one attempt to land a departure: decide unknown outcomes, flush,
// mark.
func (s *Star) land(ctx context.Context, t *tenure) error {
	stream := t.info.Stream
	s.mu.Lock()
	unknown := t.unknown
	s.mu.Unlock()
	if unknown != 0 && unknown >= s.roller.Epoch().Epoch {
		// An append of the stream may or may not be in the chain: only a
		// fence of its epoch decides, and the settlement that follows
		// covers it if it is. Roll.
		if err := s.roller.Roll(ctx, s.roller.Epoch().Constants); err != nil {
			return fmt.Errorf("roll to decide an append of unknown outcome: %w", err)
		}
	}
	if planted.On(planted.MarkBeforeFlush) {
		if err := s.markFirst(ctx, t); err != nil { // planted: before the flush
			return err
		}
	}
	// The release flush: the stream's refs from the flight index.
	s.mu.Lock()
	pend := append([]spanAt(nil), t.pending...)
	s.mu.Unlock()
	flights := make([]settle.Placed, len(pend))
	for i, p := range pend {
		flights[i] = settle.Placed{Position: p.pos, Spans: []settle.Span{p.span}}
	}
	if err := s.cfg.Index.CoverFlights(ctx, s.cfg.Star, flights); err != nil {
		return fmt.Errorf("release flush: %w", err)
	}
	s.mu.Lock()
	t.pending = t.pending[min(len(pend), len(t.pending)):]
	s.mu.Unlock()
	if s.opts.Flush != nil {
		if err := s.opts.Flush(ctx, stream); err != nil {
			return fmt.Errorf("host release flush: %w", err)
		}
	}
	next, err := s.cfg.Index.Next(ctx, stream)
	if err != nil {
		return err
	}
	s.mu.Lock()
	want, wrev, ep, lrev, lost := t.next, t.writerRev, t.epoch, t.leaseRev, t.lostErr
	s.mu.Unlock()
	// Every acknowledged append is covered now. With no append of unknown
	// outcome, that is every append the tenure placed: the index must
	// agree. (After a roll decided unknown outcomes, the settlement's
	// coverage is the truth, whatever was placed.)
	if lost == nil && unknown == 0 && next != want {
		return fmt.Errorf("the index covers %s up to %d, the tenure appended up to %d", stream, next, want)
	}
	mark := &Mark{RecordHeader: hdr(releaseKind), Stream: stream, Star: s.cfg.Star, Epoch: ep, Tenure: t.info.Tenure, Next: next, Reason: t.reason, At: s.clock.Now().UTC()}
	return s.stampMark(ctx, t, mark, wrev, lrev)
}

// stampMark writes mark, the tenure t's clean-release mark, by
// compare-and-set on the tenure's last-writer record (at wrev) and lease
// (at lrev, deleted in the same transaction while the session holds it).
func (s *Star) stampMark(ctx context.Context, t *tenure, mark *Mark, wrev, lrev int64) error {
	stream := mark.Stream
	v, err := encode(mark)
	if err != nil {
		return err
	}
	withLease := !s.lostNow()
	for range 3 {
		// A mark already there is ours when an earlier attempt landed
		// and its answer was lost; any other is stale (it certified an
		// earlier tenure) and is replaced.
		relRev := int64(0)
		if kv, ok, err := getOptional(ctx, s.cfg.Store, s.keys.release(stream)); err != nil {
			return err
		} else if ok {
			if old, err := decodeMark(kv, stream); err == nil && old.Star == s.cfg.Star && old.Tenure == t.info.Tenure {
				return nil
			}
			relRev = kv.Revision
		}
		txn := metastore.Txn{
			If:   []metastore.Compare{{Key: s.keys.writer(stream), Revision: wrev}, {Key: s.keys.release(stream), Revision: relRev}},
			Then: []metastore.Op{{Key: s.keys.release(stream), Value: v}},
		}
		if withLease {
			txn.If = append(txn.If, metastore.Compare{Key: s.keys.lease(stream), Revision: lrev})
			txn.Then = append(txn.Then, metastore.Op{Key: s.keys.lease(stream), Delete: true})
		}
		_, err = s.cfg.Store.Txn(ctx, txn)
		var ce *metastore.ConflictError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce) && ce.Key == s.keys.writer(stream):
			return ErrSuperseded
		case errors.As(err, &ce) && ce.Key == s.keys.lease(stream):
			// The lease went with the session: the mark lands without
			// it, still only on the tenure's own record.
			withLease = false
		case errors.As(err, &ce):
			// The mark changed under us: look again.
		default:
			return err
		}
	}
	return fmt.Errorf("the release mark of %s kept changing", stream)
}

// Drain lets every held stream go through Finish (ReasonDrain); the star
// keeps running and may open streams again.
func (s *Star) Drain(ctx context.Context) error {
	var errs []error
	for _, t := range s.Streams() {
		if err := s.Finish(ctx, t.Stream, ReasonDrain); err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reopen leaves the stream through Finish (ReasonReestablish) and opens it
// again in a new tenure: the star consumes its own mark.
func (s *Star) Reopen(ctx context.Context, stream string, opts OpenOptions) (Tenure, error) {
	if err := s.Finish(ctx, stream, ReasonReestablish); err != nil {
		return Tenure{}, err
	}
	return s.Open(ctx, stream, opts)
}
