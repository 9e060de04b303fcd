package fence

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	metamem "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
)

// synthChain describes an epoch of n slots without storing it: every slot
// below n holds its flight in every bucket, except the ragged tail, whose
// rows say which buckets hold the flight ('F') and which are empty ('E').
type synthChain struct {
	star    string
	n       uint64
	tail    map[uint64]string
	payload []byte
	// grow, when set, plays a writer that never stops: every read request
	// extends the chain by grow committed slots (created objects, such as
	// poison, keep their slots).
	grow uint64
	end  atomic.Uint64 // the growth so far
}

// raggedTail is a pipelined writer's tail: committed, half written, a hole,
// and a straggler past the hole. The cut is n−2.
func raggedTail(n uint64) map[uint64]string {
	return map[uint64]string{n - 4: "F F E", n - 3: "F E E", n - 2: "E E E", n - 1: "F E E"}
}

// synthBucket is bucket idx of a synthChain: flights are encoded on the
// fly (wire.EncodeFlight) when read; whatever is created (poison,
// repaired copies) goes to an overlay. It counts requests.
type synthBucket struct {
	c    *synthChain
	idx  int
	name string

	mu      sync.Mutex
	overlay map[string][]byte

	reads, creates atomic.Int64
}

var _ objstore.Bucket = (*synthBucket)(nil)

func newSynthZones(c *synthChain, k int) []*synthBucket {
	out := make([]*synthBucket, k)
	for i := range out {
		out[i] = &synthBucket{c: c, idx: i, name: string(rune('a' + i)), overlay: map[string][]byte{}}
	}
	return out
}

func (b *synthBucket) Name() string { return b.name }

// parse splits a slot key, <prefix>/<star>/<epoch>/<slot>.
func (b *synthBucket) parse(key string) (ep, slot uint64, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || parts[len(parts)-3] != b.c.star {
		return 0, 0, false
	}
	ep, err1 := strconv.ParseUint(parts[len(parts)-2], 10, 64)
	slot, err2 := strconv.ParseUint(parts[len(parts)-1], 10, 64)
	return ep, slot, err1 == nil && err2 == nil
}

// object returns what the bucket holds at key.
func (b *synthBucket) object(key string) ([]byte, bool) {
	b.mu.Lock()
	d, ok := b.overlay[key]
	b.mu.Unlock()
	if ok {
		return d, true
	}
	ep, slot, ok := b.parse(key)
	if !ok || slot >= b.c.n+b.c.end.Load() {
		return nil, false
	}
	if row, ok := b.c.tail[slot]; ok && strings.Fields(row)[b.idx] != "F" {
		return nil, false
	}
	return wire.EncodeFlight(b.c.star, ep, slot, b.c.payload), true
}

func (b *synthBucket) opErr(op, key string, err error) error {
	return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
}

func (b *synthBucket) Create(ctx context.Context, key string, data []byte) error {
	b.creates.Add(1)
	if _, ok := b.object(key); ok {
		return b.opErr("create", key, objstore.ErrExists)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.overlay[key]; ok {
		return b.opErr("create", key, objstore.ErrExists)
	}
	b.overlay[key] = append([]byte(nil), data...)
	return nil
}

func (b *synthBucket) Get(ctx context.Context, key string) ([]byte, error) {
	b.reads.Add(1)
	b.c.end.Add(b.c.grow)
	d, ok := b.object(key)
	if !ok {
		return nil, b.opErr("get", key, objstore.ErrNotFound)
	}
	return append([]byte(nil), d...), nil
}

func (b *synthBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.reads.Add(1)
	b.c.end.Add(b.c.grow)
	d, ok := b.object(key)
	if !ok {
		return nil, b.opErr("getrange", key, objstore.ErrNotFound)
	}
	if off >= int64(len(d)) {
		return []byte{}, nil
	}
	return append([]byte(nil), d[off:off+min(n, int64(len(d))-off)]...), nil
}

func (b *synthBucket) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.overlay, key)
	return nil
}

// List is not used by the fencer; the synthetic chain lists nothing.
func (b *synthBucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	return nil, nil
}

// fenceSynth fences a fresh epoch of n synthetic slots (K=3, W=2, window
// 64) with opts and returns the report and the requests the buckets saw.
func fenceSynth(tb testing.TB, m *epoch.Minter, n uint64, opts Options) (Report, int64, int64) {
	tb.Helper()
	c := &synthChain{star: star, n: n, tail: raggedTail(n), payload: []byte("a record of modest size")}
	zs := newSynthZones(c, 3)
	zones := chain.Zones{}
	var names []string
	for _, z := range zs {
		zones[z.name] = z
		names = append(names, z.name)
	}
	ctx := context.Background()
	rec, err := m.Mint(ctx, star, epoch.Constants{Class: "standard", Buckets: names, W: 2, Window: 64, Prefix: "chains"})
	require.NoError(tb, err)
	f, err := New(m, zones, opts)
	require.NoError(tb, err)
	rep, err := f.FenceReport(ctx, star, rec.Epoch)
	require.NoError(tb, err)
	require.Equal(tb, n-2, rep.Cut)
	var reads, creates int64
	for _, z := range zs {
		reads += z.reads.Load()
		creates += z.creates.Load()
	}
	return rep, reads, creates
}

