package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// Decision is how the open gate admitted a tenure.
type Decision string

const (
	// Fresh: the stream had no last-writer record.
	Fresh Decision = "fresh"
	// MarkConsumed: a clean-release mark certified the predecessor's
	// tenure; the open consumed it.
	MarkConsumed Decision = "mark consumed"
	// SettledInline: the predecessor's epoch lay below its class head
	// (superseded); the open settled it.
	SettledInline Decision = "settled inline"
	// SettledDead: the predecessor's epoch was its head, and the registry
	// had converged on the star's death; the open fenced and settled it.
	SettledDead Decision = "settled after death"
	// AlreadySettled: the predecessor's epoch was settled already.
	AlreadySettled Decision = "already settled"
)

// Tenure describes one admitted open of a stream.
type Tenure struct {
	Stream string
	Star   string
	// Tenure numbers the stream's admitted opens, from 1.
	Tenure uint64
	// Epoch is the star's epoch at admission.
	Epoch uint64
	// Next is the stream's first offset of this tenure.
	Next uint64
	// Decision is how the gate admitted it.
	Decision Decision
	// Predecessor is the last-writer record the gate judged (nil for a
	// fresh stream).
	Predecessor *WriterRecord
	// Settled reports the settlement the open ran (SettledInline,
	// SettledDead, AlreadySettled).
	Settled *settle.SettleReport
}

// OpenOptions are the producer-facing parts of an open. The zero value
// works: it presents no token and breaks no lease.
type OpenOptions struct {
	// Token is the producer's fencing token, judged by exact equality
	// with the stream's installed one ("" presents none).
	Token string
	// BreakLease takes the stream's lease even when another star's
	// session still holds it: the lease is advisory, and a host under the
	// authority layer that holds a newer grant (the controller has ended
	// the other star's) breaks it instead of waiting for that session to
	// expire. The gate still judges the last-writer record: a predecessor
	// whose epoch is not settled or superseded still defers the open.
	BreakLease bool
}

// maxGateRounds bounds how often one open re-reads the stream's records
// after losing a compare-and-set to a concurrent writer of them.
const maxGateRounds = 64

// errRegate: a compare failed, read again.
var errRegate = errors.New("lease: stream changed during the open")

// Open takes the stream's lease and passes the open gate, then admits the
// star's tenure: from its return on, Submit takes the stream's records,
// from Tenure.Next on.
//
// The gate judges the stream's last-writer record:
//
//   - no record: a fresh stream;
//   - a clean-release mark for the recorded tenure: consumed, in the
//     transaction that admits this one;
//   - no mark, the predecessor's epoch below its class head (superseded):
//     settled inline, whatever the registry says;
//   - no mark, the predecessor's epoch its head, the star alive: refused
//     with a *DeferredError (PredecessorAlive) until the mark lands, the
//     star restarts or the registry converges on its death, which lets
//     the open fence and settle it.
//
// A held lease is a *DeferredError too (LeaseHeld): retry later. A stale
// token is a *TokenError.
func (s *Star) Open(ctx context.Context, stream string, opts OpenOptions) (Tenure, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return Tenure{}, err
	}
	if err := ValidateToken(opts.Token); err != nil {
		return Tenure{}, err
	}
	if s.opts.Admit != nil {
		if err := s.opts.Admit(); err != nil {
			return Tenure{}, err
		}
	}
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return Tenure{}, err
	}
	if t := s.held[stream]; t != nil {
		departing := t.departing // guarded by s.mu, like every tenure field
		s.mu.Unlock()
		if departing {
			return Tenure{}, &DeferredError{Stream: stream, Reason: InLimbo, Holder: s.cfg.Star}
		}
		return Tenure{}, &StreamError{Stream: stream, Err: ErrHeld}
	}
	if s.opening[stream] {
		s.mu.Unlock()
		return Tenure{}, &StreamError{Stream: stream, Err: ErrHeld}
	}
	s.opening[stream] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.opening, stream)
		s.mu.Unlock()
	}()

	// A stale token is refused before anything is taken; the gate judges
	// it again against what it admits on.
	if err := s.CheckToken(ctx, stream, opts.Token); err != nil {
		return Tenure{}, err
	}
	leaseRev, err := s.acquire(ctx, stream, opts.BreakLease)
	if err != nil {
		return Tenure{}, err
	}
	return s.gateRounds(ctx, stream, opts, leaseRev, false)
}

