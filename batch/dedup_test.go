package batch_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
)

// at is the receipt the tests give the record at offset off.
func at(off uint64) batch.Receipt {
	return batch.Receipt{Offset: off, Position: chain.Position{Epoch: 1 + off/100, Slot: off % 100}}
}

func newDedup(t testing.TB, producers int, window uint64) *batch.Dedup {
	t.Helper()
	d, err := batch.NewDedup(batch.DedupOptions{Producers: producers, Window: window})
	require.NoError(t, err)
	return d
}

func marshal(t testing.TB, d *batch.Dedup) []byte {
	t.Helper()
	b, err := d.MarshalBinary()
	require.NoError(t, err)
	return b
}

func unmarshal(t testing.TB, data []byte, producers int, window uint64) (*batch.Dedup, error) {
	t.Helper()
	d := newDedup(t, producers, window)
	return d, d.UnmarshalBinary(data)
}

// requireSameTable compares two tables by their encodings, which hold
// every producer's state, in the order of their activity.
func requireSameTable(t testing.TB, want, got *batch.Dedup) {
	t.Helper()
	require.Equal(t, marshal(t, want), marshal(t, got))
}

// Options out of bounds are refused with cutline.ErrInvalid; zero means
// the defaults.
func TestDedupOptions(t *testing.T) {
	for _, o := range []batch.DedupOptions{
		{Producers: -1},
		{Producers: batch.MaxDedupProducers + 1},
		{Window: batch.MaxDedupWindow + 1},
		{Window: batch.MaxDedupWindow}, // with the default producers, too many receipts
	} {
		_, err := batch.NewDedup(o)
		require.ErrorIs(t, err, cutline.ErrInvalid, "%+v", o)
	}
	d, err := batch.NewDedup(batch.DedupOptions{})
	require.NoError(t, err)
	for seq := range uint64(batch.DefaultDedupWindow + 1) {
		d.Apply("p", seq, at(seq))
	}
	_, v := d.Lookup("p", 0)
	require.Equal(t, batch.TooOld, v, "the default window")
	_, v = d.Lookup("p", 1)
	require.Equal(t, batch.Duplicate, v, "the default window")
}

// A producer's retries are recognized within its window, refused below
// it, and new above it; the table keeps at most window receipts per
// producer.
func TestDedupWindow(t *testing.T) {
	d := newDedup(t, 4, 8)
	for seq := range uint64(20) {
		r, v := d.Lookup("p", seq)
		require.Equal(t, batch.Fresh, v, "seq %d", seq)
		require.Zero(t, r)
		d.Apply("p", seq, at(seq))
	}
	for seq := uint64(12); seq < 20; seq++ {
		r, v := d.Lookup("p", seq)
		require.Equal(t, batch.Duplicate, v, "seq %d", seq)
		require.Equal(t, at(seq), r)
	}
	for _, seq := range []uint64{0, 5, 11} {
		_, v := d.Lookup("p", seq)
		require.Equal(t, batch.TooOld, v, "seq %d", seq)
	}
	_, v := d.Lookup("p", 20)
	require.Equal(t, batch.Fresh, v)
	producers, receipts := d.Len()
	require.Equal(t, 1, producers)
	require.Equal(t, 8, receipts)

	// Out of order within the window: a gap stays fresh until filled.
	d.Apply("q", 10, at(20))
	d.Apply("q", 12, at(21))
	_, v = d.Lookup("q", 11)
	require.Equal(t, batch.Fresh, v)
	d.Apply("q", 11, at(22))
	r, v := d.Lookup("q", 11)
	require.Equal(t, batch.Duplicate, v)
	require.Equal(t, at(22), r)
	// A jump past the whole window lets every kept one go.
	d.Apply("q", 1000, at(23))
	_, receipts = d.Len()
	require.Equal(t, 8+1, receipts)
	_, v = d.Lookup("q", 12)
	require.Equal(t, batch.TooOld, v)
}

// The least recently active producer expires first once the table holds
// more than its bound; an expired producer is new again.
func TestDedupExpiry(t *testing.T) {
	d := newDedup(t, 3, 8)
	for i, p := range []string{"p1", "p2", "p3", "p1", "p4"} {
		d.Apply(p, uint64(i), at(uint64(i)))
	}
	producers, _ := d.Len()
	require.Equal(t, 3, producers)
	_, v := d.Lookup("p2", 1)
	require.Equal(t, batch.Fresh, v, "p2 expired")
	for p, seq := range map[string]uint64{"p1": 3, "p3": 2, "p4": 4} {
		_, v := d.Lookup(p, seq)
		require.Equal(t, batch.Duplicate, v, p)
	}
	d.Apply("", 0, batch.Receipt{}) // a record without a producer only moves Next
	require.Equal(t, uint64(6), d.Next())
	d.Skip(4)
	require.Equal(t, uint64(6), d.Next(), "Skip never moves back")
	d.Skip(9)
	require.Equal(t, uint64(9), d.Next())
}

// A table survives its encoding unchanged, and a tighter bound at decode
// drops what it would have dropped.
func TestDedupRoundTrip(t *testing.T) {
	d := newDedup(t, 16, 64)
	for off := range uint64(500) {
		p := fmt.Sprintf("producer-%d", off%7)
		d.Apply(p, off/7*3+off%3, at(off))
	}
	d.Apply("", 0, batch.Receipt{})
	data := marshal(t, d)
	got, err := unmarshal(t, data, 16, 64)
	require.NoError(t, err)
	require.Equal(t, d.Next(), got.Next())
	requireSameTable(t, d, got)
	require.Less(t, len(data), 7*64*8, "a few bytes per receipt")

	small, err := unmarshal(t, data, 2, 4)
	require.NoError(t, err)
	producers, receipts := small.Len()
	require.Equal(t, 2, producers)
	require.LessOrEqual(t, receipts, 2*4)
}

