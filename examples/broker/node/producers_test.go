package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// at is the acknowledgement the tests give the record at offset off.
func at(off uint64) Ack { return Ack{Offset: off, Epoch: 1 + off/100, Slot: off % 100} }

// A producer's retries are recognized within its window, refused below
// it, and new above it; the table keeps at most window acknowledgements
// per producer.
func TestProducerWindow(t *testing.T) {
	pt := newProducerTable(4, 8)
	for seq := range uint64(20) {
		a, v := pt.lookup("p", seq)
		require.Equal(t, fresh, v, "seq %d", seq)
		require.Zero(t, a)
		pt.apply("p", seq, at(seq))
	}
	for seq := uint64(12); seq < 20; seq++ {
		a, v := pt.lookup("p", seq)
		require.Equal(t, duplicate, v, "seq %d", seq)
		require.Equal(t, at(seq), a)
	}
	for _, seq := range []uint64{0, 5, 11} {
		_, v := pt.lookup("p", seq)
		require.Equal(t, tooOld, v, "seq %d", seq)
	}
	_, v := pt.lookup("p", 20)
	require.Equal(t, fresh, v)
	producers, acks := pt.len()
	require.Equal(t, 1, producers)
	require.Equal(t, 8, acks)

	// Out of order within the window: a gap stays fresh until filled.
	pt.apply("q", 10, at(20))
	pt.apply("q", 12, at(21))
	_, v = pt.lookup("q", 11)
	require.Equal(t, fresh, v)
	pt.apply("q", 11, at(22))
	a, v := pt.lookup("q", 11)
	require.Equal(t, duplicate, v)
	require.Equal(t, at(22), a)
	// A jump past the whole window lets every kept one go.
	pt.apply("q", 1000, at(23))
	_, acks = pt.len()
	require.Equal(t, 8+1, acks)
	_, v = pt.lookup("q", 12)
	require.Equal(t, tooOld, v)
}

// The least recently active producer expires first once the table holds
// more than max; an expired producer is new again.
func TestProducerExpiry(t *testing.T) {
	pt := newProducerTable(3, 8)
	for i, p := range []string{"p1", "p2", "p3", "p1", "p4"} {
		pt.apply(p, uint64(i), at(uint64(i)))
	}
	producers, _ := pt.len()
	require.Equal(t, 3, producers)
	_, v := pt.lookup("p2", 1)
	require.Equal(t, fresh, v, "p2 expired")
	for _, p := range []string{"p1", "p3", "p4"} {
		require.NotNil(t, pt.byName[p], p)
	}
	pt.apply("", 0, Ack{}) // a record without a producer only moves next
	require.Equal(t, uint64(6), pt.next)
}

// A table survives its snapshot encoding unchanged, and a tighter bound
// at decode drops what it would have dropped.
func TestProducerSnapshotRoundTrip(t *testing.T) {
	pt := newProducerTable(16, 64)
	for off := range uint64(500) {
		p := fmt.Sprintf("producer-%d", off%7)
		pt.apply(p, off/7*3+off%3, at(off))
	}
	pt.apply("", 0, Ack{})
	data := pt.encode()
	got, err := decodeProducerTable(data, 16, 64)
	require.NoError(t, err)
	require.Equal(t, pt.next, got.next)
	requireSameTable(t, pt, got)
	require.Equal(t, data, got.encode())
	require.Less(t, len(data), 7*64*8, "a few bytes per acknowledgement")

	small, err := decodeProducerTable(data, 2, 4)
	require.NoError(t, err)
	producers, acks := small.len()
	require.Equal(t, 2, producers)
	require.LessOrEqual(t, acks, 2*4)
}

func requireSameTable(t *testing.T, want, got *producerTable) {
	t.Helper()
	require.Equal(t, want.lru.Len(), got.lru.Len())
	for w, g := want.lru.Front(), got.lru.Front(); w != nil; w, g = w.Next(), g.Next() {
		we, ge := w.Value.(*producerEntry), g.Value.(*producerEntry)
		require.Equal(t, *we, *ge)
	}
}

