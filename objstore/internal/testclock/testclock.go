// Package testclock holds test clocks for the object-store backends'
// tests (objstore/s3, objstore/gcs), which need a retry's backoff to run
// without waiting and want to count the waits it asked for.
//
// clock.Fake does not fit there: it moves only when a test advances it,
// while the backends' retries wait inside a single blocking call.
package testclock

import (
	"slices"
	"sync"
	"time"

	"github.com/cutline/cutline/clock"
)

// Instant is a clock.Clock whose timers fire at once: each NewTimer or
// AfterFunc moves Now forward by its duration, fires, and records the wait
// asked of it (see Waits), so backoff runs without any waiting. The zero
// value is ready to use and reads the zero time; an Instant is safe for
// concurrent use.
type Instant struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

var _ clock.Clock = (*Instant)(nil)

// Now returns the sum of the waits so far, after the zero time.
func (c *Instant) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer records d, moves Now by d, and returns a timer that has fired:
// its channel already holds the new Now.
func (c *Instant) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return firedTimer{ch}
}

// AfterFunc records d, moves Now by d, and calls f in its own goroutine at
// once. The timer it returns has fired: its C is nil, as for any AfterFunc
// timer, and Stop reports false.
func (c *Instant) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.NewTimer(d)
	go f()
	return firedTimer{}
}

// Waits returns the durations asked of NewTimer and AfterFunc, in order.
func (c *Instant) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

type firedTimer struct{ ch chan time.Time }

func (t firedTimer) C() <-chan time.Time { return t.ch }
func (firedTimer) Stop() bool            { return false }
