package batch

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
)

// DedupOptions bounds a Dedup. The zero value works.
type DedupOptions struct {
	// Producers is how many producers the table keeps, the least
	// recently active expiring first. 0 means DefaultDedupProducers; at
	// most MaxDedupProducers.
	Producers int
	// Window is how many sequences below its highest a producer's
	// retries are recognized at. 0 means DefaultDedupWindow; at most
	// MaxDedupWindow.
	Window uint64
}

// Bounds of DedupOptions.
const (
	DefaultDedupProducers = 1024
	MaxDedupProducers     = 1 << 16
	DefaultDedupWindow    = 128
	MaxDedupWindow        = 1 << 16
	// MaxDedupReceipts bounds Producers × Window, the receipts a table
	// may keep (a few tens of bytes each in memory).
	MaxDedupReceipts = 1 << 22
)

func (o *DedupOptions) validate() error {
	if o.Producers == 0 {
		o.Producers = DefaultDedupProducers
	}
	if o.Window == 0 {
		o.Window = DefaultDedupWindow
	}
	switch {
	case o.Producers < 0 || o.Producers > MaxDedupProducers:
		return &cutline.ConfigError{Field: "Producers", Value: o.Producers, Reason: fmt.Sprintf("must satisfy 0 ≤ Producers ≤ %d (0 means %d)", MaxDedupProducers, DefaultDedupProducers)}
	case o.Window > MaxDedupWindow:
		return &cutline.ConfigError{Field: "Window", Value: o.Window, Reason: fmt.Sprintf("must satisfy 0 ≤ Window ≤ %d (0 means %d)", MaxDedupWindow, DefaultDedupWindow)}
	case uint64(o.Producers)*o.Window > MaxDedupReceipts:
		return &cutline.ConfigError{Field: "Producers", Value: o.Producers, Reason: fmt.Sprintf("at most %d with Window %d: a table keeps at most %d receipts", MaxDedupReceipts/o.Window, o.Window, MaxDedupReceipts)}
	}
	return nil
}

// Receipt is where a record was acknowledged: its offset in its stream
// and the position of its flight.
type Receipt struct {
	Offset   uint64
	Position chain.Position
}

// Verdict is what a Dedup says of a producer's record.
type Verdict int

// Verdicts of Dedup.Lookup.
const (
	// Fresh: not seen; append it.
	Fresh Verdict = iota
	// Duplicate: seen; answer with its first receipt, append nothing.
	Duplicate
	// TooOld: below what the table keeps of its producer, so it may be in
	// the stream already: refuse it, never append it twice.
	TooOld
)

