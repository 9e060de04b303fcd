package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// Bounds of a bulk open.
const (
	// MaxOpenMany bounds the streams of one OpenMany call.
	MaxOpenMany = 1 << 16
	// admitPerTxn is how many admissions share one transaction: each
	// compares four keys, within etcd's 128 operations per request.
	admitPerTxn = 32
	// openParallel bounds the reads a bulk open has in flight.
	openParallel = 16
)

// OpenMany opens streams in bulk, with the gate of Open deciding each one
// exactly as Open would. It returns a Tenure or an error per stream, in
// the order given: a refusal of one (deferred, stale token, held, a bad
// record) does not fail the others. opts applies to every stream.
//
// Its cost is per batch, not per stream: the leases are taken in
// transactions of up to 128 streams, the admissions in transactions of
// 32, the reads run 16 at a time, and each predecessor epoch is settled
// once for all the streams it left, not once per stream. A stream whose
// batch loses a compare (a racing open, a record that changed) goes
// through Open's own rounds, so racing opens still admit exactly one star
// per stream.
func (s *Star) OpenMany(ctx context.Context, streams []string, opts OpenOptions) ([]Tenure, []error) {
	tens := make([]Tenure, len(streams))
	errs := make([]error, len(streams))
	fail := func(err error) ([]Tenure, []error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return tens, errs
	}
	if len(streams) > MaxOpenMany {
		return fail(&cutline.ConfigError{Field: "streams", Value: len(streams), Reason: fmt.Sprintf("more than %d in one call", MaxOpenMany)})
	}
	if err := ValidateToken(opts.Token); err != nil {
		return fail(err)
	}
	if s.opts.Admit != nil {
		if err := s.opts.Admit(); err != nil {
			return fail(err)
		}
	}
	// Reserve each stream as Open does; a name given twice is refused
	// the second time.
	var todo []int
	seen := map[string]bool{}
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return fail(err)
	}
	for i, id := range streams {
		if errs[i] = epoch.ValidateName("stream", id); errs[i] != nil {
			continue
		}
		switch t := s.held[id]; {
		case seen[id]:
			errs[i] = &cutline.ConfigError{Field: "streams", Value: id, Reason: "given twice"}
		case t != nil && t.departing:
			errs[i] = &DeferredError{Stream: id, Reason: InLimbo, Holder: s.cfg.Star}
		case t != nil || s.opening[id]:
			errs[i] = &StreamError{Stream: id, Err: ErrHeld}
		default:
			s.opening[id] = true
			todo = append(todo, i)
		}
		seen[id] = true
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, i := range todo {
			delete(s.opening, streams[i])
		}
		s.mu.Unlock()
	}()

	leases := s.acquireMany(ctx, streams, todo, opts, errs)
	var live []int
	for _, i := range todo {
		if errs[i] == nil {
			live = append(live, i)
		}
	}
	recs := s.readGates(ctx, streams, live, errs)
	b := &bulkOpen{s: s, settled: map[string]*bulkSettle{}}
	var fallback []int
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(openParallel)
	for _, i := range live {
		if errs[i] != nil {
			continue
		}
		g.Go(func() error {
			ten, err := s.judge(ctx, streams[i], opts, recs[i], false, b.settle)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errRegate):
				fallback = append(fallback, i)
			case err != nil:
				errs[i] = err
			default:
				tens[i] = ten
			}
			return nil
		})
	}
	_ = g.Wait()
	// Where each continues, read once every settlement has run.
	var judged []int
	for _, i := range live {
		if errs[i] == nil && tens[i].Stream != "" {
			judged = append(judged, i)
		}
	}
	s.continueMany(ctx, streams, judged, tens, recs, errs, &fallback)
	var ready []int
	for _, i := range todo {
		switch {
		case errs[i] == nil && tens[i].Stream != "":
			ready = append(ready, i)
		case errs[i] != nil && leases[i] != 0:
			s.release(streams[i], leases[i])
		}
	}
	fallback = append(fallback, s.admitMany(ctx, tens, recs, leases, ready, errs)...)
	for _, i := range fallback {
		tens[i], errs[i] = s.gateRounds(ctx, streams[i], opts, leases[i], false)
	}
	return tens, errs
}