// The window travels with the encoding: a table saved with window 8 and
// loaded with window 128 refuses what the narrower window let go of, until
// the producer's sequences move past it; loaded with window 4, it lets go
// of the excess at once.
func TestDedupWindowTravels(t *testing.T) {
	d := newDedup(t, 4, 8)
	for seq := range uint64(20) {
		d.Apply("p", seq, at(seq))
	}
	data := marshal(t, d)

	wide, err := unmarshal(t, data, 4, 128)
	require.NoError(t, err)
	requireSameTable(t, d, wide)
	for _, tc := range []struct {
		seq  uint64
		want batch.Verdict
	}{{0, batch.TooOld}, {5, batch.TooOld}, {11, batch.TooOld}, {12, batch.Duplicate}, {19, batch.Duplicate}, {20, batch.Fresh}} {
		_, v := wide.Lookup("p", tc.seq)
		require.Equal(t, tc.want, v, "seq %d", tc.seq)
	}
	// Sequences 20 to 140: the wider window fills up, and from 140 on it
	// lets go of what falls out of it, as any window does.
	for seq := uint64(20); seq <= 140; seq++ {
		wide.Apply("p", seq, at(seq))
		_, v := wide.Lookup("p", 11)
		require.Equal(t, batch.TooOld, v, "seq 11 after %d", seq)
	}
	_, v := wide.Lookup("p", 12)
	require.Equal(t, batch.TooOld, v, "12 left the window of 128 below 140")
	_, v = wide.Lookup("p", 13)
	require.Equal(t, batch.Duplicate, v)

	narrow, err := unmarshal(t, data, 4, 4)
	require.NoError(t, err)
	_, v = narrow.Lookup("p", 15)
	require.Equal(t, batch.TooOld, v)
	_, v = narrow.Lookup("p", 16)
	require.Equal(t, batch.Duplicate, v)
	_, receipts := narrow.Len()
	require.Equal(t, 4, receipts)
}

// An encoding of version 1, which has no low, is read with the lowest
// sequence it keeps as the producer's low: nothing its window let go of
// is judged fresh.
func TestDedupVersion1(t *testing.T) {
	// next 20; one producer "p", last 19, hi 19; 8 receipts, of
	// sequences 12 to 19 at offsets 12 to 19, epoch 1, slots 12 to 19.
	b := []byte("cbs1")
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
	d, err := unmarshal(t, b, 4, 128)
	require.NoError(t, err)
	for seq := range uint64(20) {
		r, v := d.Lookup("p", seq)
		if seq < 12 {
			require.Equal(t, batch.TooOld, v, "seq %d", seq)
			continue
		}
		require.Equal(t, batch.Duplicate, v, "seq %d", seq)
		require.Equal(t, batch.Receipt{Offset: seq, Position: chain.Position{Epoch: 1, Slot: seq}}, r)
	}
	again, err := unmarshal(t, marshal(t, d), 4, 128)
	require.NoError(t, err)
	requireSameTable(t, d, again)
}

// Bytes that are not an encoding are refused with a *DedupFormatError,
// and leave the table as it was.
func TestDedupCorrupt(t *testing.T) {
	d := newDedup(t, 4, 8)
	d.Apply("p", 1, at(0))
	d.Apply("q", 1, at(1))
	good := marshal(t, d)
	for name, b := range map[string][]byte{
		"empty":      nil,
		"magic":      []byte("cbr1"),
		"truncated":  good[:len(good)-1],
		"trailing":   append(append([]byte(nil), good...), 0),
		"count":      append([]byte("cbs2"), 2, 0xff, 0xff, 0xff, 0x0f),
		"low":        []byte("cbs2\x05\x01\x01p\x00\x01\x02\x00"),
		"v1 no acks": []byte("cbs1\x05\x01\x01p\x00\x00\x00"),
	} {
		err := d.UnmarshalBinary(b)
		require.ErrorIs(t, err, batch.ErrDedupFormat, name)
		_, ok := errors.AsType[*batch.DedupFormatError](err)
		require.True(t, ok, name)
		require.Equal(t, good, marshal(t, d), "%s changed the table", name)
	}
}

// The decoder refuses what it cannot read with a *DedupFormatError and
// never panics; what it accepts encodes back to a table that decodes the
// same.
func FuzzDedupUnmarshal(f *testing.F) {
	d := newDedup(f, 8, 16)
	for off := range uint64(40) {
		d.Apply(fmt.Sprintf("p%d", off%3), off, at(off))
	}
	f.Add(marshal(f, d))
	f.Add([]byte("cbs2"))
	f.Add([]byte("cbs1\x05\x01\x01p\x00\x00\x01\x00\x00\x00\x00"))
	f.Add([]byte("cbs2\x05\x01\x01p\x00\x03\x01\x01\x00\x00\x00\x00"))
	f.Add([]byte("cbs2\x05\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := unmarshal(t, b, 8, 16)
		if err != nil {
			if _, ok := errors.AsType[*batch.DedupFormatError](err); !ok || !errors.Is(err, batch.ErrDedupFormat) {
				t.Fatalf("not a *DedupFormatError: %v", err)
			}
			return
		}
		again, err := unmarshal(t, marshal(t, got), 8, 16)
		if err != nil {
			t.Fatalf("a decoded table does not decode again: %v", err)
		}
		requireSameTable(t, got, again)
	})
}
