package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

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
// does not load, decode or fit is set aside: the whole stream is
// replayed.
func (h *Holding) rebuild(ctx context.Context, name string, next uint64) (*batch.Dedup, RebuildInfo, error) {
	n := h.n
	table, _ := batch.NewDedup(n.Config.Producers) // NewNode checked the options
	sn, err := h.Star.LoadSnapshot(ctx, name)
	if err != nil && !errors.Is(err, lease.ErrBadSnapshot) {
		return nil, RebuildInfo{}, err
	}
	if err == nil && sn.Revision != 0 {
		if err = table.UnmarshalBinary(sn.Data); err == nil && (table.Next() != sn.Offset || sn.Offset > next) {
			err = fmt.Errorf("the snapshot at %d holds a table at %d; the tenure starts at %d", sn.Offset, table.Next(), next)
		}
	}
	if err != nil {
		n.log.Warn("ignoring a producer snapshot; replaying the whole stream", "stream", name, "err", err)
		table, _ = batch.NewDedup(n.Config.Producers)
	}
	rb := RebuildInfo{Stream: name, HadSnapshot: table.Next() > 0, Snapshot: table.Next(), Replayed: next - table.Next(), Next: next}
	if err := n.replay(ctx, name, table, next); err != nil {
		return nil, rb, err
	}
	n.Metrics.replayed.Add(float64(rb.Replayed))
	n.mu.Lock()
	n.rebuilds[name] = rb
	n.mu.Unlock()
	return table, rb, nil
}

// replay reads the stream's records from table.Next() up to next,
// readAhead at a time, and applies them in offset order. Records below
// the stream's retention point are gone: the table skips them, and their
// producers' retries are no longer recognized (a snapshot saved past the
// retention point keeps them).
func (n *Node) replay(ctx context.Context, stream string, table *batch.Dedup, next uint64) error {
	for from := table.Next(); from < next; from = table.Next() {
		recs := make([]Record, min(next-from, replayChunk))
		refs := make([]settle.Ref, len(recs))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(readAhead)
		for i := range recs {
			g.Go(func() (err error) {
				recs[i], refs[i], err = n.readRecord(gctx, stream, from+uint64(i))
				return err
			})
		}
		err := g.Wait()
		if te, ok := errors.AsType[*settle.TrimmedError](err); ok && te.Start > from {
			n.log.Warn("records below the retention point cannot be replayed: their producers' retries are no longer recognized",
				"stream", stream, "from", from, "start", te.Start)
			table.Skip(min(te.Start, next))
			continue
		} else if err != nil {
			return err
		}
		for i, r := range recs {
			table.Apply(r.Producer, r.Seq, batch.Receipt{Offset: r.Offset, Position: refs[i].Position()})
		}
		n.replayReads.Add(uint64(len(recs)))
	}
	return nil
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
			h.save(ctx, s, true)
		}
	}
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
	var err error
	if absorb {
		err = h.Star.Absorb(ctx)
	}
	if err == nil {
		err = h.Star.SaveSnapshot(ctx, s.name, off, data)
	}
	result := "failed"
	switch {
	case err == nil:
		result = "saved"
		h.mu.Lock()
		s.savedAt = max(s.savedAt, off)
		h.mu.Unlock()
	case errors.Is(err, lease.ErrSnapshotBackwards):
		return // a concurrent save got further
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
			h.save(ctx, s, false)
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