var fenceStrategies = []struct {
	name string
	opts Options
}{
	{"default", Options{}},
	{"literal", Options{Fanout: 1, Span: 1}}, // doubling + binary search, one slot per round
}

// BenchmarkFence fences epochs of 10, 1,000 and 1,000,000 slots (K=3, W=2,
// window 64, a ragged pipelined tail) with the default options and with
// the literal algorithm (doubling, binary search, one slot at a time), reporting sequential round trips and
// object requests per fence. Round trips are what a fence costs on real
// object storage (tens of milliseconds each); they do not depend on the
// machine.
func BenchmarkFence(b *testing.B) {
	for _, n := range []uint64{10, 1_000, 1_000_000} {
		for _, s := range fenceStrategies {
			b.Run(fmt.Sprintf("N=%d/%s", n, s.name), func(b *testing.B) {
				m, err := epoch.NewMinter(metamem.New(metamem.Options{}), epoch.Options{})
				require.NoError(b, err)
				var rounds, reads, creates int64
				for b.Loop() {
					rep, r, c := fenceSynth(b, m, n, s.opts)
					rounds += int64(rep.Rounds)
					reads += r
					creates += c
				}
				b.ReportMetric(float64(rounds)/float64(b.N), "rounds/op")
				b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
				b.ReportMetric(float64(creates)/float64(b.N), "creates/op")
			})
		}
	}
}

// TestFenceRoundTripsAtMillion: fencing an epoch of a million slots takes
// at most 20 sequential round trips with the default options. Round trips
// and requests are counted, not timed.
func TestFenceRoundTripsAtMillion(t *testing.T) {
	m, err := epoch.NewMinter(metamem.New(metamem.Options{}), epoch.Options{})
	require.NoError(t, err)
	for _, s := range fenceStrategies {
		rep, reads, creates := fenceSynth(t, m, 1_000_000, s.opts)
		require.Equal(t, rep.Reads, reads, "the report counts every read")
		require.Equal(t, rep.Creates, creates, "the report counts every create")
		t.Logf("%s: %d round trips, %d reads, %d creates (estimate %d, walk from %d, cut %d)",
			s.name, rep.Rounds, reads, creates, rep.Estimate, rep.WalkStart, rep.Cut)
		if s.name == "default" {
			require.LessOrEqual(t, rep.Rounds, 20, "sequential round trips")
			require.LessOrEqual(t, reads, int64(1000), "reads: the probes, two spans and the frontier, of 3 million objects")
			require.Equal(t, int64(2+2), creates, "one repair copy pair for the half-written slot, B=2 poison at the cut")
		}
	}
}

// TestBarrierStopsARunawayWriter: a writer that appends faster than the
// walk reads (every read request of the fencer lets it commit two more
// slots) is never caught by the walk alone: the walk only ever sees
// committed slots. The walk kills a slot ahead of it (a barrier), and the
// cut is that slot.
func TestBarrierStopsARunawayWriter(t *testing.T) {
	m, err := epoch.NewMinter(metamem.New(metamem.Options{}), epoch.Options{})
	require.NoError(t, err)
	c := &synthChain{star: star, n: 100, payload: []byte("x"), grow: 2}
	zs := newSynthZones(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := m.Mint(ctx, star, epoch.Constants{Class: "standard", Buckets: []string{"a", "b", "c"}, W: 2, Window: 4, Prefix: "chains"})
	require.NoError(t, err)
	f, err := New(m, chain.Zones{"a": zs[0], "b": zs[1], "c": zs[2]}, Options{Identity: "successor"})
	require.NoError(t, err)
	rep, err := f.FenceReport(ctx, star, rec.Epoch)
	require.NoError(t, err, "the fence ends although the writer never stops")
	require.Equal(t, 1, rep.Barriers)
	require.Less(t, rep.BarrierAttempts, 20)
	var barrier int
	for _, z := range zs {
		d, ok := z.object(wire.Keys{Prefix: "chains"}.Slot(star, rec.Epoch, rep.Cut))
		require.True(t, ok)
		obj, err := wire.Decode(d)
		require.NoError(t, err)
		if obj.Kind == wire.KindPoison && string(obj.Body) == "successor"+BarrierSuffix {
			barrier++
		}
	}
	require.Equal(t, 2, barrier, "the cut is the barrier: B=2 barrier poisons")
	t.Logf("cut %d after %d round trips, %d barrier attempts; the writer had reached %d", rep.Cut, rep.Rounds, rep.BarrierAttempts, c.n+c.end.Load())
}
