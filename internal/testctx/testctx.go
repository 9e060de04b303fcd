// Package testctx holds contexts for tests.
//
// It is an internal package, not part of cutlinetest, so that a package's
// internal tests (package fence, say) can import it too.
package testctx

import (
	"context"
	"sync"
)

// Expiring is a context whose deadline a test triggers by hand: Expire
// makes it done with context.DeadlineExceeded. It lets a test end an
// operation exactly when the operation is blocked (on a clock.Fake, say),
// without racing a timer. It has no Deadline and carries no values.
type Expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

// NewExpiring returns a live Expiring context.
func NewExpiring() *Expiring {
	return &Expiring{Context: context.Background(), done: make(chan struct{})}
}

// Done is closed by Expire.
func (c *Expiring) Done() <-chan struct{} { return c.done }

// Err returns nil until Expire, then context.DeadlineExceeded.
func (c *Expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Expire ends the context. Later calls do nothing.
func (c *Expiring) Expire() { c.once.Do(func() { close(c.done) }) }