// readGates reads the gate records of streams[idx], three keys a stream,
// metastore.MaxReadMany keys to a request, openParallel requests at once.
// A stream whose records cannot be read or decoded gets its error in errs.
func (s *Star) readGates(ctx context.Context, streams []string, idx []int, errs []error) []gateRecords {
	recs := make([]gateRecords, len(streams))
	const per = metastore.MaxReadMany / 3
	var g errgroup.Group
	g.SetLimit(openParallel)
	for from := 0; from < len(idx); from += per {
		chunk := idx[from:min(len(idx), from+per)]
		g.Go(func() error {
			reads := make([]metastore.Read, 0, 3*len(chunk))
			for _, i := range chunk {
				id := streams[i]
				reads = append(reads, metastore.Read{Key: s.keys.writer(id)}, metastore.Read{Key: s.keys.release(id)}, metastore.Read{Key: s.keys.token(id)})
			}
			res, err := metastore.ReadMany(ctx, s.cfg.Store, reads)
			for j, i := range chunk {
				if err != nil {
					errs[i] = fmt.Errorf("lease: read the records of %s: %w", streams[i], err)
					continue
				}
				recs[i], errs[i] = s.gateOf(streams[i], res[3*j], res[3*j+1], res[3*j+2])
			}
			return nil
		})
	}
	_ = g.Wait()
	return recs
}

// continueMany sets where each judged stream continues, read with one
// Index.NextMany. A stream whose mark the index contradicts goes to
// fallback.
func (s *Star) continueMany(ctx context.Context, streams []string, judged []int, tens []Tenure, recs []gateRecords, errs []error, fallback *[]int) {
	nexts := make([]uint64, len(streams))
	ids := make([]string, len(judged))
	for j, i := range judged {
		ids[j] = streams[i]
	}
	got, err := s.cfg.Index.NextMany(ctx, ids)
	if err == nil && len(got) != len(ids) {
		err = fmt.Errorf("the index answered %d of %d streams", len(got), len(ids))
	}
	for j, i := range judged {
		if err != nil {
			errs[i] = fmt.Errorf("lease: where %s continues: %w", streams[i], err)
			continue
		}
		nexts[i] = got[j]
	}
	for _, i := range judged {
		if errs[i] != nil {
			tens[i] = Tenure{}
			continue
		}
		distrust := false
		ten, err := s.continueAt(tens[i], recs[i], nexts[i], &distrust)
		switch {
		case errors.Is(err, errRegate):
			tens[i] = Tenure{}
			*fallback = append(*fallback, i)
		case err != nil:
			tens[i], errs[i] = Tenure{}, err
		default:
			tens[i] = ten
		}
	}
}

