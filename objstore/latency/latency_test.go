package latency_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/objstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformanceNoLatency(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return latency.Wrap(memblob.New("zone-a"), latency.Options{})
	})
}

// TestConformanceTinyLatency runs the suite with real (microsecond) delays,
// so calls overlap in time as they do against a remote bucket.
func TestConformanceTinyLatency(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return latency.Wrap(memblob.New("zone-a"), latency.Options{
			Seed:    1,
			Default: latency.Uniform(0, 20*time.Microsecond),
		})
	})
}

func TestWaitsOnInjectedClock(t *testing.T) {
	ctx := t.Context()
	fake := clock.NewFake(time.Unix(0, 0))
	inner := memblob.New("zone-a")
	b := latency.Wrap(inner, latency.Options{Clock: fake, Create: latency.Fixed(10 * time.Millisecond)})

	done := make(chan error, 1)
	go func() { done <- b.Create(ctx, "k", []byte("v")) }()
	fake.BlockUntil(1)
	require.Equal(t, 0, inner.Len(), "the call has not reached the bucket yet")
	next, ok := fake.Next()
	require.True(t, ok)
	require.Equal(t, time.Unix(0, 0).Add(10*time.Millisecond), next)
	fake.Advance(9 * time.Millisecond)
	require.Equal(t, 1, fake.Waiters())
	fake.Advance(time.Millisecond)
	require.NoError(t, <-done)
	require.Equal(t, 1, inner.Len())

	// Operations without a distribution are immediate.
	got, err := b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(got))
}

func TestCanceledDuringWait(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	inner := memblob.New("zone-a")
	b := latency.Wrap(inner, latency.Options{Clock: fake, Default: latency.Fixed(time.Hour)})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Create(ctx, "k", []byte("v")) }()
	fake.BlockUntil(1)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	var op *objstore.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "create", op.Op)
	require.Equal(t, 0, inner.Len(), "a call canceled during its delay has no effect")
	require.Equal(t, 0, fake.Waiters(), "its timer is stopped")

	// Already done: no wait at all, and invalid keys are refused at once.
	_, err = b.Get(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.List(t.Context(), "/bad", "", 1)
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	require.Equal(t, 0, fake.Waiters())
}

func TestPerOperationUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		b := latency.Wrap(memblob.New("zone-a"), latency.Options{
			Default: latency.Fixed(time.Millisecond),
			Create:  latency.Fixed(20 * time.Millisecond),
			List:    latency.Fixed(0),
		})
		took := func(f func()) time.Duration {
			start := time.Now()
			f()
			return time.Since(start)
		}
		require.Equal(t, 20*time.Millisecond, took(func() { require.NoError(t, b.Create(ctx, "k", nil)) }))
		require.Equal(t, time.Millisecond, took(func() { _, _ = b.Get(ctx, "k") }))
		require.Equal(t, time.Millisecond, took(func() { _, _ = b.GetRange(ctx, "k", 0, 1) }))
		require.Equal(t, time.Millisecond, took(func() { require.NoError(t, b.Delete(ctx, "k")) }))
		require.Equal(t, time.Duration(0), took(func() { _, _ = b.List(ctx, "", "", 1) }))

		// Concurrent calls overlap: ten creates take one delay, not ten.
		require.Equal(t, 20*time.Millisecond, took(func() {
			errs := make(chan error, 10)
			for i := range 10 {
				go func() { errs <- b.Create(ctx, fmt.Sprintf("c/%d", i), nil) }()
			}
			for range 10 {
				require.NoError(t, <-errs)
			}
		}))
	})
}

