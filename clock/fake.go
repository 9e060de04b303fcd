package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. The zero value is not usable;
// call NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the set of timers changes
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

type fakeTimer struct {
	f    *Fake
	at   time.Time
	seq  int
	ch   chan time.Time
	fn   func()
	done bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.f.remove(t)
	return true
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer implements Clock.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(d, make(chan time.Time, 1), nil)
}

// AfterFunc implements Clock.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(d, nil, fn)
}

func (f *Fake) add(d time.Duration, ch chan time.Time, fn func()) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	t := &fakeTimer{f: f, at: f.now.Add(d), seq: f.seq, ch: ch, fn: fn}
	if d <= 0 {
		t.done = true
		f.fire(t)
		return t
	}
	f.timers = append(f.timers, t)
	f.notify()
	return t
}

// fire delivers t; f.mu is held.
func (f *Fake) fire(t *fakeTimer) {
	if t.ch != nil {
		t.ch <- f.now
	}
	if t.fn != nil {
		go t.fn()
	}
}

func (f *Fake) remove(t *fakeTimer) {
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			break
		}
	}
	f.notify()
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the clock forward by d, firing every timer that comes due, in
// order of their deadlines.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		sort.SliceStable(f.timers, func(i, j int) bool {
			if f.timers[i].at.Equal(f.timers[j].at) {
				return f.timers[i].seq < f.timers[j].seq
			}
			return f.timers[i].at.Before(f.timers[j].at)
		})
		if len(f.timers) == 0 || f.timers[0].at.After(end) {
			break
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		if t.at.After(f.now) {
			f.now = t.at
		}
		t.done = true
		f.fire(t)
	}
	f.now = end
	f.notify()
}

// Waiters reports how many timers are pending.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Next returns the deadline of the earliest pending timer, and false when no
// timer is pending.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var min time.Time
	for i, t := range f.timers {
		if i == 0 || t.at.Before(min) {
			min = t.at
		}
	}
	return min, len(f.timers) > 0
}

// BlockUntil blocks until at least n timers are pending: the usual way for a
// test to know that the code under test is now waiting on the clock.
func (f *Fake) BlockUntil(n int) {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return
		}
		ch := f.changed
		f.mu.Unlock()
		<-ch
	}
}