// acquireMany takes the leases of streams[todo] in transactions of up to
// MaxTxnOps streams. A batch that loses a compare (a lease held, by
// another star or by an earlier open of ours) takes each of its leases
// as Open does. A stream whose lease is not taken gets its error in errs.
func (s *Star) acquireMany(ctx context.Context, streams []string, todo []int, opts OpenOptions, errs []error) []int64 {
	revs := make([]int64, len(streams))
	var g errgroup.Group
	g.SetLimit(openParallel)
	for from := 0; from < len(todo); from += settle.MaxTxnOps {
		chunk := todo[from:min(len(todo), from+settle.MaxTxnOps)]
		g.Go(func() error {
			var txn metastore.Txn
			for _, i := range chunk {
				v, err := encode(&leaseRecord{RecordHeader: hdr(leaseKind), Stream: streams[i], Star: s.cfg.Star, Session: s.cfg.Session.ID()})
				if err != nil {
					errs[i] = err
					continue
				}
				key := s.keys.lease(streams[i])
				txn.If = append(txn.If, metastore.Compare{Key: key, Revision: 0})
				txn.Then = append(txn.Then, metastore.Op{Key: key, Value: v, Session: s.cfg.Session})
			}
			rev, err := s.cfg.Store.Txn(ctx, txn)
			for _, i := range chunk {
				switch {
				case errs[i] != nil:
				case err == nil:
					revs[i] = rev
				default:
					revs[i], errs[i] = s.acquire(ctx, streams[i], opts.BreakLease)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	return revs
}

// admitMany admits the tenures tens[ready] in transactions of
// admitPerTxn, under the star's tenure lock. It returns the streams of the
// batches that lost a compare, for Open's own rounds.
func (s *Star) admitMany(ctx context.Context, tens []Tenure, recs []gateRecords, leases []int64, ready []int, errs []error) (again []int) {
	s.tenMu.Lock()
	defer s.tenMu.Unlock()
	cur := s.cur
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(openParallel)
	for from := 0; from < len(ready); from += admitPerTxn {
		chunk := ready[from:min(len(ready), from+admitPerTxn)]
		g.Go(func() error {
			var txn metastore.Txn
			for _, i := range chunk {
				tens[i].Epoch = cur.Epoch
				if err := s.admitOps(&txn, tens[i], recs[i].w, recs[i].markRev, recs[i].tok, leases[i]); err != nil {
					errs[i] = err
				}
			}
			rev, err := s.cfg.Store.Txn(ctx, txn)
			switch {
			case errors.Is(err, metastore.ErrConflict):
				mu.Lock()
				again = append(again, chunk...)
				mu.Unlock()
				return nil
			case err != nil:
				for _, i := range chunk {
					if errs[i] == nil {
						errs[i] = fmt.Errorf("lease: admit %s: %w", tens[i].Stream, err)
						s.release(tens[i].Stream, leases[i])
					}
					tens[i] = Tenure{}
				}
				return nil
			}
			s.mu.Lock()
			for _, i := range chunk {
				if errs[i] == nil {
					t := tens[i]
					s.held[t.Stream] = &tenure{info: t, writerRev: rev, epoch: cur.Epoch, leaseRev: leases[i], next: t.Next}
				}
			}
			s.mu.Unlock()
			for _, i := range chunk {
				if errs[i] == nil {
					s.opened(tens[i])
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	return again
}

// bulkOpen shares the resolution of abandonments among the streams of a
// bulk open: each predecessor epoch is judged and settled once.
type bulkOpen struct {
	s       *Star
	mu      sync.Mutex
	settled map[string]*bulkSettle
}

type bulkSettle struct {
	done chan struct{} // closed once the first caller has settled
	d    Decision
	rep  *settle.SettleReport
	err  error
}

// settle is settlePredecessor, once per predecessor epoch. A deferral is
// reported for each stream with its own name; a roll of this star's own
// head (errRegate) is not shared: each such stream takes Open's rounds.
func (b *bulkOpen) settle(ctx context.Context, stream string, w *WriterRecord) (Decision, *settle.SettleReport, error) {
	key := fmt.Sprintf("%s/%d", w.Star, w.Epoch)
	b.mu.Lock()
	r := b.settled[key]
	first := r == nil
	if first {
		r = &bulkSettle{done: make(chan struct{})}
		b.settled[key] = r
	}
	b.mu.Unlock()
	if first {
		r.d, r.rep, r.err = b.s.settlePredecessor(ctx, stream, w)
		close(r.done)
	} else {
		// Waiting on a channel, not a lock: the wait ends with ctx.
		select {
		case <-r.done:
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
	}
	var de *DeferredError
	if errors.As(r.err, &de) {
		cp := *de
		cp.Stream = stream
		return "", nil, &cp
	}
	return r.d, r.rep, r.err
}