func TestDistributions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	require.Equal(t, 5*time.Millisecond, latency.Fixed(5*time.Millisecond).Sample(r))

	u := latency.Uniform(3*time.Millisecond, time.Millisecond) // bounds in either order
	var sum time.Duration
	const n = 20000
	for range n {
		d := u.Sample(r)
		require.GreaterOrEqual(t, d, time.Millisecond)
		require.LessOrEqual(t, d, 3*time.Millisecond)
		sum += d
	}
	require.InDelta(t, float64(2*time.Millisecond), float64(sum/n), float64(50*time.Microsecond))
	require.Equal(t, 4*time.Millisecond, latency.Uniform(4*time.Millisecond, 4*time.Millisecond).Sample(r))
	for _, u := range []latency.Dist{
		latency.Uniform(math.MinInt64, math.MaxInt64),
		latency.Uniform(-time.Second, time.Second),
		latency.Uniform(0, math.MaxInt64),
	} {
		for range 100 {
			_ = u.Sample(r) // no overflow panic
		}
	}

	norm := latency.Normal(10*time.Millisecond, 2*time.Millisecond)
	sum = 0
	for range n {
		d := norm.Sample(r)
		require.GreaterOrEqual(t, d, time.Duration(0))
		sum += d
	}
	require.InDelta(t, float64(10*time.Millisecond), float64(sum/n), float64(100*time.Microsecond))
	wide := latency.Normal(time.Millisecond, 10*time.Millisecond)
	for range 1000 {
		require.GreaterOrEqual(t, wide.Sample(r), time.Duration(0), "cut off at zero")
	}
}

// TestLogNormal: the long-tailed distribution has the median and 99th
// percentile it was given, a tail past p99 (one draw in a hundred), and
// degenerate parameters give a fixed latency.
func TestLogNormal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	d := latency.LogNormal(8*time.Millisecond, 40*time.Millisecond)
	const n = 200_000
	draws := make([]time.Duration, n)
	for i := range draws {
		draws[i] = d.Sample(r)
		require.Positive(t, draws[i])
	}
	slices.Sort(draws)
	require.InEpsilon(t, float64(8*time.Millisecond), float64(draws[n/2]), 0.02, "p50 %v", draws[n/2])
	require.InEpsilon(t, float64(40*time.Millisecond), float64(draws[n*99/100]), 0.05, "p99 %v", draws[n*99/100])
	require.Greater(t, draws[n-1], 80*time.Millisecond, "a long tail past p99")

	require.Equal(t, 5*time.Millisecond, latency.LogNormal(5*time.Millisecond, 5*time.Millisecond).Sample(r), "p99 = p50: fixed")
	require.Equal(t, 5*time.Millisecond, latency.LogNormal(5*time.Millisecond, time.Millisecond).Sample(r), "p99 < p50: fixed at p50")
	require.Equal(t, time.Duration(0), latency.LogNormal(0, time.Second).Sample(r), "no median: no delay")
	huge := latency.LogNormal(time.Duration(math.MaxInt64/2), time.Duration(math.MaxInt64))
	for range 1000 {
		require.Positive(t, huge.Sample(r), "no overflow")
	}
}

func TestSeeded(t *testing.T) {
	draw := func(seed uint64) []time.Duration {
		fake := clock.NewFake(time.Unix(0, 0))
		b := latency.Wrap(memblob.New("zone-a"), latency.Options{Clock: fake, Seed: seed, Default: latency.Uniform(0, time.Second)})
		var out []time.Duration
		for i := range 5 {
			done := make(chan error, 1)
			go func() { done <- b.Create(t.Context(), fmt.Sprintf("k%d", i), nil) }()
			fake.BlockUntil(1)
			next, _ := fake.Next()
			out = append(out, next.Sub(fake.Now()))
			fake.Advance(time.Second)
			require.NoError(t, <-done)
		}
		return out
	}
	require.Equal(t, draw(9), draw(9))
	require.NotEqual(t, draw(9), draw(10))
}

func Example() {
	ctx := context.Background()
	fake := clock.NewFake(time.Unix(0, 0))
	zone := latency.Wrap(memblob.New("zone-a"), latency.Options{
		Clock:  fake,
		Create: latency.Fixed(8 * time.Millisecond),
	})

	done := make(chan error)
	go func() { done <- zone.Create(ctx, "p/s/1/0", []byte("flight")) }()
	fake.BlockUntil(1) // the create is waiting out its latency
	fake.Advance(8 * time.Millisecond)
	fmt.Println("created:", <-done)
	// Output:
	// created: <nil>
}
