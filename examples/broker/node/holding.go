package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// Holding is the star a node runs under one grant, and the appender
// (batch.DedupAppender) that serves its streams to the producers: it
// opens each stream on its first produce, rebuilds the stream's producer
// table, judges retries, and saves the table on a schedule and at every
// departure.
type Holding struct {
	n     *Node
	token authority.Token
	sess  metastore.Session
	Star  *lease.Star
	app   *batch.DedupAppender
	dedup *batch.DedupStore // where app saves and rebuilds the tables
	once  sync.Once         // ends it: abort or close
}

// Ack is where a record was acknowledged.
type Ack struct {
	Offset    uint64 `json:"offset"`
	Epoch     uint64 `json:"epoch"`
	Slot      uint64 `json:"slot"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// produce appends one record and returns where it was acknowledged. A
// record of a producer sequence the stream holds already is not appended
// again: its first acknowledgement is returned (Duplicate); one in flight
// is waited for.
func (n *Node) produce(ctx context.Context, s batch.Submission) (Ack, error) {
	h, err := n.holder()
	if err != nil {
		return Ack{}, err
	}
	a, err := h.app.Append(ctx, s)
	return Ack{Offset: a.Offset, Epoch: a.Position.Epoch, Slot: a.Position.Slot, Duplicate: a.Duplicate}, err
}

// startHolding starts the node's star under the grant with token: a new
// session, and lease.Start, which settles what an earlier star of the
// node left and mints the epoch it appends in; then the appender.
func (n *Node) startHolding(ctx context.Context, token authority.Token) (*Holding, error) {
	sess, err := n.Config.Store.NewSession(ctx, n.Config.SessionTTL)
	if err != nil {
		return nil, fmt.Errorf("new session: %w", err)
	}
	h := &Holding{n: n, token: token, sess: sess}
	// Every departure's release flush saves the stream's producer table;
	// none runs before an open, after h.app is set.
	h.Star, err = lease.Start(ctx, lease.Config{
		Star: n.Config.Name, Store: n.guard, Root: n.Config.Root, Session: sess,
		Minter: n.minter, Settler: n.settler, Index: n.refs, Constants: n.consts,
	}, lease.Options{Admit: n.admit, Clock: n.clk, Logger: n.log, MaxSnapshot: lease.MaxSnapshotLimit,
		Flush: func(ctx context.Context, stream string) error { return h.app.Flush(ctx, stream) }})
	if err == nil {
		h.dedup, err = n.newDedupStore(h.Star)
	}
	if err == nil {
		opts := n.Config.Streams
		opts.Clock, opts.Logger = cmp.Or(opts.Clock, n.clk), n.log
		opts.OnOpen, opts.OnSave, opts.OnAck = n.opened, n.saved, n.acknowledged
		h.app, err = batch.NewDedupAppender(batch.DedupAppenderConfig{Star: h.Star, Store: h.dedup, Encode: encodeSubmission}, opts)
	}
	if err != nil {
		if h.Star != nil {
			h.Star.Abort()
		}
		_ = sess.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return h, nil
}

// newDedupStore is where the star's producer tables are saved and
// rebuilt from: a flight holds one record (checked against its ref by
// recordOf), whose header names its producer.
func (n *Node) newDedupStore(star *lease.Star) (*batch.DedupStore, error) {
	return batch.NewDedupStore(star, n.chunks, batch.DedupStoreOptions{Dedup: n.Config.Producers,
		Split: func(c settle.Chunk) ([][]byte, error) {
			_, err := recordOf(c.Stream, c)
			return [][]byte{c.Data}, err
		},
		Extract: func(_ string, _ uint64, b []byte) (string, uint64, error) {
			r, err := decodeRecord(b)
			return r.Producer, r.Seq, err
		}})
}

// encodeSubmission is the appender's Encode: the broker's record format.
func encodeSubmission(s batch.Submission, off uint64) []byte {
	return Record{Stream: s.Stream, Offset: off, Producer: s.Producer, Seq: s.Seq, Data: s.Data}.Encode()
}

// opened records what the open gate decided and how the stream's
// producers were rebuilt.
func (n *Node) opened(o batch.OpenInfo) {
	if !o.Adopted {
		n.Metrics.gate(o.Tenure)
	}
	n.Metrics.replayed.Add(float64(o.Rebuild.Replayed))
	n.mu.Lock()
	n.rebuilds[o.Tenure.Stream] = o.Rebuild
	n.mu.Unlock()
}

// saved counts a save of a stream's producer table.
func (n *Node) saved(_ string, _ uint64, err error) {
	result := "failed"
	switch {
	case err == nil:
		result = "saved"
	case errors.Is(err, lease.ErrSnapshotTooBig):
		result = "refused"
	}
	n.Metrics.snapshots.WithLabelValues(result).Inc()
}

// LastRebuild returns how the node last rebuilt stream's producers.
func (n *Node) LastRebuild(stream string) (batch.RebuildInfo, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rb, ok := n.rebuilds[stream]
	return rb, ok
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
// leave through Finish (the release flush saves its table, then its
// clean-release mark), then the session goes.
func (h *Holding) close(ctx context.Context) error {
	_, err := h.end(ctx, h.Star.Close)
	return err
}

func (h *Holding) end(ctx context.Context, stop func(context.Context) error) (ended bool, err error) {
	h.once.Do(func() {
		ended = true
		h.app.Close()
		err = stop(ctx)
		h.app.Wait()
		err = errors.Join(err, h.sess.Close(ctx))
	})
	return ended, err
}
