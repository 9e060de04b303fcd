// Package clock is the time source that every timer in cutline goes through.
//
// Library code never calls time.Now, time.After or time.Sleep directly: it takes
// a Clock in its options (nil means Real). Tests pass a *Fake and move time by
// hand, so retry backoff, session TTLs, deadlines and health windows are tested
// without sleeping. Code under testing/synctest may use Real: inside a bubble the
// standard library's time is already virtual.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single-shot timer made by a Clock.
type Timer interface {
	// C delivers the fire time. It is nil for timers made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped the
	// timer (false if it had already fired or been stopped).
	Stop() bool
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

// Or returns c, or Real when c is nil: the rule every options struct applies.
func Or(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Sleep waits for d on c, or until ctx is done, whichever comes first. It
// returns ctx.Err() when the context ended the wait.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
