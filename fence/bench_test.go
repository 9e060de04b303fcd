package fence

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/synth"
	"github.com/cutline/cutline/metastore/memstore"
)

// fenceSynth fences a fresh epoch of n synthetic slots (K=3, W=2, window
// 64) with opts and returns the report and the requests the buckets saw.
func fenceSynth(tb testing.TB, m *epoch.Minter, n uint64, opts Options) (Report, int64, int64) {
	tb.Helper()
	c := &synth.Chain{Star: star, N: n, Tail: synth.RaggedTail(n), Payload: []byte("a record of modest size")}
	zs := synth.NewZones(c, 3)
	zones := chain.Zones{}
	var names []string
	for _, z := range zs {
		zones[z.Name()] = z
		names = append(names, z.Name())
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
		reads += z.Reads()
		creates += z.Creates()
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
				m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
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
// at most 16 sequential round trips with the default options. Round trips
// and requests are counted, not timed.
func TestFenceRoundTripsAtMillion(t *testing.T) {
	m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	require.NoError(t, err)
	for _, s := range fenceStrategies {
		rep, reads, creates := fenceSynth(t, m, 1_000_000, s.opts)
		require.Equal(t, rep.Reads, reads, "the report counts every read")
		require.Equal(t, rep.Creates, creates, "the report counts every create")
		t.Logf("%s: %d round trips, %d reads, %d creates (estimate %d, walk from %d, cut %d)",
			s.name, rep.Rounds, reads, creates, rep.Estimate, rep.WalkStart, rep.Cut)
		if s.name == "default" {
			require.LessOrEqual(t, rep.Rounds, 16, "sequential round trips")
			require.LessOrEqual(t, reads, int64(500), "reads: the probes, the estimate's neighbourhood and one span, of 3 million objects")
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
	m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	require.NoError(t, err)
	c := &synth.Chain{Star: star, N: 100, Payload: []byte("x"), Grow: 2}
	zs := synth.NewZones(c, 3)
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
		d, err := z.Get(ctx, wire.Keys{Prefix: "chains"}.Slot(star, rec.Epoch, rep.Cut))
		require.NoError(t, err)
		obj, err := wire.Decode(d)
		require.NoError(t, err)
		if obj.Kind == wire.KindPoison && string(obj.Body) == "successor"+BarrierSuffix {
			barrier++
		}
	}
	require.Equal(t, 2, barrier, "the cut is the barrier: B=2 barrier poisons")
	t.Logf("cut %d after %d round trips, %d barrier attempts; the writer had reached %d", rep.Cut, rep.Rounds, rep.BarrierAttempts, c.End())
}
