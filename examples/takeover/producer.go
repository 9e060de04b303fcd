package main

import (
	"context"
	"fmt"
)

// producer sends records numbered by its own sequence and remembers what
// was acknowledged, at which offset. It retries whatever was not
// acknowledged; the broker's deduplication makes that safe.
type producer struct {
	id    string
	acked map[uint64]uint64 // sequence → acknowledged offset
}

func newProducer(id string) *producer {
	return &producer{id: id, acked: make(map[uint64]uint64)}
}

// data is the content of record seq.
func (p *producer) data(seq uint64) []byte {
	return fmt.Appendf(nil, "order %d: %d units of item %d", seq, 1+seq%7, seq*37%101)
}

type sent struct {
	seq uint64
	ack *ack
}

// submit sends the records seqs to b, pipelined: it does not wait for
// acknowledgements. It stops at the first refusal and returns the
// sequences it could not send.
func (p *producer) submit(ctx context.Context, b *broker, seqs []uint64) ([]sent, []uint64) {
	out := make([]sent, 0, len(seqs))
	for i, seq := range seqs {
		a, err := b.Produce(ctx, p.id, seq, p.data(seq))
		if err != nil {
			return out, seqs[i:]
		}
		out = append(out, sent{seq, a})
	}
	return out, nil
}

// outcome sums up the acknowledgements of a batch.
type outcome struct {
	acked, dups         int
	firstOff, lastOff   uint64 // offsets of the records appended (not dups)
	dupFirst, dupLast   uint64 // offsets of the deduplicated ones
	failed              []uint64
	haveOffs, haveDupOf bool
}

// merge adds the outcome of a later batch to o.
func (o *outcome) merge(b outcome) {
	o.acked += b.acked
	o.failed = append(o.failed, b.failed...)
	switch {
	case b.haveOffs && !o.haveOffs:
		o.firstOff, o.lastOff, o.haveOffs = b.firstOff, b.lastOff, true
	case b.haveOffs:
		o.firstOff, o.lastOff = min(o.firstOff, b.firstOff), max(o.lastOff, b.lastOff)
	}
	o.dups += b.dups
	switch {
	case b.haveDupOf && !o.haveDupOf:
		o.dupFirst, o.dupLast, o.haveDupOf = b.dupFirst, b.dupLast, true
	case b.haveDupOf:
		o.dupFirst, o.dupLast = min(o.dupFirst, b.dupFirst), max(o.dupLast, b.dupLast)
	}
}

// collect waits for every acknowledgement of sent; refused are sequences
// that were never sent.
func (p *producer) collect(ctx context.Context, sent []sent, refused []uint64) (outcome, error) {
	var o outcome
	for _, s := range sent {
		select {
		case <-s.ack.done:
		case <-ctx.Done():
			return o, ctx.Err()
		}
		if s.ack.err != nil {
			o.failed = append(o.failed, s.seq)
			continue
		}
		if prev, ok := p.acked[s.seq]; ok && prev != s.ack.offset {
			return o, fmt.Errorf("sequence %d acknowledged at offset %d and at offset %d", s.seq, prev, s.ack.offset)
		}
		p.acked[s.seq] = s.ack.offset
		o.acked++
		switch {
		case s.ack.dup && !o.haveDupOf:
			o.dups, o.dupFirst, o.dupLast, o.haveDupOf = 1, s.ack.offset, s.ack.offset, true
		case s.ack.dup:
			o.dups++
			o.dupFirst, o.dupLast = min(o.dupFirst, s.ack.offset), max(o.dupLast, s.ack.offset)
		case !o.haveOffs:
			o.firstOff, o.lastOff, o.haveOffs = s.ack.offset, s.ack.offset, true
		default:
			o.firstOff, o.lastOff = min(o.firstOff, s.ack.offset), max(o.lastOff, s.ack.offset)
		}
	}
	o.failed = append(o.failed, refused...)
	return o, nil
}

// seqRange returns [from, to).
func seqRange(from, to uint64) []uint64 {
	out := make([]uint64, 0, to-from)
	for s := from; s < to; s++ {
		out = append(out, s)
	}
	return out
}