func (v Verdict) String() string {
	switch v {
	case Fresh:
		return "fresh"
	case Duplicate:
		return "duplicate"
	case TooOld:
		return "too old"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Dedup is what a stream's host knows of the stream's idempotent
// producers, each of which numbers its records with a sequence, so that
// a retry is answered with its first receipt instead of being appended
// twice. It is bounded in two ways, as a Kafka broker bounds its producer
// state:
//
//   - per producer, the receipts of its sequences within Window of the
//     highest one it sent: a retry of one of those is a Duplicate. A
//     sequence below the ones the table keeps is TooOld;
//   - at most Producers producers, the least recently active (by the
//     offset of its last record) expiring first. An expired producer is
//     new again: its retries are no longer recognized.
//
// The table applies a stream's records in offset order (Apply, Skip for
// records that cannot be read), so its state after every record below
// Next is a function of those records and of the windows of the hosts
// that applied them: what MarshalBinary saves, and what a replay of the
// stream's tail from it rebuilds. The window travels with the table, as
// each producer's lowest kept sequence: a table loaded with a wider
// window than it was saved with refuses what the narrower one let go of,
// until the producer's sequences move past it; a narrower window lets go
// of the excess at once.
//
// A Dedup is not safe for concurrent use.
type Dedup struct {
	opts   DedupOptions
	next   uint64                   // the first offset not applied
	byName map[string]*list.Element // of *dedupEntry
	lru    *list.List               // least recently active first
}

// dedupEntry is one producer's state: the receipt of each of its records
// whose sequence is from low to hi.
type dedupEntry struct {
	name     string
	last     uint64 // offset of its last record
	hi       uint64 // its highest sequence
	low      uint64 // below it, no sequence is kept: too old to judge
	receipts map[uint64]Receipt
}

// NewDedup returns an empty table, at offset 0. Options out of bounds are
// refused with a *cutline.ConfigError.
func NewDedup(opts DedupOptions) (*Dedup, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Dedup{opts: opts, byName: map[string]*list.Element{}, lru: list.New()}, nil
}

// Next is the offset of the first record not applied.
func (d *Dedup) Next() uint64 { return d.next }

// Len returns how many producers and receipts the table keeps.
func (d *Dedup) Len() (producers, receipts int) {
	for el := d.lru.Front(); el != nil; el = el.Next() {
		receipts += len(el.Value.(*dedupEntry).receipts)
	}
	return d.lru.Len(), receipts
}

// Lookup judges producer's record seq, and gives its first receipt when
// it is a Duplicate.
func (d *Dedup) Lookup(producer string, seq uint64) (Receipt, Verdict) {
	el := d.byName[producer]
	if el == nil {
		return Receipt{}, Fresh
	}
	e := el.Value.(*dedupEntry)
	if r, ok := e.receipts[seq]; ok {
		return r, Duplicate
	}
	if seq < e.low {
		return Receipt{}, TooOld
	}
	return Receipt{}, Fresh
}

// floor is the lowest sequence the window keeps below hi.
func (d *Dedup) floor(hi uint64) uint64 {
	if hi < d.opts.Window {
		return 0
	}
	return hi - d.opts.Window + 1
}

// Apply applies the record at offset Next: producer's record seq ("" for
// a record without a producer, which only moves Next), acknowledged at r.
func (d *Dedup) Apply(producer string, seq uint64, r Receipt) {
	off := d.next
	d.next++
	if producer == "" {
		return
	}
	el := d.byName[producer]
	if el == nil {
		el = d.lru.PushBack(&dedupEntry{name: producer, hi: seq, low: d.floor(seq), receipts: map[uint64]Receipt{}})
		d.byName[producer] = el
	} else {
		d.lru.MoveToBack(el)
	}
	e := el.Value.(*dedupEntry)
	e.last = off
	if seq > e.hi {
		e.hi = seq
		e.raise(d.floor(seq))
	}
	if seq >= e.low {
		e.receipts[seq] = r
	}
	d.expire()
}

// expire lets the least recently active producers go past Producers.
func (d *Dedup) expire() {
	for d.lru.Len() > d.opts.Producers {
		old := d.lru.Remove(d.lru.Front()).(*dedupEntry)
		delete(d.byName, old.name)
	}
}

// raise moves e's low up to low and lets go of the receipts below it: by
// walking the sequences that left when they are fewer than those kept,
// else by a scan.
func (e *dedupEntry) raise(low uint64) {
	if low <= e.low {
		return
	}
	if low-e.low > uint64(len(e.receipts)) {
		for s := range e.receipts {
			if s < low {
				delete(e.receipts, s)
			}
		}
	} else {
		for s := e.low; s < low; s++ {
			delete(e.receipts, s)
		}
	}
	e.low = low
}

// Skip moves Next up to off without applying the records below it:
// records that can no longer be read (retention dropped them before they
// were replayed). What the table keeps of its producers stays; their
// records in the gap are unknown.
func (d *Dedup) Skip(off uint64) { d.next = max(d.next, off) }

// The encoding of a Dedup, version 2:
//
//	4 bytes  magic "cbs2"
//	uvarint  next
//	uvarint  number of producers, then each, least recently active first:
//	  uvarint  length of the name, then the name
//	  uvarint  last, uvarint hi, uvarint hi − low
//	  uvarint  number of receipts, then each, by sequence:
//	    uvarint  hi − seq
//	    varint   offset − last, varint epoch − the previous one's
//	    uvarint  slot
//
// Deltas keep a window of consecutive records to a few bytes each.
// Version 1 ("cbs1") has no low: it is read as the lowest sequence kept,
// which refuses everything the window of the host that saved it may have
// let go of.
const (
	dedupMagic   = "cbs2"
	dedupMagicV1 = "cbs1"
)

// MarshalBinary returns the table's encoding (version 2). It never fails.
func (d *Dedup) MarshalBinary() ([]byte, error) {
	b := append([]byte(nil), dedupMagic...)
	b = binary.AppendUvarint(b, d.next)
	b = binary.AppendUvarint(b, uint64(d.lru.Len()))
	for el := d.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*dedupEntry)
		b = binary.AppendUvarint(b, uint64(len(e.name)))
		b = append(b, e.name...)
		b = binary.AppendUvarint(b, e.last)
		b = binary.AppendUvarint(b, e.hi)
		b = binary.AppendUvarint(b, e.hi-e.low)
		seqs := slices.Sorted(maps.Keys(e.receipts))
		b = binary.AppendUvarint(b, uint64(len(seqs)))
		prevEpoch := uint64(0)
		for _, s := range seqs {
			r := e.receipts[s]
			b = binary.AppendUvarint(b, e.hi-s)
			b = binary.AppendVarint(b, int64(r.Offset-e.last))
			b = binary.AppendVarint(b, int64(r.Position.Epoch-prevEpoch))
			b = binary.AppendUvarint(b, r.Position.Slot)
			prevEpoch = r.Position.Epoch
		}
	}
	return b, nil
}

