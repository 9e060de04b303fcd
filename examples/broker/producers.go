package main

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// producerTable is what a holder knows of a stream's idempotent
// producers, bounded in two ways, as a Kafka broker bounds its producer
// state:
//
//   - per producer, the acknowledgements of its sequences within window of
//     the highest one it sent (hi): a retry of one of those is answered
//     with its first acknowledgement. A sequence at or below hi − window
//     that is not kept is too old to judge and is refused (never appended
//     twice);
//   - at most max producers, the least recently active (by the offset of
//     its last record) expiring first. An expired producer is new again:
//     like a Kafka producer id that expired, its retries are no longer
//     recognized.
//
// Its state after every record below next is a pure function of those
// records, in offset order: what a snapshot holds (lease.SaveSnapshot),
// and what a replay of the stream's tail from a snapshot rebuilds.
type producerTable struct {
	max    int
	window uint64
	next   uint64                   // the first offset not applied
	byName map[string]*list.Element // of *producerEntry
	lru    *list.List               // least recently active first
}

// producerEntry is one producer's state.
type producerEntry struct {
	name string
	last uint64 // offset of its last record
	hi   uint64 // its highest sequence
	acks map[uint64]ack
}

func newProducerTable(max int, window uint64) *producerTable {
	return &producerTable{max: max, window: window, byName: map[string]*list.Element{}, lru: list.New()}
}

// verdict is what the table says of a produce.
type verdict int

const (
	fresh     verdict = iota // not seen: append it
	duplicate                // seen: answer with its acknowledgement
	tooOld                   // below the producer's window and not kept: refuse
)

// lookup judges producer's record seq.
func (pt *producerTable) lookup(producer string, seq uint64) (ack, verdict) {
	el := pt.byName[producer]
	if el == nil {
		return ack{}, fresh
	}
	e := el.Value.(*producerEntry)
	if a, ok := e.acks[seq]; ok {
		return a, duplicate
	}
	if seq < e.hi && e.hi-seq >= pt.window {
		return ack{}, tooOld
	}
	return ack{}, fresh
}

// apply applies the record at offset next: producer's record seq ("" for
// a record without a producer), acknowledged at a.
func (pt *producerTable) apply(producer string, seq uint64, a ack) {
	off := pt.next
	pt.next++
	if producer == "" {
		return
	}
	el := pt.byName[producer]
	if el == nil {
		el = pt.lru.PushBack(&producerEntry{name: producer, hi: seq, acks: map[uint64]ack{}})
		pt.byName[producer] = el
	} else {
		pt.lru.MoveToBack(el)
	}
	e := el.Value.(*producerEntry)
	e.last = off
	a.Duplicate = false
	if seq > e.hi {
		pt.raise(e, seq)
	}
	if e.hi-seq < pt.window {
		e.acks[seq] = a
	}
	for pt.lru.Len() > pt.max {
		old := pt.lru.Remove(pt.lru.Front()).(*producerEntry)
		delete(pt.byName, old.name)
	}
}

// raise moves e's highest sequence up to hi and lets go of the
// acknowledgements that fall out of its window: by walking the sequences
// that left it when they are fewer than those kept, else by a scan.
func (pt *producerTable) raise(e *producerEntry, hi uint64) {
	old := e.hi
	e.hi = hi
	if hi < pt.window {
		return
	}
	if hi-old > uint64(len(e.acks)) {
		for s := range e.acks {
			if hi-s >= pt.window {
				delete(e.acks, s)
			}
		}
		return
	}
	lo := uint64(0)
	if old+1 > pt.window {
		lo = old + 1 - pt.window
	}
	for s := lo; s <= hi-pt.window; s++ {
		delete(e.acks, s)
	}
}

// len returns how many producers and acknowledgements the table keeps.
func (pt *producerTable) len() (producers, acks int) {
	for el := pt.lru.Front(); el != nil; el = el.Next() {
		acks += len(el.Value.(*producerEntry).acks)
	}
	return pt.lru.Len(), acks
}

// The snapshot encoding of a producerTable, version 1:
//
//	4 bytes  magic "cbs1"
//	uvarint  next
//	uvarint  number of producers, then each, least recently active first:
//	  uvarint  length of the name, then the name
//	  uvarint  last, uvarint hi
//	  uvarint  number of acknowledgements, then each, by sequence:
//	    uvarint  hi − seq
//	    varint   offset − last, varint epoch − the previous one's
//	    uvarint  slot
//
// Deltas keep a window of consecutive records to a few bytes each.
const snapMagic = "cbs1"

// errBadSnapshot is snapshot bytes that are not a table of this format.
var errBadSnapshot = errors.New("broker: malformed producer snapshot")

