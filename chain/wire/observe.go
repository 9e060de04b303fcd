package wire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/objstore"
)

// SlotState is what one bucket holds at one slot.
type SlotState int

const (
	// SlotEmpty: the bucket answered that no object exists at the slot.
	SlotEmpty SlotState = iota
	// SlotFlight: a well-formed flight for exactly this slot.
	SlotFlight
	// SlotPoison: well-formed poison for exactly this slot.
	SlotPoison
	// SlotUnreachable: the bucket did not answer; the state is unknown.
	SlotUnreachable
	// SlotForeign: an object that is neither a valid flight nor poison for this
	// slot (corrupt, misplaced, or of an unknown format). It is never
	// overwritten, never copied, and counts as neither.
	SlotForeign
)

func (s SlotState) String() string {
	switch s {
	case SlotEmpty:
		return "empty"
	case SlotFlight:
		return "flight"
	case SlotPoison:
		return "poison"
	case SlotUnreachable:
		return "unreachable"
	case SlotForeign:
		return "foreign"
	}
	return fmt.Sprintf("SlotState(%d)", int(s))
}

// Observation is one bucket's answer for one slot.
type Observation struct {
	State SlotState
	// Header is set for SlotFlight and SlotPoison.
	Header Header
	// Data is the whole object when it was read whole (ObserveObject) and
	// the state is SlotFlight or SlotPoison.
	Data []byte
	// Digest is the SHA-256 of the whole object when it was read whole and
	// verified: two copies are the same flight only when their digests are
	// equal. It is zero for a header probe (ObserveHeader), which cannot
	// tell a copy with a corrupt body from an intact one.
	Digest [sha256.Size]byte
	// Whole reports that the object was read whole and its checksum
	// verified (ObserveObject).
	Whole bool
	// Err is the cause for Unreachable (an objstore error) and Foreign (an
	// *ObjectError naming the bucket and key).
	Err error
}

// Addr names one slot of one epoch of one star: where its object lies in
// every bucket.
type Addr struct {
	Keys  Keys
	Star  string
	Epoch uint64
	Slot  uint64
}

// Key is the slot's object key.
func (s Addr) Key() string { return s.Keys.Slot(s.Star, s.Epoch, s.Slot) }

// ObserveHeader reads just enough of the slot object in b to classify it:
// one small ranged read.
func ObserveHeader(ctx context.Context, b objstore.Bucket, s Addr) Observation {
	key := s.Key()
	data, err := b.GetRange(ctx, key, 0, HeaderProbeLen)
	if o, done := observeErr(err); done {
		return o
	}
	h, err := DecodeHeader(data)
	if err == nil {
		err = h.Check(s.Star, s.Epoch, s.Slot)
	}
	return classify(b, key, h, nil, err)
}

// ObserveObject reads the whole slot object in b and verifies its checksum.
func ObserveObject(ctx context.Context, b objstore.Bucket, s Addr) Observation {
	key := s.Key()
	data, err := b.Get(ctx, key)
	if o, done := observeErr(err); done {
		return o
	}
	return observeWhole(b, key, s, data)
}

// MinObserveLimit is the least limit ObserveUpTo accepts: the longest
// poison object, so that poison is always read whole and verified.
const MinObserveLimit = maxHeaderLen + MaxPoisonBody

// ObserveUpTo reads at most limit bytes of the slot object in b, in one
// ranged read: an object of at most limit bytes is read whole and
// verified, as ObserveObject does; of a longer one only the header is
// decoded, as ObserveHeader does (Whole is false, Data nil), so that a
// large flight costs limit bytes, not its size. An object longer than
// limit is a flight or foreign, never poison: poison is shorter. A limit
// below MinObserveLimit counts as MinObserveLimit.
func ObserveUpTo(ctx context.Context, b objstore.Bucket, s Addr, limit int) Observation {
	limit = max(limit, MinObserveLimit)
	key := s.Key()
	// One byte more than limit tells an object of exactly limit bytes
	// from a longer one.
	data, err := b.GetRange(ctx, key, 0, int64(limit)+1)
	if o, done := observeErr(err); done {
		return o
	}
	if len(data) <= limit {
		return observeWhole(b, key, s, data)
	}
	h, err := DecodeHeader(data)
	if err == nil {
		err = h.Check(s.Star, s.Epoch, s.Slot)
	}
	if err == nil && h.Len()+int(h.BodyLen) <= limit {
		err = corrupt(fmt.Sprintf("longer than %d bytes, header says %d", limit, h.Len()+int(h.BodyLen)))
	}
	return classify(b, key, h, nil, err)
}