// dedupReader reads the varints of an encoding; the first failure sticks.
type dedupReader struct {
	b   []byte
	err error
}

func (r *dedupReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &DedupFormatError{Reason: fmt.Sprintf(format, args...)}
	}
}

func (r *dedupReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail("bad %s", field)
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *dedupReader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail("bad %s", field)
		return 0
	}
	r.b = r.b[k:]
	return v
}

// count reads a count of items of at least 4 bytes each: a bad count
// cannot make the decoder allocate more than the input justifies.
func (r *dedupReader) count(what string) uint64 {
	n := r.uvarint(what + " count")
	if r.err == nil && n > uint64(len(r.b))/4 {
		r.fail("%d %s in %d bytes", n, what, len(r.b))
	}
	return n
}

// UnmarshalBinary replaces the table's state with the one data encodes
// (MarshalBinary's, or version 1's), bounded by the table's own options,
// which may differ from the ones it was saved with: tighter bounds let
// the excess go as Apply would have, a wider window does not bring back
// what was let go of. Bytes that are not an encoding are refused with a
// *DedupFormatError (ErrDedupFormat), and the table is left as it was.
func (d *Dedup) UnmarshalBinary(data []byte) error {
	var v1 bool
	switch {
	case bytes.HasPrefix(data, []byte(dedupMagic)):
	case bytes.HasPrefix(data, []byte(dedupMagicV1)):
		v1 = true
	default:
		return &DedupFormatError{Reason: "no magic"}
	}
	r := &dedupReader{b: data[len(dedupMagic):]}
	t := &Dedup{opts: d.opts, byName: map[string]*list.Element{}, lru: list.New()}
	t.next = r.uvarint("next")
	n := r.count("producers")
	for i := uint64(0); i < n && r.err == nil; i++ {
		l := r.uvarint("name length")
		if r.err == nil && (l == 0 || l > uint64(len(r.b))) {
			r.fail("bad name length %d", l)
		}
		if r.err != nil {
			break
		}
		e := &dedupEntry{name: string(r.b[:l]), receipts: map[uint64]Receipt{}}
		r.b = r.b[l:]
		e.last, e.hi = r.uvarint("last offset"), r.uvarint("highest sequence")
		if !v1 {
			if dl := r.uvarint("lowest sequence"); dl <= e.hi {
				e.low = e.hi - dl
			} else {
				r.fail("lowest sequence below 0")
			}
		}
		m := r.count("receipts")
		switch {
		case r.err != nil:
		case t.byName[e.name] != nil:
			r.fail("producer %q twice", e.name)
		case e.last >= t.next:
			r.fail("producer %q last at %d, the table holds offsets below %d", e.name, e.last, t.next)
		case t.lru.Len() > 0 && t.lru.Back().Value.(*dedupEntry).last >= e.last:
			r.fail("producers out of order")
		case v1 && m == 0:
			r.fail("producer %q without its highest sequence", e.name)
		}
		epoch := uint64(0)
		for j := uint64(0); j < m && r.err == nil; j++ {
			ds, do, de, slot := r.uvarint("sequence"), r.varint("offset"), r.varint("epoch"), r.uvarint("slot")
			if r.err != nil {
				break
			}
			if ds > e.hi {
				r.fail("sequence below 0")
				break
			}
			seq := e.hi - ds
			if v1 && j == 0 {
				e.low = seq // the lowest: they come by sequence
			}
			epoch += uint64(de)
			rc := Receipt{Offset: e.last + uint64(do), Position: chain.Position{Epoch: epoch, Slot: slot}}
			switch {
			case seq < e.low:
				r.fail("sequence %d of %q below its lowest, %d", seq, e.name, e.low)
			case rc.Offset > e.last:
				r.fail("a receipt past the producer's last record")
			}
			e.receipts[seq] = rc
		}
		e.raise(t.floor(e.hi))
		t.byName[e.name] = t.lru.PushBack(e)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the table", len(r.b))
	}
	if r.err != nil {
		return r.err
	}
	t.expire()
	*d = *t
	return nil
}

// Clone returns a copy of the table that shares nothing with it.
func (d *Dedup) Clone() *Dedup {
	c := &Dedup{opts: d.opts, next: d.next, byName: make(map[string]*list.Element, len(d.byName)), lru: list.New()}
	for el := d.lru.Front(); el != nil; el = el.Next() {
		e := *el.Value.(*dedupEntry)
		e.receipts = maps.Clone(e.receipts)
		c.byName[e.name] = c.lru.PushBack(&e)
	}
	return c
}
