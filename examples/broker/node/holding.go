package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
)

// Holding is the star a node runs under one grant, and what it knows of
// the streams that star opened.
type Holding struct {
	n     *Node
	token authority.Token
	sess  metastore.Session
	Star  *lease.Star
	dedup *batch.DedupStore // saves and rebuilds the streams' producers
	once  sync.Once         // ends it: abort or close

	submitMu sync.Mutex // orders a stream's Next with its Submit
	// tokenInstalls counts the fencing tokens installed (under submitMu):
	// a produce judged before one is judged again.
	tokenInstalls atomic.Uint64

	mu      sync.Mutex
	streams map[string]*streamState  // opened, with their producers
	opening map[string]chan struct{} // opens in progress
	acks    sync.WaitGroup           // appends not decided yet

	// The background saves of the producer snapshots (saveLoop): kick
	// asks for the saves due by count, stopSnapshots ends them.
	kick     chan struct{}
	snapStop context.CancelFunc
	snapDone chan struct{}
}

// producerSeq names a record of an idempotent producer.
type producerSeq struct {
	producer string
	seq      uint64
}

// Ack is where a record was acknowledged.
type Ack struct {
	Offset    uint64 `json:"offset"`
	Epoch     uint64 `json:"epoch"`
	Slot      uint64 `json:"slot"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

func ackOf(r batch.Receipt, duplicate bool) Ack {
	return Ack{Offset: r.Offset, Epoch: r.Position.Epoch, Slot: r.Position.Slot, Duplicate: duplicate}
}

// pending is an append not decided yet.
type pending struct {
	done chan struct{}
	ack  Ack
	err  error
	sum  [sha256.Size]byte // of the payload, to tell a retry from a conflict
}

// streamState is what a holding knows of one opened stream: its
// producers' table (records applied in offset order), the acknowledged
// records waiting for an earlier one, and those in flight.
type streamState struct {
	name     string
	table    *batch.Dedup
	acked    map[uint64]ackedRecord
	inflight map[producerSeq]*pending
	// suspect: an append failed with an unknown outcome (it may still be
	// in the chain). The stream is left and opened again before the next
	// produce, which decides it and rebuilds the table from the stream.
	suspect bool
	// broken: an append failed; the table stops below it.
	broken bool
	// applied is closed and renewed with every record applied.
	applied chan struct{}
	// savedAt is the offset of the last snapshot saved or loaded.
	savedAt uint64
}

// ackedRecord is an acknowledged record not applied to the table yet.
type ackedRecord struct {
	key producerSeq
	r   batch.Receipt
}

func (h *Holding) lost() bool {
	select {
	case <-h.Star.Lost():
		return true
	default:
		return false
	}
}

// abort ends the holding as a crash would (no departure, no mark); it
// reports whether this call ended it. Its session is closed, so that the
// streams' leases go at once.
func (h *Holding) abort() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ended, _ := h.end(ctx, func(context.Context) error { h.Star.Abort(); return nil })
	return ended
}

// close ends the holding cleanly: Star.Close lets every held stream
// leave through Finish (the clean-release mark), then the session goes.
func (h *Holding) close(ctx context.Context) error {
	_, err := h.end(ctx, h.Star.Close)
	return err
}

func (h *Holding) end(ctx context.Context, stop func(context.Context) error) (ended bool, err error) {
	h.once.Do(func() {
		ended = true
		h.stopSnapshots()
		err = stop(ctx)
		h.acks.Wait()
		err = errors.Join(err, h.sess.Close(ctx))
	})
	return ended, err
}

// forget forgets a stream the star no longer holds, so that the next
// produce opens it again.
func (h *Holding) forget(stream string, s *streamState, err error) {
	if !errors.Is(err, lease.ErrNotHeld) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[stream] == s {
		delete(h.streams, stream)
	}
}

// stream returns the opened stream, opening it on its first produce: one
// open at a time per stream, the others wait for it.
func (h *Holding) stream(ctx context.Context, name, token string) (*streamState, error) {
	for {
		h.mu.Lock()
		s, ch := h.streams[name], h.opening[name]
		switch {
		case s != nil && !s.suspect:
			h.mu.Unlock()
			return s, nil
		case ch != nil:
			h.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case s == nil && len(h.streams)+len(h.opening) >= h.n.Config.maxStreams():
			h.mu.Unlock()
			return nil, fmt.Errorf("%w: %d streams", errStreamQuota, h.n.Config.maxStreams())
		}
		ch = make(chan struct{})
		h.opening[name] = ch
		h.mu.Unlock()
		ns, err := h.open(ctx, name, token, s != nil)
		h.mu.Lock()
		delete(h.opening, name)
		// A reopen that failed leaves the suspect state in place: the
		// next produce leaves the stream through Finish again.
		if err == nil {
			h.streams[name] = ns
		}
		h.mu.Unlock()
		close(ch)
		return ns, err
	}
}

// open opens the stream through the gate, waiting while it is deferred
// (at most OpenWait), and rebuilds its producers' table. To reopen
// (after an append of unknown outcome), the star first leaves the stream
// through Finish, which decides that append: it rolls the star's epoch,
// whose settlement covers the append if it landed.
func (h *Holding) open(ctx context.Context, name, token string, reopen bool) (*streamState, error) {
	n := h.n
	// Every submit judged by the state this one replaces has reached the
	// star (and, on a reopen, Finish decides it); later ones find that
	// state replaced.
	h.submitMu.Lock()
	h.submitMu.Unlock()
	if reopen {
		if err := h.Star.Finish(ctx, name, lease.ReasonReestablish); err != nil && !errors.Is(err, lease.ErrNotHeld) {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, n.Config.OpenWait)
	ten, err := h.Star.OpenWait(wctx, name, lease.OpenOptions{Token: token}, openRetry)
	cancel()
	switch {
	case errors.Is(err, lease.ErrHeld) && !reopen:
		// The star holds the stream without state here: an earlier open
		// took the tenure and then failed to rebuild the producers.
		// Nothing was appended since, so the tenure still starts where
		// the rebuild must end: adopt it and rebuild again.
		held := h.Star.Streams()
		i := slices.IndexFunc(held, func(t lease.Tenure) bool { return t.Stream == name })
		next, nerr := h.Star.Next(name)
		if i < 0 || nerr != nil {
			return nil, err
		}
		ten, ten.Next = held[i], next
		n.log.Info("adopting a held stream whose producers were not rebuilt", "stream", name, "tenure", ten.Tenure, "next", ten.Next)
	case err != nil:
		return nil, err
	default:
		n.Metrics.gate(ten)
	}
	table, rb, err := h.rebuild(ctx, name, ten.Next)
	if err != nil {
		return nil, fmt.Errorf("rebuild the producers of %s: %w", name, err)
	}
	producers, acks := table.Len()
	n.log.Info("stream ready", "stream", name, "decision", ten.Decision, "tenure", ten.Tenure, "next", ten.Next,
		"had_snapshot", rb.HadSnapshot, "snapshot", rb.Snapshot, "replayed", rb.Replayed, "producers", producers, "producer_records", acks)
	return &streamState{name: name, table: table, acked: map[uint64]ackedRecord{}, inflight: map[producerSeq]*pending{},
		applied: make(chan struct{}), savedAt: rb.Snapshot}, nil
}
