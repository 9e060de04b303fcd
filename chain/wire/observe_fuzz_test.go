package wire_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/objstore/memblob"
)

// slotAddr is where the fuzzed object is stored and read from.
var slotAddr = wire.Addr{Keys: wire.Keys{Prefix: "data/v1"}, Star: "star-a", Epoch: 3, Slot: 5}

// FuzzObserveSlot stores arbitrary bytes as a slot object and reads them
// back the way every reader, fencer and settler does (ObserveObject, the
// header probe ObserveHeader and the bounded read ObserveUpTo). The
// object exists, so it is a flight, poison or foreign, never empty or
// unreachable; a flight or poison is exactly the object for the slot's
// coordinates and re-encodes to the stored bytes; a foreign object
// carries an *ObjectError naming the bucket, the key and one of the wire
// sentinels; the probe never calls good what the whole read refuses on
// its header; and the bounded read is the whole read when the object
// fits, a flight's header or foreign otherwise.
func FuzzObserveSlot(f *testing.F) {
	f.Add(wire.EncodeFlight(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, []byte("payload")))
	f.Add(wire.EncodeFlight(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, nil))
	f.Add(wire.EncodePoison(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, "fencer-1"))
	f.Add(wire.EncodeFlight(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot+1, []byte("misplaced")))
	f.Add(wire.EncodeFlight("star-b", slotAddr.Epoch, slotAddr.Slot, []byte("other star")))
	f.Add(wire.EncodeFlight(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, bytes.Repeat([]byte("long "), 100)))
	f.Add(append(wire.EncodePoison(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, "padded"), make([]byte, 400)...))
	f.Add([]byte("CUTL\x02"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		b := memblob.New("zone-a")
		key := slotAddr.Key()
		if err := b.Create(ctx, key, data); err != nil {
			t.Fatalf("create %s: %v", key, err)
		}
		whole := wire.ObserveObject(ctx, b, slotAddr)
		probe := wire.ObserveHeader(ctx, b, slotAddr)
		for _, o := range []wire.Observation{whole, probe} {
			switch o.State {
			case wire.SlotFlight, wire.SlotPoison:
				h := o.Header
				if h.Star != slotAddr.Star || h.Epoch != slotAddr.Epoch || h.Slot != slotAddr.Slot {
					t.Fatalf("%v accepted for %s/%d/%d: %+v", o.State, slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, h)
				}
				if (o.State == wire.SlotPoison) != (h.Kind == wire.KindPoison) {
					t.Fatalf("state %v for a header of kind %v", o.State, h.Kind)
				}
				if o.Err != nil {
					t.Fatalf("%v carries an error: %v", o.State, o.Err)
				}
			case wire.SlotForeign:
				checkForeign(t, o, key)
			default:
				t.Fatalf("a stored object observed as %v (%v)", o.State, o.Err)
			}
		}
		if probe.Data != nil || probe.Whole || probe.Digest != ([sha256.Size]byte{}) {
			t.Fatalf("a header probe claims a whole read: %+v", probe)
		}
		// A bounded read is the whole read when the object fits, and
		// otherwise never says more than the probe: a flight's header, or
		// foreign only where the whole read is foreign too.
		for _, limit := range []int{wire.MinObserveLimit, len(data), len(data) - 1} {
			upTo := wire.ObserveUpTo(ctx, b, slotAddr, limit)
			switch {
			case len(data) <= max(limit, wire.MinObserveLimit):
				if upTo.State != whole.State || upTo.Header != whole.Header || upTo.Whole != whole.Whole ||
					upTo.Digest != whole.Digest || !bytes.Equal(upTo.Data, whole.Data) {
					t.Fatalf("limit %d: bounded read %+v, whole read %+v", limit, upTo, whole)
				}
			case upTo.State == wire.SlotFlight:
				if upTo.Whole || upTo.Data != nil || probe.State != wire.SlotFlight || upTo.Header != probe.Header {
					t.Fatalf("limit %d: bounded read %+v, probe %+v", limit, upTo, probe)
				}
			case upTo.State == wire.SlotForeign:
				checkForeign(t, upTo, key)
				if whole.State != wire.SlotForeign {
					t.Fatalf("limit %d: bounded read foreign (%v), whole read %v", limit, upTo.Err, whole.State)
				}
			default:
				t.Fatalf("limit %d: an object longer than the limit observed as %v", limit, upTo.State)
			}
		}
		if whole.State == wire.SlotForeign {
			if whole.Whole || whole.Data != nil || whole.SameFlight(data) {
				t.Fatalf("a foreign object counts as read: %+v", whole)
			}
			return
		}
		// Good: the probe agrees, the copy is exactly the stored bytes,
		// and they are what encoding the decoded object gives.
		if probe.State != whole.State || probe.Header != whole.Header {
			t.Fatalf("probe %v %+v, whole read %v %+v", probe.State, probe.Header, whole.State, whole.Header)
		}
		if !whole.Whole || !bytes.Equal(whole.Data, data) || whole.Digest != sha256.Sum256(data) {
			t.Fatalf("whole read does not hold the stored bytes: %+v", whole)
		}
		if whole.SameFlight(data) != (whole.State == wire.SlotFlight) {
			t.Fatalf("SameFlight of its own bytes is %v for %v", whole.SameFlight(data), whole.State)
		}
		body := data[whole.Header.Len():]
		var re []byte
		if whole.State == wire.SlotFlight {
			re = wire.EncodeFlight(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, body)
		} else {
			re = wire.EncodePoison(slotAddr.Star, slotAddr.Epoch, slotAddr.Slot, string(body))
		}
		if !bytes.Equal(re, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, data)
		}
		// Two such copies are one flight, never a conflict.
		tally := wire.TallySlot([]wire.Observation{whole, probe, whole})
		if tally.Conflict {
			t.Fatalf("identical copies conflict: %+v", tally)
		}
		if whole.State == wire.SlotFlight && tally.Copies != 3 || whole.State == wire.SlotPoison && tally.Poisons != 3 {
			t.Fatalf("three copies of one %v tally as %+v", whole.State, tally)
		}
	})
}

