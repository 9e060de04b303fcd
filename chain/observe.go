package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline/objstore"
)

// SlotState is what one bucket holds at one slot.
type SlotState int

const (
	// Empty: the bucket answered that no object exists at the slot.
	Empty SlotState = iota
	// HasFlight: a well-formed flight for exactly this slot.
	HasFlight
	// HasPoison: well-formed poison for exactly this slot.
	HasPoison
	// Unreachable: the bucket did not answer; the state is unknown.
	Unreachable
	// Foreign: an object that is neither a valid flight nor poison for this
	// slot (corrupt, misplaced, or of an unknown format). It is never
	// overwritten, never copied, and counts as neither.
	Foreign
)

func (s SlotState) String() string {
	switch s {
	case Empty:
		return "empty"
	case HasFlight:
		return "flight"
	case HasPoison:
		return "poison"
	case Unreachable:
		return "unreachable"
	case Foreign:
		return "foreign"
	}
	return fmt.Sprintf("SlotState(%d)", int(s))
}

// Observation is one bucket's answer for one slot.
type Observation struct {
	State SlotState
	// Header is set for HasFlight and HasPoison.
	Header Header
	// Data is the whole object when it was read whole (ObserveObject) and
	// the state is HasFlight or HasPoison.
	Data []byte
	// Err is the cause for Unreachable (an objstore error) and Foreign (an
	// *ObjectError naming the bucket and key).
	Err error
}

// Slot names one slot of one epoch of one star.
type Slot struct {
	Keys  Keys
	Star  string
	Epoch uint64
	Slot  uint64
}

// Key is the slot's object key.
func (s Slot) Key() string { return s.Keys.Slot(s.Star, s.Epoch, s.Slot) }

// ObserveHeader reads just enough of the slot object in b to classify it:
// one small ranged read.
func ObserveHeader(ctx context.Context, b objstore.Bucket, s Slot) Observation {
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
func ObserveObject(ctx context.Context, b objstore.Bucket, s Slot) Observation {
	key := s.Key()
	data, err := b.Get(ctx, key)
	if o, done := observeErr(err); done {
		return o
	}
	obj, err := Decode(data)
	if err == nil {
		err = obj.Check(s.Star, s.Epoch, s.Slot)
	}
	return classify(b, key, obj.Header, data, err)
}

func observeErr(err error) (Observation, bool) {
	switch {
	case err == nil:
		return Observation{}, false
	case errors.Is(err, objstore.ErrNotFound):
		return Observation{State: Empty}, true
	default:
		// Anything else, including a cancelled context, is "unknown".
		return Observation{State: Unreachable, Err: err}, true
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
		return Observation{State: Foreign, Err: err}
	}
	st := HasFlight
	if h.Kind == KindPoison {
		st = HasPoison
	}
	return Observation{State: st, Header: h, Data: data}
}

// SameFlight reports whether o holds exactly the flight bytes want.
func (o Observation) SameFlight(want []byte) bool {
	return o.State == HasFlight && o.Data != nil && bytes.Equal(o.Data, want)
}
