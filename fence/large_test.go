package fence

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/internal/readlog"
	"github.com/cutline/cutline/objstore"
)

// loggedFencer returns a fencer over the env's zones, each read through a
// readlog.Bucket.
func (e *env) loggedFencer(opts Options) (*Fencer, []*readlog.Bucket) {
	var logs []*readlog.Bucket
	zones := e.view(func(_ int, b objstore.Bucket) objstore.Bucket {
		l := readlog.Wrap(b)
		logs = append(logs, l)
		return l
	})
	return e.fencerOn(chain.MustZones(zones...), opts), logs
}

// TestLargeFlightsReadWholeInWZones: a slot whose large flight (past
// wholeLimit) landed in every zone costs the walk W whole reads, each in
// another zone, and a bounded read of the others (K=3, W=2); the walk
// hands one verified copy of each committed slot to the caller's Kept,
// nothing at or past the cut, and coverage of a flight taken from it
// needs no read.
func TestLargeFlightsReadWholeInWZones(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("f f f", "f f f", "f f f", "F F F", "f f f")
	f, logs := e.loggedFencer(Options{})
	kept := NewKept(1 << 30)
	rep, err := f.FenceKeep(bounded(t), star, e.rec.Epoch, kept)
	require.NoError(t, err)
	require.Equal(t, uint64(5), rep.Cut)
	e.checkCut(5)
	for s := range uint64(5) {
		key := e.slot(s).Key()
		size := len(e.object(0, s))
		whole, read := 0, 0
		for z, l := range logs {
			require.LessOrEqual(t, l.Whole(key), 1, "slot %d read whole once at most in zone %d", s, z)
			whole += l.Whole(key)
			read += l.Bytes(key)
		}
		if s == 3 { // small: read whole in every zone, in one request each
			require.Equal(t, 3*size, read, "slot %d", s)
			continue
		}
		require.Equal(t, 2, whole, "slot %d: W whole reads", s)
		require.LessOrEqual(t, read, 2*size+wholeLimit+1+3*wire.HeaderProbeLen, "slot %d: W copies, a bounded read and the estimate's probes", s)
	}
	require.Equal(t, 5, kept.Len(), "every committed slot's copy, below the cut")
	for s := range uint64(5) {
		p, ok := kept.Take(s)
		require.True(t, ok, "slot %d", s)
		want := payload(s)
		if s != 3 {
			want = largePayload(s)
		}
		require.Equal(t, want, p, "slot %d", s)
	}
	require.Zero(t, kept.Len())
	require.Zero(t, kept.Bytes())
}

// object reads slot s in zone z directly.
func (e *env) object(z int, s uint64) []byte {
	e.t.Helper()
	p, err := e.raw[z].Get(bounded(e.t), e.slot(s).Key())
	require.NoError(e.t, err)
	return p
}

// TestLargeFlightCountsOnlyWhenVerified: the walk reads a large flight
// whole in W zones straight away (zones a and b for slot 0) and only the
// header of the copy in c. A copy only probed never counts toward W: it is
// read whole when the verified copies do not make W, so a corrupt one is
// never counted nor copied and a good one completes the quorum. Once W
// verified copies agree, a copy with their header is left unread; one
// with another header is read, and is a second writer's flight.
func TestLargeFlightCountsOnlyWhenVerified(t *testing.T) {
	for _, tc := range []struct {
		name  string
		row   string // slot 0; slot 1 is empty: the cut
		after string // slot 0 once fenced
		whole []int  // whole reads of slot 0 per zone
		err   error
	}{
		{"a corrupt copy only probed", "f E c", "F F X", []int{1, 0, 1}, nil},
		{"the good copy only probed", "c E f", "X F F", []int{1, 0, 1}, nil},
		{"a quorum read whole in the first zones", "f f c", "F F X", []int{1, 1, 0}, nil},
		{"a missing copy found in the probed zone", "E f f", "E F F", []int{0, 1, 1}, nil},
		{"a second writer's flight only probed", "f f y", "", []int{1, 1, 1}, chain.ErrConflictingFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 3, 2, 4)
			e.layout(tc.row)
			f, logs := e.loggedFencer(Options{Span: 1})
			kept := NewKept(1 << 30)
			rep, err := f.FenceKeep(bounded(t), star, e.rec.Epoch, kept)
			key := e.slot(0).Key()
			var whole []int
			for _, l := range logs {
				whole = append(whole, l.Whole(key))
			}
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Zero(t, kept.Len(), "nothing kept from a failed fence")
				require.Equal(t, tc.whole, whole)
				return
			}
			require.NoError(t, err)
			require.Equal(t, uint64(1), rep.Cut)
			e.checkCut(1)
			require.Equal(t, tc.after, e.state(0))
			p, ok := kept.Take(0)
			require.True(t, ok, "the verified copy is kept")
			require.Equal(t, largePayload(0), p)
			// A repair takes the copy the walk read: the reads are those
			// of the walk alone.
			require.Equal(t, tc.whole, whole)
		})
	}
}

// TestKept: Kept holds the largest flights within its budget, forgets a
// slot offered with two digests and what is taken, and drops what lies
// at or past a cut; a nil Kept holds nothing.
func TestKept(t *testing.T) {
	obj := func(n int) []byte { return bytes.Repeat([]byte{'o'}, n) }
	d1, d2 := sha256.Sum256([]byte("1")), sha256.Sum256([]byte("2"))
	k := NewKept(100)
	k.offer(1, d1, obj(40), 10)
	k.offer(2, d1, obj(30), 10)
	k.offer(3, d1, obj(30), 10) // fits: 100
	require.Equal(t, 3, k.Len())
	require.Equal(t, int64(100), k.Bytes())
	k.offer(4, d1, obj(20), 10) // smaller than all: refused
	require.Equal(t, 3, k.Len())
	k.offer(5, d1, obj(50), 10) // forgets the two 30s for it
	require.Equal(t, 2, k.Len())
	require.Equal(t, int64(90), k.Bytes())
	_, ok := k.Take(2)
	require.False(t, ok)
	k.offer(6, d1, obj(101), 10) // larger than the budget
	require.Equal(t, 2, k.Len())
	k.offer(7, d1, obj(45), 10) // only the 40 is smaller, and 50+45 fits
	require.Equal(t, 2, k.Len())
	require.Equal(t, int64(95), k.Bytes())
	_, ok = k.Take(1)
	require.False(t, ok)
	k.offer(7, d1, obj(45), 10) // again, the same copy: no change
	require.Equal(t, int64(95), k.Bytes())
	k.offer(7, d2, obj(45), 10) // another copy: forgotten
	require.Equal(t, 1, k.Len())
	p, ok := k.Take(5)
	require.True(t, ok)
	require.Len(t, p, 40, "the payload, past the header")
	require.Zero(t, k.Bytes())
	k.offer(8, d1, obj(60), 10)
	k.offer(9, d1, obj(30), 10)
	k.offer(10, d1, obj(45), 10) // the 30 is smaller, but 60+45 would not fit
	require.Equal(t, int64(90), k.Bytes(), "refused, and nothing forgotten for it")
	_, ok = k.Take(10)
	require.False(t, ok)
	k.Release()
	k.offer(11, d1, obj(20), 10)
	k.offer(12, d1, obj(20), 10)
	k.dropFrom(12)
	require.Equal(t, 1, k.Len())
	k.Release()
	require.Zero(t, k.Len())
	require.Zero(t, k.Bytes())

	var none *Kept
	none.offer(1, d1, obj(10), 1)
	_, ok = none.Take(1)
	require.False(t, ok)
	require.Zero(t, none.Len())
	none.Release()
}