// encode returns the table's snapshot bytes.
func (pt *producerTable) encode() []byte {
	b := append([]byte(nil), snapMagic...)
	b = binary.AppendUvarint(b, pt.next)
	b = binary.AppendUvarint(b, uint64(pt.lru.Len()))
	for el := pt.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*producerEntry)
		b = binary.AppendUvarint(b, uint64(len(e.name)))
		b = append(b, e.name...)
		b = binary.AppendUvarint(b, e.last)
		b = binary.AppendUvarint(b, e.hi)
		seqs := make([]uint64, 0, len(e.acks))
		for s := range e.acks {
			seqs = append(seqs, s)
		}
		slices.Sort(seqs)
		b = binary.AppendUvarint(b, uint64(len(seqs)))
		prevEpoch := uint64(0)
		for _, s := range seqs {
			a := e.acks[s]
			b = binary.AppendUvarint(b, e.hi-s)
			b = binary.AppendVarint(b, int64(a.Offset-e.last))
			b = binary.AppendVarint(b, int64(a.Epoch-prevEpoch))
			b = binary.AppendUvarint(b, a.Slot)
			prevEpoch = a.Epoch
		}
	}
	return b
}

// decodeProducerTable parses snapshot bytes made by encode into a table
// bounded by max and window (which may be tighter than the ones it was
// saved with: the excess goes as it would have).
func decodeProducerTable(data []byte, max int, window uint64) (*producerTable, error) {
	if !bytes.HasPrefix(data, []byte(snapMagic)) {
		return nil, fmt.Errorf("%w: no magic", errBadSnapshot)
	}
	b := data[len(snapMagic):]
	uv := func(field string) (uint64, error) {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, fmt.Errorf("%w: bad %s", errBadSnapshot, field)
		}
		b = b[k:]
		return v, nil
	}
	sv := func(field string) (int64, error) {
		v, k := binary.Varint(b)
		if k <= 0 {
			return 0, fmt.Errorf("%w: bad %s", errBadSnapshot, field)
		}
		b = b[k:]
		return v, nil
	}
	pt := newProducerTable(max, window)
	var err error
	if pt.next, err = uv("next"); err != nil {
		return nil, err
	}
	n, err := uv("producer count")
	if err != nil {
		return nil, err
	}
	// Every producer takes at least 4 bytes: a bad count cannot make the
	// decoder allocate more than the input justifies.
	if n > uint64(len(b))/4 {
		return nil, fmt.Errorf("%w: %d producers in %d bytes", errBadSnapshot, n, len(b))
	}
	for range n {
		l, err := uv("name length")
		if err != nil {
			return nil, err
		}
		if l == 0 || l > uint64(len(b)) {
			return nil, fmt.Errorf("%w: bad name length %d", errBadSnapshot, l)
		}
		e := &producerEntry{name: string(b[:l]), acks: map[uint64]ack{}}
		b = b[l:]
		if pt.byName[e.name] != nil {
			return nil, fmt.Errorf("%w: producer %q twice", errBadSnapshot, e.name)
		}
		if e.last, err = uv("last offset"); err != nil {
			return nil, err
		}
		if e.hi, err = uv("highest sequence"); err != nil {
			return nil, err
		}
		if e.last >= pt.next {
			return nil, fmt.Errorf("%w: producer %q last at %d, the table holds offsets below %d", errBadSnapshot, e.name, e.last, pt.next)
		}
		if prev := pt.lru.Back(); prev != nil && prev.Value.(*producerEntry).last >= e.last {
			return nil, fmt.Errorf("%w: producers out of order", errBadSnapshot)
		}
		m, err := uv("acknowledgement count")
		if err != nil {
			return nil, err
		}
		if m > uint64(len(b))/4 {
			return nil, fmt.Errorf("%w: %d acknowledgements in %d bytes", errBadSnapshot, m, len(b))
		}
		epoch := uint64(0)
		for range m {
			d, err := uv("sequence")
			if err != nil {
				return nil, err
			}
			do, err := sv("offset")
			if err != nil {
				return nil, err
			}
			de, err := sv("epoch")
			if err != nil {
				return nil, err
			}
			slot, err := uv("slot")
			if err != nil {
				return nil, err
			}
			if d > e.hi {
				return nil, fmt.Errorf("%w: sequence below 0", errBadSnapshot)
			}
			epoch += uint64(de)
			a := ack{Offset: e.last + uint64(do), Epoch: epoch, Slot: slot}
			if a.Offset > e.last {
				return nil, fmt.Errorf("%w: an acknowledgement past the producer's last record", errBadSnapshot)
			}
			if d < window {
				e.acks[e.hi-d] = a
			}
		}
		pt.byName[e.name] = pt.lru.PushBack(e)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the table", errBadSnapshot, len(b))
	}
	for pt.lru.Len() > pt.max {
		old := pt.lru.Remove(pt.lru.Front()).(*producerEntry)
		delete(pt.byName, old.name)
	}
	return pt, nil
}