// gateRounds passes the gate for stream, whose lease the open holds at
// leaseRev, in as many rounds as concurrent writers of its records make
// it take; it releases the lease when it does not admit.
func (s *Star) gateRounds(ctx context.Context, stream string, opts OpenOptions, leaseRev int64, distrust bool) (Tenure, error) {
	admitted := false
	defer func() {
		if !admitted {
			s.release(stream, leaseRev)
		}
	}()
	for range maxGateRounds {
		ten, err := s.gate(ctx, stream, opts, leaseRev, &distrust)
		if errors.Is(err, errRegate) {
			if err := ctx.Err(); err != nil {
				return Tenure{}, err
			}
			continue
		}
		if err != nil {
			return Tenure{}, err
		}
		admitted = true
		s.opened(ten)
		return ten, nil
	}
	return Tenure{}, fmt.Errorf("lease: open %s: the stream's records changed %d times during the open", stream, maxGateRounds)
}

func (s *Star) opened(ten Tenure) {
	s.log.Info("stream opened", "stream", ten.Stream, "tenure", ten.Tenure, "decision", ten.Decision, "next", ten.Next, "epoch", ten.Epoch)
}

// OpenWait is Open retried while it is deferred: every interval on the
// star's clock (0 means 500 ms), until it is admitted, refused otherwise,
// or ctx ends (the last deferral is returned then, wrapped with ctx's
// error).
func (s *Star) OpenWait(ctx context.Context, stream string, opts OpenOptions, interval time.Duration) (Tenure, error) {
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	for {
		ten, err := s.Open(ctx, stream, opts)
		if !errors.Is(err, ErrDeferred) {
			return ten, err
		}
		t := s.clock.NewTimer(interval)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return Tenure{}, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		}
	}
}

// acquire creates the stream's lease bound to the star's session.
func (s *Star) acquire(ctx context.Context, stream string, breakLease bool) (int64, error) {
	key := s.keys.lease(stream)
	v, err := encode(&leaseRecord{RecordHeader: hdr(leaseKind), Stream: stream, Star: s.cfg.Star, Session: s.cfg.Session.ID()})
	if err != nil {
		return 0, err
	}
	rev, err := metastore.PutBound(ctx, s.cfg.Store, s.cfg.Session, key, v, 0)
	switch {
	case err == nil:
		return rev, nil
	case errors.Is(err, metastore.ErrSessionExpired):
		return 0, ErrSessionLost
	case !errors.Is(err, metastore.ErrConflict):
		return 0, fmt.Errorf("lease: take the lease of %s: %w", stream, err)
	}
	kv, ok, gerr := getOptional(ctx, s.cfg.Store, key)
	if gerr != nil {
		return 0, fmt.Errorf("lease: read the lease of %s: %w", stream, gerr)
	}
	if !ok {
		return 0, &DeferredError{Stream: stream, Reason: LeaseHeld} // it just went: try again
	}
	l, derr := decodeLease(kv, stream)
	if derr != nil {
		return 0, derr
	}
	if l.Star == s.cfg.Star && kv.Session == s.cfg.Session.ID() {
		// Left by an open of ours that could not release it: ours.
		return kv.Revision, nil
	}
	if breakLease {
		if err := metastore.Delete(ctx, s.cfg.Store, key, kv.Revision); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return 0, fmt.Errorf("lease: break the lease of %s held by %s: %w", stream, l.Star, err)
		}
		s.log.Warn("broke a lease held by another star", "stream", stream, "holder", l.Star)
		rev, err := metastore.PutBound(ctx, s.cfg.Store, s.cfg.Session, key, v, 0)
		switch {
		case err == nil:
			return rev, nil
		case errors.Is(err, metastore.ErrSessionExpired):
			return 0, ErrSessionLost
		case !errors.Is(err, metastore.ErrConflict):
			// Its outcome is unknown: a lease of ours may stand, and the
			// next open finds it ours (above).
			return 0, fmt.Errorf("lease: take the lease of %s after breaking it: %w", stream, err)
		}
		// Another star took it in between: held again.
	}
	return 0, &DeferredError{Stream: stream, Reason: LeaseHeld, Holder: l.Star}
}

// releaseWait bounds the delete of the lease an open that was not admitted
// leaves: the lease vanishes with the session at the latest.
const releaseWait = 5 * time.Second

// release deletes the lease after an open that was not admitted.
func (s *Star) release(stream string, rev int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), releaseWait)
	defer cancel()
	if err := metastore.Delete(ctx, s.cfg.Store, s.keys.lease(stream), rev); err != nil && !errors.Is(err, metastore.ErrConflict) {
		// It vanishes with the session at the latest.
		s.log.Warn("could not release the lease of a refused open", "stream", stream, "err", err)
	}
}

func hdr(kind string) metastore.RecordHeader {
	return metastore.RecordHeader{Kind: kind, Format: recFormat}
}

