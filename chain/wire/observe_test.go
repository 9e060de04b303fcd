package wire_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// TestTallySlot: only identical verified copies count together, and two
// different flights are a conflict naming a bucket outside the largest
// group.
func TestTallySlot(t *testing.T) {
	x := wire.Observation{State: wire.SlotFlight, Whole: true, Digest: sha256.Sum256([]byte("x"))}
	y := wire.Observation{State: wire.SlotFlight, Whole: true, Digest: sha256.Sum256([]byte("y"))}
	p := wire.Observation{State: wire.SlotPoison}
	e := wire.Observation{State: wire.SlotEmpty}
	u := wire.Observation{State: wire.SlotUnreachable}
	f := wire.Observation{State: wire.SlotForeign}

	got := wire.TallySlot([]wire.Observation{x, x, e})
	require.Equal(t, 2, got.Copies)
	require.Equal(t, []int{0, 1}, got.Holders)
	require.False(t, got.Conflict)
	require.Equal(t, -1, got.ConflictAt)
	require.Equal(t, 1, got.Empty)

	got = wire.TallySlot([]wire.Observation{y, x, x})
	require.Equal(t, 2, got.Copies)
	require.Equal(t, []int{1, 2}, got.Holders)
	require.True(t, got.Conflict)
	require.Equal(t, 0, got.ConflictAt)

	got = wire.TallySlot([]wire.Observation{x, y, p, u, f})
	require.Equal(t, 1, got.Copies)
	require.True(t, got.Conflict)
	require.Equal(t, 1, got.ConflictAt)
	require.Equal(t, 1, got.Poisons)
	require.Equal(t, 1, got.Unreachable)
	require.Equal(t, 1, got.Foreign)

	got = wire.TallySlot([]wire.Observation{p, e, u})
	require.Zero(t, got.Copies)
	require.Empty(t, got.Holders)
	require.False(t, got.Conflict)
}

// rangeLog records the bytes each GetRange returned.
type rangeLog struct {
	objstore.Bucket
	got []int
}

func (b *rangeLog) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p, err := b.Bucket.GetRange(ctx, key, off, n)
	b.got = append(b.got, len(p))
	return p, err
}

// TestObserveUpTo: an object of at most limit bytes is read whole and
// verified; of a longer one the bounded read returns at most limit+1
// bytes and counts the header alone, never as a verified copy; and an
// object longer than its header says is foreign, as a whole read finds.
func TestObserveUpTo(t *testing.T) {
	ctx := context.Background()
	const limit = 1000
	addr := wire.Addr{Keys: wire.Keys{Prefix: "p"}, Star: "star-a", Epoch: 3, Slot: 5}
	flight := func(n int) []byte {
		return wire.EncodeFlight(addr.Star, addr.Epoch, addr.Slot, bytes.Repeat([]byte("y"), n-33-len(addr.Star)))
	}
	corrupt := flight(2 * limit)
	corrupt[len(corrupt)-1] ^= 1
	for _, tc := range []struct {
		name  string
		data  []byte // nil: no object
		state wire.SlotState
		whole bool
	}{
		{"absent", nil, wire.SlotEmpty, false},
		{"short flight", flight(limit - 1), wire.SlotFlight, true},
		{"flight of limit bytes", flight(limit), wire.SlotFlight, true},
		{"flight one byte longer", flight(limit + 1), wire.SlotFlight, false},
		{"long flight, corrupt body", corrupt, wire.SlotFlight, false},
		{"short flight with a long tail", append(flight(40), make([]byte, 2*limit)...), wire.SlotForeign, false},
		{"poison with a long tail", append(wire.EncodePoison(addr.Star, addr.Epoch, addr.Slot, "f"), make([]byte, 2*limit)...), wire.SlotForeign, false},
		{"short corrupt flight", corrupt[:limit], wire.SlotForeign, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &rangeLog{Bucket: memblob.New("zone-a")}
			if tc.data != nil {
				require.NoError(t, b.Create(ctx, addr.Key(), tc.data))
			}
			o := wire.ObserveUpTo(ctx, b, addr, limit)
			require.Equal(t, tc.state, o.State, "%v", o.Err)
			require.Equal(t, tc.whole, o.Whole)
			if tc.whole {
				require.Equal(t, tc.data, o.Data)
				require.Equal(t, sha256.Sum256(tc.data), o.Digest)
			} else {
				require.Nil(t, o.Data)
				require.Zero(t, o.Digest)
			}
			if tc.state == wire.SlotForeign {
				require.Equal(t, wire.SlotForeign, wire.ObserveObject(ctx, b, addr).State, "a whole read refuses it too")
			}
			require.Len(t, b.got, 1, "one request")
			require.LessOrEqual(t, b.got[0], limit+1)
		})
	}
	// A limit below the longest poison is raised to it.
	b := memblob.New("zone-a")
	p := wire.EncodePoison(addr.Star, addr.Epoch, addr.Slot, string(bytes.Repeat([]byte("i"), wire.MaxPoisonBody)))
	require.NoError(t, b.Create(ctx, addr.Key(), p))
	o := wire.ObserveUpTo(ctx, b, addr, 1)
	require.Equal(t, wire.SlotPoison, o.State)
	require.True(t, o.Whole)
}
