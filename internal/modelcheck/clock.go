package modelcheck

import (
	"time"

	"github.com/cutline/cutline/clock"
)

// epochStart is the time every execution's clock reads: records stamped
// with it (MintedAt, FencedAt) are the same in every execution, so that
// they fingerprint alike.
var epochStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// instant is the clock of every party: its time stands still and its
// timers fire at once. A backoff therefore ends immediately, and the
// retry it delays becomes one more pending request, which the scheduler
// may hold as long as it likes: every ordering a real delay could produce
// is still explored, and no execution ever waits on time.
type instant struct{}

var _ clock.Clock = instant{}

func (instant) Now() time.Time { return epochStart }

func (instant) NewTimer(time.Duration) clock.Timer {
	c := make(chan time.Time, 1)
	c <- epochStart
	return firedTimer{c: c}
}

func (instant) AfterFunc(_ time.Duration, f func()) clock.Timer {
	go f()
	return firedTimer{}
}

// firedTimer is a timer that has already fired.
type firedTimer struct{ c chan time.Time }

func (t firedTimer) C() <-chan time.Time { return t.c }
func (firedTimer) Stop() bool            { return false }