// gate is one round of the open gate: read, decide, settle, admit by
// compare-and-set. errRegate asks for another round.
func (s *Star) gate(ctx context.Context, stream string, opts OpenOptions, leaseRev int64, distrust *bool) (Tenure, error) {
	g, err := s.readGate(ctx, stream)
	if err != nil {
		return Tenure{}, err
	}
	ten, err := s.decide(ctx, stream, opts, g, distrust, s.settlePredecessor)
	if err != nil {
		return Tenure{}, err
	}
	return s.admit(ctx, ten, g.w, g.markRev, g.tok, leaseRev)
}

// gateRecords are the records of a stream the gate judges.
type gateRecords struct {
	w       *WriterRecord
	m       *Mark
	markRev int64
	tok     *TokenRecord
}

// readGate reads the stream's last-writer record, mark and token, in one
// request where the store can (metastore.ReadMany).
func (s *Star) readGate(ctx context.Context, stream string) (gateRecords, error) {
	res, err := metastore.ReadMany(ctx, s.cfg.Store, []metastore.Read{
		{Key: s.keys.writer(stream)}, {Key: s.keys.release(stream)}, {Key: s.keys.token(stream)}})
	if err != nil {
		return gateRecords{}, fmt.Errorf("lease: read the records of %s: %w", stream, err)
	}
	return s.gateOf(stream, res[0], res[1], res[2])
}

// gateOf decodes the gate records of stream from the reads of its
// last-writer record, mark and token.
func (s *Star) gateOf(stream string, wr, mr, tr metastore.ReadResult) (gateRecords, error) {
	g := gateRecords{tok: &TokenRecord{Stream: stream, Mode: Any}}
	var err error
	if wr.Found {
		if g.w, err = decodeWriter(wr.KV, stream); err != nil {
			return g, err
		}
	}
	if mr.Found {
		g.markRev = mr.KV.Revision
		if g.m, err = decodeMark(mr.KV, stream); err != nil {
			// A mark that does not decode certifies nothing; the admit
			// deletes it with the rest.
			s.log.Warn("ignoring a bad release mark", "stream", stream, "err", err)
			g.m = nil
		}
	}
	if tr.Found {
		if g.tok, err = decodeToken(tr.KV, stream); err != nil {
			return g, err
		}
	}
	return g, nil
}

// settleFunc resolves an abandonment (settlePredecessor, or a bulk open's
// shared resolution of it).
type settleFunc func(ctx context.Context, stream string, w *WriterRecord) (Decision, *settle.SettleReport, error)

// decide judges the records g of stream: the token, then the tenure it
// follows (settling an abandonment with settleFn), then where the stream
// continues. It writes nothing of the tenure; admit does.
func (s *Star) decide(ctx context.Context, stream string, opts OpenOptions, g gateRecords, distrust *bool, settleFn settleFunc) (Tenure, error) {
	ten, err := s.judge(ctx, stream, opts, g, *distrust, settleFn)
	if err != nil {
		return Tenure{}, err
	}
	next, err := s.cfg.Index.Next(ctx, stream)
	if err != nil {
		return Tenure{}, fmt.Errorf("lease: where %s continues: %w", stream, err)
	}
	return s.continueAt(ten, g, next, distrust)
}

// judge decides how the gate admits stream on its records g: the token,
// then the tenure it follows, settling an abandonment with settleFn.
func (s *Star) judge(ctx context.Context, stream string, opts OpenOptions, g gateRecords, distrust bool, settleFn settleFunc) (Tenure, error) {
	w, m := g.w, g.m
	if err := g.tok.judge(opts.Token); err != nil {
		return Tenure{}, err
	}
	ten := Tenure{Stream: stream, Star: s.cfg.Star, Tenure: 1, Predecessor: w}
	switch {
	case w == nil:
		ten.Decision = Fresh
	case !distrust && m.certifies(w):
		ten.Decision = MarkConsumed
	default:
		if m != nil && !m.certifies(w) {
			s.log.Warn("a release mark for another tenure certifies nothing", "stream", stream, "mark_tenure", m.Tenure, "mark_star", m.Star, "tenure", w.Tenure, "star", w.Star)
		}
		d, rep, err := settleFn(ctx, stream, w)
		if err != nil {
			return Tenure{}, err
		}
		ten.Decision, ten.Settled = d, rep
	}
	if w != nil {
		ten.Tenure = w.Tenure + 1
	}
	return ten, nil
}

// continueAt sets where the admitted tenure continues, next, read from
// the index after judge (and any settlement) ran. A mark whose coverage
// the index does not show is trusted by neither: the gate distrusts it
// and settles instead, in another round.
func (s *Star) continueAt(ten Tenure, g gateRecords, next uint64, distrust *bool) (Tenure, error) {
	if ten.Decision == MarkConsumed && next != g.m.Next {
		s.log.Warn("a release mark disagrees with the index; settling instead", "stream", ten.Stream, "mark_next", g.m.Next, "index_next", next)
		*distrust = true
		return Tenure{}, errRegate
	}
	ten.Next = next
	return ten, nil
}