// observeWhole classifies data, the whole object at s's key in b, and
// verifies it.
func observeWhole(b objstore.Bucket, key string, s Addr, data []byte) Observation {
	obj, err := Decode(data)
	if err == nil {
		err = obj.Check(s.Star, s.Epoch, s.Slot)
	}
	o := classify(b, key, obj.Header, data, err)
	if err == nil {
		o.Whole = true
		o.Digest = sha256.Sum256(data)
	}
	return o
}

func observeErr(err error) (Observation, bool) {
	switch {
	case err == nil:
		return Observation{}, false
	case errors.Is(err, objstore.ErrNotFound), planted.On(planted.UnreachableAsEmpty):
		return Observation{State: SlotEmpty}, true
	default:
		// Anything else, including a cancelled context, is "unknown".
		return Observation{State: SlotUnreachable, Err: err}, true
	}
}

func classify(b objstore.Bucket, key string, h Header, data []byte, err error) Observation {
	if err != nil {
		var oe *ObjectError
		if errors.As(err, &oe) {
			c := *oe
			c.Bucket, c.Key = b.Name(), key
			err = &c
		}
		return Observation{State: SlotForeign, Err: err}
	}
	st := SlotFlight
	if h.Kind == KindPoison {
		st = SlotPoison
	}
	return Observation{State: st, Header: h, Data: data}
}

// SameFlight reports whether o holds exactly the flight bytes want.
func (o Observation) SameFlight(want []byte) bool {
	return o.State == SlotFlight && o.Data != nil && bytes.Equal(o.Data, want)
}

// Tally is what the K buckets' observations of one slot add up to. Only
// copies read whole and verified (ObserveObject) count as the same flight,
// by digest; for header probes every flight header counts.
type Tally struct {
	// Copies is the size of the largest group of identical flights, and
	// Holders the buckets (indexes) holding that group.
	Copies  int
	Holders []int
	// Conflict is set when the flights found differ: two writers wrote
	// the slot. ConflictAt is a bucket holding a flight outside Holders.
	Conflict   bool
	ConflictAt int
	// The other states, counted.
	Poisons, Empty, Unreachable, Foreign int
}

// TallySlot adds up one observation per bucket of one slot.
func TallySlot(obs []Observation) Tally {
	t := Tally{ConflictAt: -1}
	var groups [][]int // indexes of identical flights, first holder first
	for i, o := range obs {
		switch o.State {
		case SlotFlight:
			placed := false
			for g, members := range groups {
				if sameCopy(obs[members[0]], o) {
					groups[g] = append(members, i)
					placed = true
					break
				}
			}
			if !placed {
				groups = append(groups, []int{i})
			}
		case SlotPoison:
			t.Poisons++
		case SlotEmpty:
			t.Empty++
		case SlotUnreachable:
			t.Unreachable++
		case SlotForeign:
			t.Foreign++
		}
	}
	largest := -1
	for g, members := range groups {
		if len(members) > t.Copies {
			t.Copies, t.Holders, largest = len(members), members, g
		}
	}
	for g, members := range groups {
		if g != largest {
			t.Conflict, t.ConflictAt = true, members[0]
			break
		}
	}
	return t
}

// sameCopy reports whether two flight observations are the same flight:
// equal digests when both were read whole, equal headers (checksum
// included) when either was only probed.
func sameCopy(a, b Observation) bool {
	if a.Whole && b.Whole {
		return a.Digest == b.Digest
	}
	return a.Header == b.Header
}
