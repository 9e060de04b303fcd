package node

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/settle"
)

// SnapshotTiming says when a holder saves a stream's producer snapshot:
// once Every records were applied since the last one, and every Interval
// (on the node's clock) when any was. 0 means the default; a negative
// value turns that trigger off. Every departure saves one too, in its
// release flush.
type SnapshotTiming struct {
	Every    int
	Interval time.Duration
	// Clock times Interval; nil means the node's.
	Clock clock.Clock
}

// Defaults of the snapshot timing.
const (
	defaultSnapshotEvery  = 1000
	defaultSnapshotPeriod = 30 * time.Second
	// flushWait bounds how long a departure's flush waits for the
	// table to catch up with what was acknowledged.
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

// RebuildInfo is how a holder rebuilt a stream's producer table when it
// opened it: from a snapshot at offset Snapshot (0: from the start),
// replaying Replayed records up to Next.
type RebuildInfo struct {
	Stream      string
	HadSnapshot bool
	Snapshot    uint64
	Replayed    uint64
	Next        uint64
}

// LastRebuild returns how the node last rebuilt stream's producers.
func (n *Node) LastRebuild(stream string) (RebuildInfo, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rb, ok := n.rebuilds[stream]
	return rb, ok
}

// rebuild loads the stream's producer snapshot and replays the records
// from its offset up to next, the tenure's first offset. A snapshot that
// does not load or decode is set aside: the whole stream is replayed.
func (h *Holding) rebuild(ctx context.Context, name string, next uint64) (*batch.Dedup, RebuildInfo, error) {
	n := h.n
	rb := RebuildInfo{Stream: name, Next: next}
	table, err := batch.NewDedup(n.Config.Producers)
	if err != nil {
		return nil, rb, err
	}
	sn, err := h.Star.LoadSnapshot(ctx, name)
	switch {
	case errors.Is(err, lease.ErrBadSnapshot):
		n.log.Warn("ignoring a producer snapshot that does not load; replaying the whole stream", "stream", name, "err", err)
	case err != nil:
		return nil, rb, err
	case sn.Revision != 0:
		t, _ := batch.NewDedup(n.Config.Producers)
		err := t.UnmarshalBinary(sn.Data)
		switch {
		case err != nil:
			n.log.Warn("ignoring a producer snapshot that does not decode; replaying the whole stream", "stream", name, "err", err)
		case t.Next() != sn.Offset || t.Next() > next:
			n.log.Warn("ignoring a producer snapshot at the wrong offset; replaying the whole stream", "stream", name,
				"snapshot", sn.Offset, "table", t.Next(), "next", next)
		default:
			table, rb.HadSnapshot, rb.Snapshot = t, true, t.Next()
		}
	}
	if err := n.replay(ctx, name, table, next); err != nil {
		return nil, rb, err
	}
	rb.Replayed = next - rb.Snapshot
	n.Metrics.replayed.Add(float64(rb.Replayed))
	n.mu.Lock()
	n.rebuilds[name] = rb
	n.mu.Unlock()
	return table, rb, nil
}

// replayTable is what replay applies records to: a *batch.Dedup.
type replayTable interface {
	Next() uint64
	Apply(producer string, seq uint64, r batch.Receipt)
	Skip(off uint64)
}

// replay reads the stream's records from table.Next() up to next through
// the RefIndex, readAhead at a time, and applies them in offset order.
// Records below the stream's retention point are gone: the table skips
// them, and their producers' retries are no longer recognized (a
// snapshot saved past the retention point keeps them).
func (n *Node) replay(ctx context.Context, stream string, table replayTable, next uint64) error {
	type rec struct {
		producer string
		seq      uint64
		r        batch.Receipt
	}
	for table.Next() < next {
		from := table.Next()
		recs := make([]rec, min(next-from, replayChunk))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(readAhead)
		for i := range recs {
			off := from + uint64(i)
			g.Go(func() error {
				r, ref, err := n.readRecord(gctx, stream, off)
				if err != nil {
					return err
				}
				recs[i] = rec{producer: r.Producer, seq: r.Seq, r: batch.Receipt{Offset: off, Position: ref.Position()}}
				return nil
			})
		}
		err := g.Wait()
		if te, ok := errors.AsType[*settle.TrimmedError](err); ok && te.Start > table.Next() {
			n.log.Warn("records below the retention point cannot be replayed: their producers' retries are no longer recognized",
				"stream", stream, "from", table.Next(), "start", te.Start)
			table.Skip(min(te.Start, next))
			continue
		}
		if err != nil {
			return err
		}
		for _, r := range recs {
			table.Apply(r.producer, r.seq, r.r)
		}
		n.replayReads.Add(uint64(len(recs)))
	}
	return nil
}

// applyLocked applies the acknowledged records that continue the table,
// and starts a snapshot once enough were applied since the last one.
func (h *Holding) applyLocked(s *streamState) {
	moved := false
	for {
		r, ok := s.acked[s.table.Next()]
		if !ok {
			break
		}
		delete(s.acked, s.table.Next())
		s.table.Apply(r.key.producer, r.key.seq, r.r)
		if r.key.producer != "" {
			delete(s.inflight, r.key)
		}
		moved = true
	}
	if !moved {
		return
	}
	close(s.applied)
	s.applied = make(chan struct{})
	every := h.n.Config.Snapshots.or().Every
	if every > 0 && s.table.Next()-s.savedAt >= uint64(every) && !s.saving && !h.stopped {
		s.saving = true
		h.snaps.Go(func() { h.saveBackground(s) })
	}
}

// startSnapshots starts the timed saves of the holding's streams.
func (h *Holding) startSnapshots() {
	h.snapCtx, h.snapStop = context.WithCancel(context.Background())
	timing := h.n.Config.Snapshots.or()
	if timing.Interval < 0 {
		return
	}
	clk := timing.Clock
	if clk == nil {
		clk = h.n.clk
	}
	h.snaps.Go(func() {
		for clock.Sleep(h.snapCtx, clk, timing.Interval) == nil {
			h.mu.Lock()
			var due []*streamState
			for _, s := range h.streams {
				if !s.saving && !s.broken && s.table.Next() > s.savedAt {
					s.saving = true
					due = append(due, s)
				}
			}
			h.mu.Unlock()
			for _, s := range due {
				h.saveBackground(s)
			}
		}
	})
}

// stopSnapshots ends the background saves and waits for them.
func (h *Holding) stopSnapshots() {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.snapStop()
	h.snaps.Wait()
}

// saveBackground saves s's snapshot, then lets the next one start.
func (h *Holding) saveBackground(s *streamState) {
	h.save(h.snapCtx, s, true)
	h.mu.Lock()
	s.saving = false
	h.mu.Unlock()
}

// save saves the stream's producer table at the offset it is applied up
// to, first covering what was acknowledged (a snapshot may claim covered
// records only). A save that fails is only logged: a later one, or the
// replay of a longer tail, makes up for it.
func (h *Holding) save(ctx context.Context, s *streamState, absorb bool) {
	n := h.n
	h.mu.Lock()
	off, saved := s.table.Next(), s.savedAt
	data, _ := s.table.MarshalBinary()
	h.mu.Unlock()
	if off <= saved {
		return
	}
	if absorb {
		if err := h.Star.Absorb(ctx); err != nil {
			n.Metrics.snapshots.WithLabelValues("failed").Inc()
			n.log.Warn("producer snapshot: absorb", "stream", s.name, "err", err)
			return
		}
	}
	err := h.Star.SaveSnapshot(ctx, s.name, off, data)
	switch {
	case err == nil:
		n.Metrics.snapshots.WithLabelValues("saved").Inc()
		h.mu.Lock()
		s.savedAt = max(s.savedAt, off)
		h.mu.Unlock()
		n.log.Debug("producer snapshot saved", "stream", s.name, "offset", off, "bytes", len(data))
	case errors.Is(err, lease.ErrSnapshotBackwards):
		// A concurrent save got further.
	case errors.Is(err, lease.ErrSnapshotTooBig):
		n.Metrics.snapshots.WithLabelValues("refused").Inc()
		n.log.Warn("producer snapshot too big: a new holder replays a longer tail", "stream", s.name, "err", err)
	default:
		n.Metrics.snapshots.WithLabelValues("failed").Inc()
		if ctx.Err() == nil {
			n.log.Warn("producer snapshot not saved", "stream", s.name, "offset", off, "err", err)
		}
	}
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
	if s == nil {
		return nil
	}
	want, err := h.Star.Next(stream)
	if err != nil {
		return nil
	}
	t := h.n.clk.NewTimer(flushWait)
	defer t.Stop()
	for {
		h.mu.Lock()
		next, broken, ch := s.table.Next(), s.broken, s.applied
		h.mu.Unlock()
		if broken {
			return nil
		}
		if next >= want {
			break
		}
		select {
		case <-ch:
		case <-t.C():
			h.n.log.Warn("producer snapshot: the table did not catch up before the release", "stream", stream, "table", next, "next", want)
			return nil
		case <-ctx.Done():
			return nil
		}
	}
	h.save(ctx, s, false)
	return nil
}
