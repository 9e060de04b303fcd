// Package failfast bounds the waits of tests, so that a test whose code
// under test is broken (a planted variant, say) fails within seconds with
// a message naming what it waited for, instead of hanging until the test
// binary's timeout and reporting nothing but that.
//
// A call taking a context needs nothing from here: give it a context with
// a deadline (Bound). A test waits on a channel with Recv, and on a fake
// clock with Timers or BlockUntil (clock.Fake.BlockUntil has no bound).
package failfast

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline/clock"
)

// Bound is how long a test waits for something that takes milliseconds
// when the code is right: long enough for a loaded machine running the
// race detector, short enough that a run of a package's tests with
// -failfast under a planted variant ends well within a minute.
const Bound = 10 * time.Second

// ErrNotWaiting: the code under test did not wait on the fake clock as
// the test expected, before the test's context ended. The error is a
// *ClockError.
var ErrNotWaiting = errors.New("failfast: nothing waits on the fake clock")

// ClockError says how many timers a test waited for on a fake clock and
// how many were pending when it gave up.
type ClockError struct {
	Want, Pending int
	// Err is the context's error.
	Err error
}

func (e *ClockError) Error() string {
	return fmt.Sprintf("failfast: waited for %d timers pending on the fake clock, %d are: %v", e.Want, e.Pending, e.Err)
}

func (e *ClockError) Unwrap() []error { return []error{ErrNotWaiting, e.Err} }

// far is beyond any test's advance of a fake clock.
const far = time.Duration(1 << 62)

// BlockUntil waits until at least n timers are pending on clk, as
// clk.BlockUntil does, or until ctx ends, which it reports as a
// *ClockError. It leaves no goroutine behind either way.
func BlockUntil(ctx context.Context, clk *clock.Fake, n int) error {
	reached := make(chan struct{})
	go func() {
		clk.BlockUntil(n)
		close(reached)
	}()
	select {
	case <-reached:
		return nil
	case <-ctx.Done():
	}
	// The waiter returns once n timers are pending: make them, far in the
	// future, and stop them once it has.
	pending := clk.Waiters()
	timers := make([]clock.Timer, n)
	for i := range timers {
		timers[i] = clk.NewTimer(far)
	}
	<-reached
	for _, t := range timers {
		t.Stop()
	}
	return &ClockError{Want: n, Pending: pending, Err: ctx.Err()}
}

// Timers waits until at least n timers are pending on clk, at most Bound,
// and fails t with what it waited for when they are not. Call it from the
// test's goroutine.
func Timers(t testing.TB, clk *clock.Fake, n int, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Bound)
	defer cancel()
	if err := BlockUntil(ctx, clk, n); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Recv receives from ch, waiting at most Bound, and fails t with what it
// waited for when nothing comes. Call it from the test's goroutine.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Bound)
	defer cancel()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
	var zero T
	return zero
}
