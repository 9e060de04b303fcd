package latency

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// Dist is a latency distribution.
type Dist interface {
	// Sample draws one latency using r. A result ≤ 0 means no delay.
	Sample(r *rand.Rand) time.Duration
}

// Fixed is the same latency every time.
func Fixed(d time.Duration) Dist { return fixed(d) }

type fixed time.Duration

func (f fixed) Sample(*rand.Rand) time.Duration { return time.Duration(f) }

// Uniform draws latencies uniformly from [lo, hi].
func Uniform(lo, hi time.Duration) Dist {
	if hi < lo {
		lo, hi = hi, lo
	}
	return uniform{lo: lo, hi: hi}
}

type uniform struct{ lo, hi time.Duration }

func (u uniform) Sample(r *rand.Rand) time.Duration {
	// Unsigned arithmetic: hi-lo may not fit an int64.
	span := uint64(u.hi) - uint64(u.lo)
	if span == math.MaxUint64 {
		return time.Duration(r.Uint64())
	}
	return u.lo + time.Duration(r.Uint64N(span+1))
}

// Normal draws latencies from a normal distribution with the given mean and
// standard deviation, cut off at zero.
func Normal(mean, stddev time.Duration) Dist { return normal{mean: mean, stddev: stddev} }

type normal struct{ mean, stddev time.Duration }

func (n normal) Sample(r *rand.Rand) time.Duration {
	return max(0, n.mean+time.Duration(r.NormFloat64()*float64(n.stddev)))
}

// LogNormal draws long-tailed latencies from a lognormal distribution
// with the given median (p50) and 99th percentile, as measured object
// stores show: most requests near the median, one in a hundred past p99.
// A p99 at or below the median gives the median every time.
func LogNormal(p50, p99 time.Duration) Dist {
	if p50 <= 0 {
		return fixed(0)
	}
	if p99 <= p50 {
		return fixed(p50)
	}
	return logNormal{mu: math.Log(float64(p50)), sigma: math.Log(float64(p99)/float64(p50)) / z99}
}

// z99 is the standard normal distribution's 99th percentile.
const z99 = 2.3263478740408408

type logNormal struct{ mu, sigma float64 }

func (l logNormal) Sample(r *rand.Rand) time.Duration {
	d := math.Exp(l.mu + l.sigma*r.NormFloat64())
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// Options sets the latency of each operation. A nil Dist falls back to
// Default; a nil Default means no delay.
type Options struct {
	// Clock is what the delays wait on; nil means the real clock. Pass a
	// clock.Fake, or run under testing/synctest, to test without sleeping.
	Clock clock.Clock
	// Seed seeds the generator the distributions draw from.
	Seed uint64

	Default  Dist
	Create   Dist
	Get      Dist
	GetRange Dist
	Delete   Dist
	List     Dist
}

// Bucket delays every call to an inner objstore.Bucket. It is safe for
// concurrent use.
type Bucket struct {
	inner objstore.Bucket
	clk   clock.Clock
	dists map[string]Dist

	mu  sync.Mutex
	rng *rand.Rand
}

var _ objstore.Bucket = (*Bucket)(nil)

// Wrap returns b with the latencies of opts.
func Wrap(b objstore.Bucket, opts Options) *Bucket {
	or := func(d Dist) Dist {
		if d == nil {
			return opts.Default
		}
		return d
	}
	return &Bucket{
		inner: b,
		clk:   clock.Or(opts.Clock),
		rng:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0xda942042e4dd58b5)),
		dists: map[string]Dist{
			"create":   or(opts.Create),
			"get":      or(opts.Get),
			"getrange": or(opts.GetRange),
			"delete":   or(opts.Delete),
			"list":     or(opts.List),
		},
	}
}

// Inner returns the wrapped bucket.
func (b *Bucket) Inner() objstore.Bucket { return b.inner }

// Name implements objstore.Bucket: the inner bucket's name.
func (b *Bucket) Name() string { return b.inner.Name() }

// wait validates the key, then waits the operation's latency. A done
// context ends the wait at once with the context's error; the call then
// never reaches the inner bucket.
func (b *Bucket) wait(ctx context.Context, op, key string) error {
	check := objstore.ValidateKey
	if op == "list" {
		check = objstore.ValidatePrefix
	}
	if err := check(key); err != nil {
		return &objstore.OpError{Op: op, Bucket: b.inner.Name(), Key: key, Err: err}
	}
	var d time.Duration
	if dist := b.dists[op]; dist != nil {
		b.mu.Lock()
		d = dist.Sample(b.rng)
		b.mu.Unlock()
	}
	if err := clock.Sleep(ctx, b.clk, d); err != nil {
		return &objstore.OpError{Op: op, Bucket: b.inner.Name(), Key: key, Err: err}
	}
	return nil
}

// Create implements objstore.Bucket.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	if err := b.wait(ctx, "create", key); err != nil {
		return err
	}
	return b.inner.Create(ctx, key, data)
}

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := b.wait(ctx, "get", key); err != nil {
		return nil, err
	}
	return b.inner.Get(ctx, key)
}

// GetRange implements objstore.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := b.wait(ctx, "getrange", key); err != nil {
		return nil, err
	}
	return b.inner.GetRange(ctx, key, offset, length)
}

// Delete implements objstore.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.wait(ctx, "delete", key); err != nil {
		return err
	}
	return b.inner.Delete(ctx, key)
}

// List implements objstore.Bucket.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	if err := b.wait(ctx, "list", prefix); err != nil {
		return nil, err
	}
	return b.inner.List(ctx, prefix, startAfter, limit)
}
