package chain

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Position is a flight's place in a star's chain: its epoch and slot.
// Positions of one star are totally ordered, epoch first.
type Position struct {
	Epoch uint64
	Slot  uint64
}

// Compare returns -1, 0 or +1 as p is before, equal to or after q.
func (p Position) Compare(q Position) int {
	if c := cmp.Compare(p.Epoch, q.Epoch); c != 0 {
		return c
	}
	return cmp.Compare(p.Slot, q.Slot)
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool { return p.Compare(q) < 0 }

// String formats p as epoch/slot.
func (p Position) String() string { return fmt.Sprintf("%d/%d", p.Epoch, p.Slot) }

// Decision states of a slot.
const (
	slotPending int32 = iota
	slotCommitted
	slotDead
	slotBlocked
	slotConflict  // another writer's flight found at the slot
	slotAbandoned // above a halt point, or aborted: no more attempts
)

// Future is the pending outcome of one Submit: what this layer adds is the
// slot in one epoch (Slot, known at once), decided when that slot and
// every lower one are (the position Wait returns). It never leaves its
// epoch: an append its epoch's fence cut off fails here, and moving it to
// the next epoch is roll.Future's part. Its methods are safe for
// concurrent use.
type Future struct {
	w    *Writer
	slot uint64

	// pos and err are written once, before isDone is set.
	pos      Position
	err      error
	resolved bool // guarded by w.mu
	isDone   atomic.Bool

	state   atomic.Int32
	copies  atomic.Int32
	poisons atomic.Int32
	votes   atomic.Int32 // buckets that answered copy, poison or neither

	mu        sync.Mutex    // guards data, decided, foreign, done and waiter
	data      []byte        // the encoded flight; dropped once acknowledged
	decided   chan struct{} // made on demand; closed once state leaves pending
	foreign   []error
	closedDec bool
	// done is made on demand (Done, or a second concurrent Wait) and
	// closed by resolve; a lone Wait parks on waiter instead, a channel
	// lent by the writer's pool, so that the common path makes none.
	done   chan struct{}
	waiter chan struct{}
}

// Slot returns the slot assigned to this append.
func (f *Future) Slot() uint64 { return f.slot }

// Payload returns the payload submitted (a view of the encoded flight; do
// not modify it) until the append is acknowledged; after a successful
// acknowledgement it returns nil, because the writer drops the flight then
// to keep its memory bounded by the window. A host rolling to a new epoch
// republishes the payloads of the futures that failed with ErrFenced.
func (f *Future) Payload() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.data == nil {
		return nil
	}
	return f.data[headerLen(f.w.star):]
}

func (f *Future) dropPayload() {
	f.mu.Lock()
	f.data = nil
	f.mu.Unlock()
}

// Done is closed when the append is acknowledged or has failed.
func (f *Future) Done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		f.done = make(chan struct{})
		if f.isDone.Load() {
			close(f.done)
		}
	}
	return f.done
}

// Result returns the outcome once Done is closed: the acknowledged position,
// or the error (*FencedError, *NoQuorumError or *AbortedError). Before
// that it returns ErrPending.
func (f *Future) Result() (Position, error) {
	if f.isDone.Load() {
		return f.pos, f.err
	}
	return Position{}, ErrPending
}

// Wait blocks until the append is decided or ctx ends. A ctx that ends only
// stops the wait: the slot keeps going and may still be acknowledged.
func (f *Future) Wait(ctx context.Context) (Position, error) {
	if f.isDone.Load() {
		return f.pos, f.err
	}
	pool := &f.w.waiters
	f.mu.Lock()
	if f.isDone.Load() {
		f.mu.Unlock()
		return f.pos, f.err
	}
	if f.waiter != nil {
		// Another Wait holds the waiter: wait on the done channel.
		f.mu.Unlock()
		select {
		case <-f.Done():
			return f.pos, f.err
		case <-ctx.Done():
			return Position{}, ctx.Err()
		}
	}
	ch, _ := pool.Get().(chan struct{})
	if ch == nil {
		ch = make(chan struct{}, 1)
	}
	f.waiter = ch
	f.mu.Unlock()
	select {
	case <-ch:
		// resolve sent the one token and took ch back from f.
		pool.Put(ch)
		return f.pos, f.err
	case <-ctx.Done():
	}
	f.mu.Lock()
	if f.waiter == ch {
		f.waiter = nil
		f.mu.Unlock()
	} else {
		// resolve came first: its token is in ch.
		f.mu.Unlock()
		<-ch
	}
	pool.Put(ch)
	if f.isDone.Load() {
		return f.pos, f.err
	}
	return Position{}, ctx.Err()
}

// decide moves the slot out of pending. Only the first decision counts; it
// reports whether this call made it.
func (f *Future) decide(s int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.state.CompareAndSwap(slotPending, s) {
		return false
	}
	if f.decided != nil && !f.closedDec {
		close(f.decided)
		f.closedDec = true
	}
	return true
}

// decidedCh returns a channel closed once the slot is decided. It is made
// only by the bucket workers that need to wait (backoff, bucket bound), so
// the common path allocates nothing for it.
func (f *Future) decidedCh() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.decided == nil {
		f.decided = make(chan struct{})
		if f.state.Load() != slotPending {
			close(f.decided)
			f.closedDec = true
		}
	}
	return f.decided
}

func (f *Future) pending() bool { return f.state.Load() == slotPending }

func (f *Future) addForeign(err error) {
	f.mu.Lock()
	f.foreign = append(f.foreign, err)
	f.mu.Unlock()
}

func (f *Future) foreignErrs() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.foreign...)
}

// resolve delivers the outcome; w.mu is held.
func (f *Future) resolve(pos Position, err error) {
	if f.resolved {
		return
	}
	f.resolved = true
	f.pos, f.err = pos, err
	f.mu.Lock()
	f.isDone.Store(true)
	if f.done != nil {
		close(f.done)
	}
	if f.waiter != nil {
		f.waiter <- struct{}{} // never blocks: the waiter's buffer is empty
		f.waiter = nil
	}
	f.mu.Unlock()
}
