package clock

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline"
)

// Bounds and defaults of a Backoff.
const (
	// MaxBackoff bounds Backoff.Min and Backoff.Max in every options struct
	// that takes a Backoff.
	MaxBackoff = 10 * time.Minute
	// DefaultMinBackoff and DefaultMaxBackoff are what a zero Backoff.Min
	// and Backoff.Max mean, unless the options struct documents otherwise.
	DefaultMinBackoff = 10 * time.Millisecond
	DefaultMaxBackoff = time.Second
)

// Backoff is cutline's retry policy: jittered exponential backoff between
// attempts, timed on an injected Clock. Before attempt n (0 for the first
// retry) it waits a delay in [d/2, d), where d is Min doubled n times and
// capped at Max. When Min equals Max the delay is fixed: exactly Min.
//
// The jitter is a hash of the attempt and a seed the caller picks, so that
// a delay is reproducible and needs no shared random source: key the seed
// on whatever should spread out (a writer, a slot, a bucket; see Seed).
//
// A zero field means its default: Min DefaultMinBackoff (at most Max),
// Max DefaultMaxBackoff (at least Min); see Or. A Backoff is a value and
// safe for concurrent use.
type Backoff struct {
	Min, Max time.Duration
}

// Validate reports a *cutline.ConfigError naming field+".Min" or field+".Max" when
// either is negative or above MaxBackoff, or when both are set and Max is
// below Min. Zero fields are valid: they mean defaults.
func (b Backoff) Validate(field string) error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Min", b.Min}, {"Max", b.Max}} {
		if f.v < 0 || f.v > MaxBackoff {
			return &cutline.ConfigError{Field: field + "." + f.name, Value: f.v,
				Reason: fmt.Sprintf("must satisfy 0 ≤ %s ≤ %v (0 means the default)", f.name, MaxBackoff)}
		}
	}
	if b.Min > 0 && b.Max > 0 && b.Max < b.Min {
		return &cutline.ConfigError{Field: field + ".Max", Value: b.Max, Reason: fmt.Sprintf("below Min %v", b.Min)}
	}
	return nil
}

// Or returns b with each zero field taken from def: a zero Min becomes
// def.Min (lowered to b.Max when that is set and smaller), a zero Max
// becomes def.Max (raised to the resulting Min when that is larger). An
// options struct with its own defaults applies them this way.
func (b Backoff) Or(def Backoff) Backoff {
	if b.Min == 0 {
		b.Min = def.Min
		if b.Max > 0 {
			b.Min = min(b.Min, b.Max)
		}
	}
	if b.Max == 0 {
		b.Max = max(def.Max, b.Min)
	}
	return b
}

// Delay returns the wait before attempt (0 for the first retry), jittered
// by seed: in [d/2, d) for d = Min·2^attempt capped at Max, or exactly Min
// when Min equals Max. Zero fields take the defaults (see Or); a negative
// attempt counts as 0. It never overflows, whatever the fields hold.
func (b Backoff) Delay(attempt int, seed uint64) time.Duration {
	b = b.Or(Backoff{Min: DefaultMinBackoff, Max: DefaultMaxBackoff})
	if b.Min <= 0 || b.Max <= 0 {
		return 0
	}
	d := min(b.Min, b.Max)
	for n := 0; n < attempt && d < b.Max; n++ {
		if d > b.Max/2 {
			d = b.Max
			break
		}
		d *= 2
	}
	if b.Min >= b.Max || d < 2 {
		return d
	}
	half := d / 2
	x := mix(seed ^ uint64(max(attempt, 0))<<32)
	return half + time.Duration(x%uint64(half))
}

// Sleep waits Delay(attempt, seed) on c, or until ctx is done. It returns
// ctx.Err() when the context ended the wait.
func (b Backoff) Sleep(ctx context.Context, c Clock, attempt int, seed uint64) error {
	return Sleep(ctx, c, b.Delay(attempt, seed))
}

// Seed combines values into a jitter seed for Delay: callers that retry
// several things at once (slots, buckets) key each one's jitter on them, so
// that their retries spread out.
func Seed(parts ...uint64) uint64 {
	var s uint64
	for _, p := range parts {
		s = mix(s ^ p)
	}
	return s
}

// mix is splitmix64's finalizer: a cheap bijection that spreads every input
// bit over the output.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
