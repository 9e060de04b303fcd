package node

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// producerTable is what a holder knows of a stream's idempotent
// producers, bounded in two ways, as a Kafka broker bounds its producer
// state:
//
//   - per producer, the acknowledgements of its sequences within window of
//     the highest one it sent (hi): a retry of one of those is answered
//     with its first acknowledgement. A sequence below the ones the table
//     keeps (low) is too old to judge and is refused (never appended
//     twice);
//   - at most max producers, the least recently active (by the offset of
//     its last record) expiring first. An expired producer is new again:
//     like a Kafka producer id that expired, its retries are no longer
//     recognized.
//
// Its state after every record below next is a function of those
// records, in offset order, and of the windows of the holders that
// applied them: what a snapshot holds (lease.SaveSnapshot), and what a
// replay of the stream's tail from a snapshot rebuilds. The window
// travels with the table, as each producer's low: a table loaded with a
// wider window than it was saved with refuses what the narrower one let
// go of, until the producer's sequences move past it; a narrower window
// lets go of the excess at once.
type producerTable struct {
	max    int
	window uint64
	next   uint64                   // the first offset not applied
	byName map[string]*list.Element // of *producerEntry
	lru    *list.List               // least recently active first
}

// producerEntry is one producer's state: the acknowledgement of each of
// its records whose sequence is from low to hi.
type producerEntry struct {
	name string
	last uint64 // offset of its last record
	hi   uint64 // its highest sequence
	low  uint64 // below it, no sequence is kept: too old to judge
	acks map[uint64]Ack
}

func newProducerTable(max int, window uint64) *producerTable {
	return &producerTable{max: max, window: window, byName: map[string]*list.Element{}, lru: list.New()}
}

// verdict is what the table says of a produce.
type verdict int

const (
	fresh     verdict = iota // not seen: append it
	duplicate                // seen: answer with its acknowledgement
	tooOld                   // below what the table keeps of the producer: refuse
)

// lookup judges producer's record seq.
func (pt *producerTable) lookup(producer string, seq uint64) (Ack, verdict) {
	el := pt.byName[producer]
	if el == nil {
		return Ack{}, fresh
	}
	e := el.Value.(*producerEntry)
	if a, ok := e.acks[seq]; ok {
		return a, duplicate
	}
	if seq < e.low {
		return Ack{}, tooOld
	}
	return Ack{}, fresh
}

// floor is the lowest sequence a window keeps below hi.
func (pt *producerTable) floor(hi uint64) uint64 {
	if hi < pt.window {
		return 0
	}
	return hi - pt.window + 1
}

// apply applies the record at offset next: producer's record seq ("" for
// a record without a producer), acknowledged at a.
func (pt *producerTable) apply(producer string, seq uint64, a Ack) {
	off := pt.next
	pt.next++
	if producer == "" {
		return
	}
	el := pt.byName[producer]
	if el == nil {
		el = pt.lru.PushBack(&producerEntry{name: producer, hi: seq, low: pt.floor(seq), acks: map[uint64]Ack{}})
		pt.byName[producer] = el
	} else {
		pt.lru.MoveToBack(el)
	}
	e := el.Value.(*producerEntry)
	e.last = off
	a.Duplicate = false
	if seq > e.hi {
		e.hi = seq
		pt.raise(e, pt.floor(seq))
	}
	if seq >= e.low {
		e.acks[seq] = a
	}
	for pt.lru.Len() > pt.max {
		old := pt.lru.Remove(pt.lru.Front()).(*producerEntry)
		delete(pt.byName, old.name)
	}
}

// raise moves e's low up to low and lets go of the acknowledgements below
// it: by walking the sequences that left when they are fewer than those
// kept, else by a scan.
func (pt *producerTable) raise(e *producerEntry, low uint64) {
	if low <= e.low {
		return
	}
	if low-e.low > uint64(len(e.acks)) {
		for s := range e.acks {
			if s < low {
				delete(e.acks, s)
			}
		}
	} else {
		for s := e.low; s < low; s++ {
			delete(e.acks, s)
		}
	}
	e.low = low
}

// skip moves next up to off without applying the records below it:
// records retention dropped before they could be replayed. What the table
// keeps of its producers stays; their records in the gap are unknown.
func (pt *producerTable) skip(off uint64) {
	pt.next = max(pt.next, off)
}

// len returns how many producers and acknowledgements the table keeps.
func (pt *producerTable) len() (producers, acks int) {
	for el := pt.lru.Front(); el != nil; el = el.Next() {
		acks += len(el.Value.(*producerEntry).acks)
	}
	return pt.lru.Len(), acks
}

// The snapshot encoding of a producerTable, version 2:
//
//	4 bytes  magic "cbs2"
//	uvarint  next
//	uvarint  number of producers, then each, least recently active first:
//	  uvarint  length of the name, then the name
//	  uvarint  last, uvarint hi, uvarint hi − low
//	  uvarint  number of acknowledgements, then each, by sequence:
//	    uvarint  hi − seq
//	    varint   offset − last, varint epoch − the previous one's
//	    uvarint  slot
//
// Deltas keep a window of consecutive records to a few bytes each.
// Version 1 ("cbs1", what earlier brokers saved) has no low: it is read as
// the lowest sequence kept, which refuses everything the window of the
// broker that saved it may have let go of.
const (
	snapMagic   = "cbs2"
	snapMagicV1 = "cbs1"
)

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
		b = binary.AppendUvarint(b, e.hi-e.low)
		seqs := slices.Sorted(maps.Keys(e.acks))
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

// decodeProducerTable parses snapshot bytes made by encode (or by
// version 1's) into a table bounded by max and window, which may differ
// from the ones it was saved with: a tighter bound lets the excess go as
// it would have, a wider window does not bring back what was let go of
// (each producer's low stays).
func decodeProducerTable(data []byte, max int, window uint64) (*producerTable, error) {
	var v1 bool
	switch {
	case bytes.HasPrefix(data, []byte(snapMagic)):
	case bytes.HasPrefix(data, []byte(snapMagicV1)):
		v1 = true
	default:
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
		e := &producerEntry{name: string(b[:l]), acks: map[uint64]Ack{}}
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
		if !v1 {
			d, err := uv("lowest sequence")
			if err != nil {
				return nil, err
			}
			if d > e.hi {
				return nil, fmt.Errorf("%w: lowest sequence below 0", errBadSnapshot)
			}
			e.low = e.hi - d
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
		if v1 && m == 0 {
			return nil, fmt.Errorf("%w: producer %q without its highest sequence", errBadSnapshot, e.name)
		}
		epoch := uint64(0)
		for i := range m {
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
			seq := e.hi - d
			if v1 && i == 0 {
				e.low = seq // the lowest: they come by sequence
			}
			if seq < e.low {
				return nil, fmt.Errorf("%w: sequence %d of %q below its lowest, %d", errBadSnapshot, seq, e.name, e.low)
			}
			epoch += uint64(de)
			a := Ack{Offset: e.last + uint64(do), Epoch: epoch, Slot: slot}
			if a.Offset > e.last {
				return nil, fmt.Errorf("%w: an acknowledgement past the producer's last record", errBadSnapshot)
			}
			e.acks[seq] = a
		}
		pt.raise(e, pt.floor(e.hi))
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