// checkForeign checks a foreign observation's error: an *ObjectError
// naming where the object was found and matching a wire sentinel.
func checkForeign(t *testing.T, o wire.Observation, key string) {
	t.Helper()
	var oe *wire.ObjectError
	if !errors.As(o.Err, &oe) {
		t.Fatalf("foreign without an *ObjectError: %v", o.Err)
	}
	if oe.Bucket != "zone-a" || oe.Key != key || oe.Reason == "" {
		t.Fatalf("foreign error does not say where or why: %+v", oe)
	}
	if !errors.Is(o.Err, wire.ErrCorrupt) && !errors.Is(o.Err, wire.ErrUnknownFormat) && !errors.Is(o.Err, wire.ErrMisplaced) {
		t.Fatalf("foreign error %v matches no wire sentinel", o.Err)
	}
}

// FuzzParseSlot feeds arbitrary keys, as a bucket listing returns them, to
// ParseSlot: a key it accepts is exactly the key of the slot it returns,
// and the key of every slot parses back to that slot.
func FuzzParseSlot(f *testing.F) {
	f.Add("data/v1/star-a/00000000000000000003/00000000000000000005", uint64(5), true)
	f.Add("star-a/00000000000000000003/18446744073709551615", uint64(0), false)
	f.Add("star-a/00000000000000000003/18446744073709551616", uint64(1), false)
	f.Add("star-a/00000000000000000003/+0000000000000000005", uint64(2), false)
	f.Add("star-a/00000000000000000003/5", uint64(3), false)
	f.Fuzz(func(t *testing.T, key string, slot uint64, prefixed bool) {
		keys := wire.Keys{}
		if prefixed {
			keys.Prefix = "data/v1"
		}
		const star, ep = "star-a", 3
		if n, ok := keys.ParseSlot(star, ep, key); ok {
			if got := keys.Slot(star, ep, n); got != key {
				t.Fatalf("ParseSlot(%q) = %d, whose key is %q", key, n, got)
			}
		}
		k := keys.Slot(star, ep, slot)
		if n, ok := keys.ParseSlot(star, ep, k); !ok || n != slot {
			t.Fatalf("ParseSlot(Slot(%d)) = %d, %v", slot, n, ok)
		}
		if _, ok := keys.ParseSlot(star, ep+1, k); ok {
			t.Fatalf("the key %q of epoch %d parses under epoch %d", k, ep, ep+1)
		}
	})
}
