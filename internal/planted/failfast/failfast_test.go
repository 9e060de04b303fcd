package failfast_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/internal/testctx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBlockUntilReached(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
	defer cancel()
	fired := make(chan time.Time, 1)
	go func() { fired <- <-clk.NewTimer(time.Second).C() }()
	if err := failfast.BlockUntil(ctx, clk, 1); err != nil {
		t.Fatalf("a timer is pending: %v", err)
	}
	clk.Advance(time.Second)
	select {
	case <-fired:
	case <-ctx.Done():
		t.Fatal("the timer did not fire")
	}
}

// Nothing ever waits on the clock: the wait ends with the context, with
// an error that says so, and no goroutine or timer is left behind.
func TestBlockUntilGivesUp(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	ctx := testctx.NewExpiring()
	ctx.Expire()
	err := failfast.BlockUntil(ctx, clk, 2)
	var ce *failfast.ClockError
	if !errors.As(err, &ce) || ce.Want != 2 || ce.Pending != 0 {
		t.Fatalf("got %v, want a *ClockError for 2 timers, 0 pending", err)
	}
	if !errors.Is(err, failfast.ErrNotWaiting) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: want ErrNotWaiting and the context's error", err)
	}
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("%d timers left pending", n)
	}
}

func TestTimersAndRecv(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	fired := make(chan time.Time, 1)
	go func() { fired <- <-clk.NewTimer(time.Minute).C() }()
	failfast.Timers(t, clk, 1, "the timer")
	clk.Advance(time.Minute)
	if at := failfast.Recv(t, fired, "the timer to fire"); !at.Equal(time.Unix(60, 0)) {
		t.Fatalf("fired at %v, want at 60 s", at)
	}
}