// The window travels with the snapshot: a table saved with window 8 and
// loaded with window 128 refuses what the narrower window let go of, until
// the producer's sequences move past it; loaded with window 4, it lets go
// of the excess at once.
func TestProducerWindowTravels(t *testing.T) {
	pt := newProducerTable(4, 8)
	for seq := range uint64(20) {
		pt.apply("p", seq, at(seq))
	}
	data := pt.encode()

	wide, err := decodeProducerTable(data, 4, 128)
	require.NoError(t, err)
	requireSameTable(t, pt, wide)
	for _, tc := range []struct {
		seq  uint64
		want verdict
	}{{0, tooOld}, {5, tooOld}, {11, tooOld}, {12, duplicate}, {19, duplicate}, {20, fresh}} {
		_, v := wide.lookup("p", tc.seq)
		require.Equal(t, tc.want, v, "seq %d", tc.seq)
	}
	// Sequences 20 to 140: the wider window fills up, and from 140 on it
	// lets go of what falls out of it, as any window does.
	for seq := uint64(20); seq <= 140; seq++ {
		wide.apply("p", seq, at(seq))
		_, v := wide.lookup("p", 11)
		require.Equal(t, tooOld, v, "seq 11 after %d", seq)
	}
	_, v := wide.lookup("p", 12)
	require.Equal(t, tooOld, v, "12 left the window of 128 below 140")
	_, v = wide.lookup("p", 13)
	require.Equal(t, duplicate, v)

	narrow, err := decodeProducerTable(data, 4, 4)
	require.NoError(t, err)
	_, v = narrow.lookup("p", 15)
	require.Equal(t, tooOld, v)
	_, v = narrow.lookup("p", 16)
	require.Equal(t, duplicate, v)
	_, acks := narrow.len()
	require.Equal(t, 4, acks)
}

// A snapshot of version 1, which has no low, is read with the lowest
// sequence it keeps as the producer's low: nothing its window let go of is
// judged fresh.
func TestProducerSnapshotVersion1(t *testing.T) {
	// next 20; one producer "p", last 19, hi 19; 8 acknowledgements, of
	// sequences 12 to 19 at offsets 12 to 19, epoch 1, slots 12 to 19.
	b := []byte(snapMagicV1)
	b = binary.AppendUvarint(b, 20)
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendUvarint(b, 1)
	b = append(b, 'p')
	b = binary.AppendUvarint(b, 19)
	b = binary.AppendUvarint(b, 19)
	b = binary.AppendUvarint(b, 8)
	for seq := uint64(12); seq < 20; seq++ {
		b = binary.AppendUvarint(b, 19-seq)
		b = binary.AppendVarint(b, int64(seq)-19)
		epoch := int64(0)
		if seq == 12 {
			epoch = 1
		}
		b = binary.AppendVarint(b, epoch)
		b = binary.AppendUvarint(b, seq)
	}
	pt, err := decodeProducerTable(b, 4, 128)
	require.NoError(t, err)
	for seq := range uint64(20) {
		a, v := pt.lookup("p", seq)
		if seq < 12 {
			require.Equal(t, tooOld, v, "seq %d", seq)
			continue
		}
		require.Equal(t, duplicate, v, "seq %d", seq)
		require.Equal(t, Ack{Offset: seq, Epoch: 1, Slot: seq}, a)
	}
	again, err := decodeProducerTable(pt.encode(), 4, 128)
	require.NoError(t, err)
	requireSameTable(t, pt, again)
}

// Bytes that are not a snapshot of this format are refused with
// errBadSnapshot.
func TestProducerSnapshotCorrupt(t *testing.T) {
	pt := newProducerTable(4, 8)
	pt.apply("p", 1, at(0))
	pt.apply("q", 1, at(1))
	good := pt.encode()
	for name, b := range map[string][]byte{
		"empty":      nil,
		"magic":      []byte("cbr1"),
		"truncated":  good[:len(good)-1],
		"trailing":   append(append([]byte(nil), good...), 0),
		"count":      append([]byte(snapMagic), 2, 0xff, 0xff, 0xff, 0x0f),
		"low":        []byte("cbs2\x05\x01\x01p\x00\x01\x02\x00"),
		"v1 no acks": []byte("cbs1\x05\x01\x01p\x00\x00\x00"),
	} {
		_, err := decodeProducerTable(b, 4, 8)
		require.ErrorIs(t, err, errBadSnapshot, name)
	}
}

// The decoder refuses what it cannot read with errBadSnapshot and never
// panics; what it accepts encodes back to a table that decodes the same.
func FuzzDecodeProducerTable(f *testing.F) {
	pt := newProducerTable(8, 16)
	for off := range uint64(40) {
		pt.apply(fmt.Sprintf("p%d", off%3), off, at(off))
	}
	f.Add(pt.encode())
	f.Add([]byte(snapMagic))
	f.Add([]byte("cbs1\x05\x01\x01p\x00\x00\x01\x00\x00\x00\x00"))
	f.Add([]byte("cbs2\x05\x01\x01p\x00\x03\x01\x01\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeProducerTable(b, 8, 16)
		if err != nil {
			if !errors.Is(err, errBadSnapshot) {
				t.Fatalf("not errBadSnapshot: %v", err)
			}
			return
		}
		again, err := decodeProducerTable(got.encode(), 8, 16)
		if err != nil {
			t.Fatalf("a decoded table does not decode again: %v", err)
		}
		requireSameTable(t, got, again)
	})
}
