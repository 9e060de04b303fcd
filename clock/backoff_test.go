package clock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
)

const ms = time.Millisecond

func TestBackoffDelay(t *testing.T) {
	cases := []struct {
		b       clock.Backoff
		attempt int
		ceil    time.Duration // d: the delay lies in [d/2, d)
		fixed   bool          // the delay is exactly ceil
	}{
		{clock.Backoff{Min: 25 * ms, Max: time.Second}, 0, 25 * ms, false},
		{clock.Backoff{Min: 25 * ms, Max: time.Second}, 1, 50 * ms, false},
		{clock.Backoff{Min: 25 * ms, Max: time.Second}, 5, 800 * ms, false},
		{clock.Backoff{Min: 25 * ms, Max: time.Second}, 6, time.Second, false},
		{clock.Backoff{Min: 25 * ms, Max: time.Second}, 1 << 40, time.Second, false},
		{clock.Backoff{Min: 25 * ms, Max: time.Second}, -3, 25 * ms, false},
		{clock.Backoff{}, 0, clock.DefaultMinBackoff, false},
		{clock.Backoff{}, 30, clock.DefaultMaxBackoff, false},
		{clock.Backoff{Min: 5 * time.Second}, 30, 5 * time.Second, true},
		{clock.Backoff{Max: 4 * ms}, 0, 4 * ms, true},
		{clock.Backoff{Min: 50 * ms, Max: 50 * ms}, 0, 50 * ms, true},
		{clock.Backoff{Min: 50 * ms, Max: 50 * ms}, 9, 50 * ms, true},
		{clock.Backoff{Min: 1, Max: 1}, 5, 1, true},
		{clock.Backoff{Min: time.Hour, Max: time.Minute}, 3, time.Minute, true},       // unvalidated: capped at Max
		{clock.Backoff{Min: 1 << 62, Max: 1<<62 + 1}, 100, 1<<62 + 1, false},          // no overflow
		{clock.Backoff{Min: 1, Max: time.Duration(1<<63 - 1)}, 200, 1<<63 - 1, false}, // no overflow
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v/%d", tc.b, tc.attempt), func(t *testing.T) {
			lo, hi := tc.ceil, time.Duration(0)
			for seed := range uint64(200) {
				d := tc.b.Delay(tc.attempt, seed)
				if d != tc.b.Delay(tc.attempt, seed) {
					t.Fatalf("Delay(%d, %d) is not reproducible", tc.attempt, seed)
				}
				switch {
				case tc.fixed && d != tc.ceil:
					t.Fatalf("Delay(%d, %d) = %v, want exactly %v", tc.attempt, seed, d, tc.ceil)
				case !tc.fixed && (d < tc.ceil/2 || d >= tc.ceil):
					t.Fatalf("Delay(%d, %d) = %v, want in [%v, %v)", tc.attempt, seed, d, tc.ceil/2, tc.ceil)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			if !tc.fixed && lo == hi {
				t.Fatalf("200 seeds all gave %v: not jittered", lo)
			}
		})
	}
}

func TestBackoffSeedsSpread(t *testing.T) {
	b := clock.Backoff{Min: time.Second, Max: time.Minute}
	seen := map[time.Duration]bool{}
	for slot := range uint64(10) {
		for bucket := range uint64(3) {
			seen[b.Delay(2, clock.Seed(7, slot, bucket))] = true
		}
	}
	if len(seen) < 25 {
		t.Fatalf("30 (slot, bucket) seeds gave %d distinct delays", len(seen))
	}
	if clock.Seed(1, 2) == clock.Seed(2, 1) {
		t.Fatal("Seed ignores the order of its parts")
	}
}

func TestBackoffValidate(t *testing.T) {
	cases := []struct {
		b     clock.Backoff
		field string // "" when valid
	}{
		{clock.Backoff{}, ""},
		{clock.Backoff{Min: time.Second}, ""},
		{clock.Backoff{Max: time.Millisecond}, ""},
		{clock.Backoff{Min: time.Second, Max: time.Second}, ""},
		{clock.Backoff{Min: clock.MaxBackoff, Max: clock.MaxBackoff}, ""},
		{clock.Backoff{Min: -1}, "Backoff.Min"},
		{clock.Backoff{Max: -1}, "Backoff.Max"},
		{clock.Backoff{Min: clock.MaxBackoff + 1}, "Backoff.Min"},
		{clock.Backoff{Max: clock.MaxBackoff + 1}, "Backoff.Max"},
		{clock.Backoff{Min: time.Second, Max: time.Millisecond}, "Backoff.Max"},
	}
	for _, tc := range cases {
		err := tc.b.Validate("Backoff")
		var be *cutline.ConfigError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tc.b, err)
		case tc.field != "" && !errors.As(err, &be):
			t.Errorf("%+v: got %v, want a *cutline.ConfigError", tc.b, err)
		case tc.field != "" && be.Field != tc.field:
			t.Errorf("%+v: error names %q, want %q", tc.b, be.Field, tc.field)
		}
	}
}

func TestBackoffOr(t *testing.T) {
	def := clock.Backoff{Min: 50 * ms, Max: 50 * ms}
	cases := []struct{ b, want clock.Backoff }{
		{clock.Backoff{}, def},
		{clock.Backoff{Min: 10 * ms}, clock.Backoff{Min: 10 * ms, Max: 50 * ms}},
		{clock.Backoff{Min: time.Second}, clock.Backoff{Min: time.Second, Max: time.Second}},
		{clock.Backoff{Max: time.Second}, clock.Backoff{Min: 50 * ms, Max: time.Second}},
		{clock.Backoff{Max: 5 * ms}, clock.Backoff{Min: 5 * ms, Max: 5 * ms}},
		{clock.Backoff{Min: 1, Max: 2}, clock.Backoff{Min: 1, Max: 2}},
	}
	for _, tc := range cases {
		if got := tc.b.Or(def); got != tc.want {
			t.Errorf("%+v.Or(%+v) = %+v, want %+v", tc.b, def, got, tc.want)
		}
	}
}

func TestBackoffSleep(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	b := clock.Backoff{Min: time.Second, Max: time.Second}
	done := make(chan error, 1)
	go func() { done <- b.Sleep(context.Background(), fake, 3, 0) }()
	fake.BlockUntil(1)
	fake.Advance(time.Second - 1)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before its delay", err)
	default:
	}
	fake.Advance(1)
	if err := <-done; err != nil {
		t.Fatalf("Sleep: %v", err)
	}
}

func TestBackoffSleepCanceled(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- clock.Backoff{Min: time.Minute, Max: time.Hour}.Sleep(ctx, fake, 0, 1) }()
	fake.BlockUntil(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel = %v, want context.Canceled", err)
	}
	if n := fake.Waiters(); n != 0 {
		t.Fatalf("%d timers left pending after a canceled Sleep", n)
	}
}