// settlePredecessor resolves an abandonment: a predecessor tenure without
// a mark. It settles the recorded epoch when it is superseded or its star
// dead, refuses while the star is alive, and rolls this star's own epoch
// when the predecessor is this star's live head.
func (s *Star) settlePredecessor(ctx context.Context, stream string, w *WriterRecord) (Decision, *settle.SettleReport, error) {
	rec, err := s.cfg.Minter.Get(ctx, w.Star, w.Epoch)
	if err != nil {
		return "", nil, fmt.Errorf("lease: the epoch %s/%d the last writer of %s names: %w", w.Star, w.Epoch, stream, err)
	}
	d := AlreadySettled
	if rec.State != epoch.StateSettled {
		sup, err := s.cfg.Minter.Superseded(ctx, rec)
		if err != nil {
			return "", nil, err
		}
		switch {
		case sup:
			d = SettledInline
		case w.Star == s.cfg.Star:
			// Our own live head, unmarked: a tenure of ours ended
			// without landing (its lease was lost). Re-establish: roll,
			// which fences and settles our own epoch, then look again.
			s.log.Warn("own unmarked head: rolling before the open", "stream", stream, "epoch", w.Epoch)
			if err := s.roller.Roll(ctx, s.roller.Epoch().Constants); err != nil {
				return "", nil, fmt.Errorf("lease: roll before reopening %s: %w", stream, err)
			}
			return "", nil, errRegate
		default:
			alive, err := s.reg.Alive(ctx, w.Star)
			if err != nil {
				return "", nil, err
			}
			if alive {
				return "", nil, &DeferredError{Stream: stream, Reason: PredecessorAlive, Holder: w.Star, Epoch: w.Epoch}
			}
			d = SettledDead
		}
	}
	rep, err := s.cfg.Settler.Settle(ctx, w.Star, w.Epoch)
	if err != nil {
		return "", nil, fmt.Errorf("lease: settle %s/%d before opening %s: %w", w.Star, w.Epoch, stream, err)
	}
	return d, &rep, nil
}

// admit writes this star's last-writer record and consumes any mark, by
// compare-and-set on everything the gate read, and records the tenure.
func (s *Star) admit(ctx context.Context, ten Tenure, w *WriterRecord, markRev int64, tok *TokenRecord, leaseRev int64) (Tenure, error) {
	s.tenMu.Lock()
	defer s.tenMu.Unlock()
	cur := s.cur
	ten.Epoch = cur.Epoch
	var txn metastore.Txn
	if err := s.admitOps(&txn, ten, w, markRev, tok, leaseRev); err != nil {
		return Tenure{}, err
	}
	rev, err := s.cfg.Store.Txn(ctx, txn)
	var ce *metastore.ConflictError
	switch {
	case errors.As(err, &ce) && ce.Key == s.keys.lease(ten.Stream):
		return Tenure{}, &DeferredError{Stream: ten.Stream, Reason: LeaseHeld} // lost with the session
	case errors.Is(err, metastore.ErrConflict):
		return Tenure{}, errRegate
	case err != nil:
		return Tenure{}, fmt.Errorf("lease: admit %s: %w", ten.Stream, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[ten.Stream] = &tenure{info: ten, writerRev: rev, epoch: cur.Epoch, leaseRev: leaseRev, next: ten.Next}
	return ten, nil
}

// admitOps adds to txn the compares and writes that admit ten (whose
// Epoch is set): 4 compares and at most 2 operations.
func (s *Star) admitOps(txn *metastore.Txn, ten Tenure, w *WriterRecord, markRev int64, tok *TokenRecord, leaseRev int64) error {
	nw := &WriterRecord{RecordHeader: hdr(writerKind), Stream: ten.Stream, Star: s.cfg.Star, Epoch: ten.Epoch, Class: s.cur.Constants.Class, Tenure: ten.Tenure}
	v, err := encode(nw)
	if err != nil {
		return err
	}
	wrev := int64(0)
	if w != nil {
		wrev = w.Revision
	}
	txn.If = append(txn.If,
		metastore.Compare{Key: s.keys.writer(ten.Stream), Revision: wrev},
		metastore.Compare{Key: s.keys.release(ten.Stream), Revision: markRev},
		metastore.Compare{Key: s.keys.lease(ten.Stream), Revision: leaseRev},
		metastore.Compare{Key: s.keys.token(ten.Stream), Revision: tok.Revision},
	)
	txn.Then = append(txn.Then, metastore.Op{Key: s.keys.writer(ten.Stream), Value: v})
	if markRev != 0 {
		txn.Then = append(txn.Then, metastore.Op{Key: s.keys.release(ten.Stream), Delete: true})
	}
	return nil
}
