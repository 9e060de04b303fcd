package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/settle"
)

// SnapshotTiming says when a holder saves a stream's producer snapshot:
// once Every records were applied since the last one, and every Interval
// (on Clock, nil for the node's) when any was. 0 means the default; a
// negative value turns that trigger off. Every departure saves one too,
// in its release flush.
type SnapshotTiming struct {
	Every    int
	Interval time.Duration
	Clock    clock.Clock
}

const (
	defaultSnapshotEvery  = 1000
	defaultSnapshotPeriod = 30 * time.Second
	// flushWait bounds how long a departure's flush waits for the table
	// to catch up with what was acknowledged.
	flushWait = 5 * time.Second
)

func (t SnapshotTiming) or() SnapshotTiming {
	if t.Every == 0 {
		t.Every = defaultSnapshotEvery
	}
	if t.Interval == 0 {
		t.Interval = defaultSnapshotPeriod
	}
	return t
}

// LastRebuild returns how the node last rebuilt stream's producers.
func (n *Node) LastRebuild(stream string) (batch.RebuildInfo, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rb, ok := n.rebuilds[stream]
	return rb, ok
}

// newDedupStore is where the star's producer tables are saved and
// rebuilt from: a flight holds one record, whose header names its
// producer.
func (n *Node) newDedupStore(star *lease.Star) (*batch.DedupStore, error) {
	return batch.NewDedupStore(star, n.chunks, batch.DedupStoreOptions{Dedup: n.Config.Producers,
		Split: func(c settle.Chunk) ([][]byte, error) {
			if c.Count != 1 {
				return nil, fmt.Errorf("ref %s/%d covers %d records; this broker writes one per flight", c.Stream, c.Offset, c.Count)
			}
			return [][]byte{c.Data}, nil
		},
		Extract: func(stream string, off uint64, b []byte) (string, uint64, error) {
			r, err := decodeRecord(b)
			if err == nil && (r.Stream != stream || r.Offset != off) {
				err = fmt.Errorf("the ref at %s/%d holds %s offset %d", stream, off, r.Stream, r.Offset)
			}
			return r.Producer, r.Seq, err
		}})
}

// rebuild rebuilds the stream's producer table up to next, the tenure's
// first offset (batch.DedupStore.Rebuild), and says how.
func (h *Holding) rebuild(ctx context.Context, name string, next uint64) (*batch.Dedup, batch.RebuildInfo, error) {
	n := h.n
	table, rb, err := h.dedup.Rebuild(ctx, name, next)
	if rb.SetAside != nil {
		n.log.Warn("ignoring a producer snapshot; replaying the whole stream", "stream", name, "err", rb.SetAside)
	}
	if rb.Skipped > 0 {
		n.log.Warn("records below the retention point cannot be replayed: their producers' retries are no longer recognized",
			"stream", name, "skipped", rb.Skipped)
	}
	if err != nil {
		return nil, rb, err
	}
	n.Metrics.replayed.Add(float64(rb.Replayed))
	n.mu.Lock()
	n.rebuilds[name] = rb
	n.mu.Unlock()
	return table, rb, nil
}

// applyLocked applies the acknowledged records that continue the table,
// and asks for a save once enough were applied since the last one.
func (h *Holding) applyLocked(s *streamState) {
	from := s.table.Next()
	for r, ok := s.acked[from]; ok; r, ok = s.acked[s.table.Next()] {
		delete(s.acked, s.table.Next())
		s.table.Apply(r.key.producer, r.key.seq, r.r)
		delete(s.inflight, r.key)
	}
	if s.table.Next() == from {
		return
	}
	close(s.applied)
	s.applied = make(chan struct{})
	if every := h.n.Config.Snapshots.or().Every; every > 0 && s.table.Next()-s.savedAt >= uint64(every) {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// startSnapshots starts the background saves of the holding's streams.
func (h *Holding) startSnapshots() {
	t := h.n.Config.Snapshots.or()
	t.Clock = cmp.Or(t.Clock, h.n.clk)
	h.kick = make(chan struct{}, 1)
	h.snapStop, h.snapDone = goStop(func(ctx context.Context) { h.saveLoop(ctx, t) })
}

// stopSnapshots ends the background saves and waits for them.
func (h *Holding) stopSnapshots() {
	h.snapStop()
	<-h.snapDone
}

// saveLoop saves the producer tables, one at a time, until ctx ends:
// each stream's once Every records were applied since its last save
// (applyLocked kicks it), and every Interval each stream that moved.
func (h *Holding) saveLoop(ctx context.Context, t SnapshotTiming) {
	var tick <-chan time.Time
	arm := func() {
		if t.Interval > 0 {
			tick = t.Clock.NewTimer(t.Interval).C()
		}
	}
	arm()
	for {
		least := uint64(max(t.Every, 1))
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
		case <-tick:
			least = 1
			arm()
		}
		h.mu.Lock()
		var due []*streamState
		for _, s := range h.streams {
			if !s.broken && s.table.Next() >= s.savedAt+least {
				due = append(due, s)
			}
		}
		h.mu.Unlock()
		for _, s := range due {
			h.save(ctx, s)
		}
	}
}

// save saves the stream's producer table at the offset it is applied up
// to. A save that fails is only logged: a later one, or the replay of a
// longer tail, makes up for it.
func (h *Holding) save(ctx context.Context, s *streamState) {
	n := h.n
	h.mu.Lock()
	off, saved, table := s.table.Next(), s.savedAt, s.table.Clone()
	h.mu.Unlock()
	if off <= saved {
		return
	}
	err := h.dedup.Save(ctx, s.name, table)
	result := "failed"
	switch {
	case err == nil:
		result = "saved"
		h.mu.Lock()
		s.savedAt = max(s.savedAt, off)
		h.mu.Unlock()
	case errors.Is(err, lease.ErrSnapshotTooBig):
		result = "refused"
		n.log.Warn("producer snapshot too big: a new holder replays a longer tail", "stream", s.name, "err", err)
	case ctx.Err() == nil:
		n.log.Warn("producer snapshot not saved", "stream", s.name, "offset", off, "err", err)
	}
	n.Metrics.snapshots.WithLabelValues(result).Inc()
}

// flush is the star's release flush: before a stream's clean-release
// mark, it saves the stream's producer table at the tenure's end, so that
// the next holder replays nothing. It waits (at most flushWait) for the
// table to apply every acknowledged record; a table stopped by a failed
// append is not saved. It never fails the departure.
func (h *Holding) flush(ctx context.Context, stream string) error {
	h.mu.Lock()
	s := h.streams[stream]
	h.mu.Unlock()
	want, err := h.Star.Next(stream)
	if s == nil || err != nil {
		return nil
	}
	t := h.n.clk.NewTimer(flushWait)
	defer t.Stop()
	for {
		h.mu.Lock()
		next, broken, applied := s.table.Next(), s.broken, s.applied
		h.mu.Unlock()
		switch {
		case broken:
			return nil
		case next >= want:
			h.save(ctx, s)
			return nil
		}
		select {
		case <-applied:
		case <-t.C():
			h.n.log.Warn("producer snapshot: the table did not catch up before the release", "stream", stream, "table", next, "next", want)
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
