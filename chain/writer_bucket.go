package chain

import (
	"errors"
	"sync"
	"time"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/objstore"
)

// vote is one bucket's final answer for a slot.
type vote int

const (
	voteNone     vote = iota // no answer yet (or the slot no longer needs one)
	voteCopy                 // the bucket holds the writer's flight
	votePoison               // the bucket holds poison
	voteNeither              // the bucket holds an object that is neither
	voteConflict             // the bucket holds another well-formed flight for the slot
)

func headerLen(star string) int { return wire.Header{Star: star}.Len() }

// bucketJob is one slot's flight for one bucket.
type bucketJob struct {
	f    *Future
	key  string
	data []byte
}

// bucketQueue hands a bucket's jobs to its workers. A worker takes the
// next job whenever it finishes one, so a worker woken once serves every
// slot that became ready meanwhile; a job finding no worker on its way
// wakes a parked one or starts one, so that no job waits behind another
// slot's request (a bucket's requests still run in parallel, bounded by
// the bucket's in-flight tokens as before). A worker parks when the queue
// is empty, at most maxParked per bucket (the others exit), and every
// worker exits once the writer is closing and the queue is empty: an idle
// writer sends nothing, and Close and Abort wait for the workers
// (life.wg).
type bucketQueue struct {
	mu      sync.Mutex
	cond    sync.Cond   // parked workers wait here; L is &mu
	jobs    []bucketJob // waiting, from head
	head    int
	workers int  // running
	parked  int  // waiting on cond, not yet woken
	waking  int  // woken or started, not yet back at the queue
	closing bool // set by Close and Abort: a worker finding no job exits
}

// maxParked is how many idle workers a bucket keeps.
const maxParked = 4

// push queues job for bucket i and makes sure a worker is on its way.
//
// A bucket whose workers fall behind (starved of CPU, say, while the
// others keep up) would queue a job, and its flight, for every slot the
// others acknowledge meanwhile. So once its queue holds twice the window,
// push drops the queued jobs of slots already decided: they were only to
// give the bucket its extra copy (W copies make a slot durable), and
// memory then follows the window, not the lag.
func (w *Writer) push(i int, job bucketJob) {
	q := &w.pipe.queues[i]
	q.mu.Lock()
	if len(q.jobs)-q.head >= 2*w.rec.Constants.Window {
		w.dropDecidedLocked(q)
	}
	q.jobs = append(q.jobs, job)
	if q.waking == 0 {
		w.wakeLocked(i)
	}
	q.mu.Unlock()
}

// wakeLocked wakes a parked worker of bucket i, or starts one. q.mu is
// held, and a queued job holds a count of life.wg, so the Add below never
// races the Wait of Close.
func (w *Writer) wakeLocked(i int) {
	q := &w.pipe.queues[i]
	q.waking++
	if q.parked > 0 {
		q.parked--
		q.cond.Signal()
		return
	}
	q.workers++
	w.life.wg.Add(1)
	go w.bucketWorker(i)
}

// bucketWorker runs bucket i's jobs until the queue is empty and it is
// not kept parked.
func (w *Writer) bucketWorker(i int) {
	defer w.life.wg.Done()
	q := &w.pipe.queues[i]
	q.mu.Lock()
	q.waking--
	for {
		for q.head == len(q.jobs) {
			if q.closing || q.parked >= maxParked {
				q.workers--
				q.mu.Unlock()
				return
			}
			q.parked++
			q.cond.Wait()
			q.waking-- // whoever woke this worker counted it waking
		}
		job := q.pop()
		if q.head < len(q.jobs) && q.waking == 0 {
			// More jobs wait and this worker is about to block on a
			// request: hand them to another.
			w.wakeLocked(i)
		}
		q.mu.Unlock()
		w.runBucket(job.f, i, job.key, job.data)
		q.mu.Lock()
	}
}

// dropDecidedLocked removes from q the jobs of slots already decided,
// keeping the order of the others. q.mu is held.
func (w *Writer) dropDecidedLocked(q *bucketQueue) {
	kept := q.jobs[:0]
	for _, job := range q.jobs[q.head:] {
		if job.f.state.Load() == slotPending {
			kept = append(kept, job)
			continue
		}
		w.stats.skipped.Add(1)
		w.life.wg.Done() // the job's count, taken by Submit
	}
	clear(q.jobs[len(kept):])
	q.jobs, q.head = kept, 0
}

// pop takes the next job; q.mu is held and the queue is not empty.
func (q *bucketQueue) pop() bucketJob {
	job := q.jobs[q.head]
	q.jobs[q.head] = bucketJob{}
	q.head++
	switch {
	case q.head == len(q.jobs):
		q.jobs, q.head = q.jobs[:0], 0
	case q.head >= 64 && 2*q.head >= len(q.jobs):
		n := copy(q.jobs, q.jobs[q.head:])
		clear(q.jobs[n:])
		q.jobs, q.head = q.jobs[:n], 0
	}
	return job
}

// close makes the bucket's workers exit once the queue is empty.
func (q *bucketQueue) close() {
	q.mu.Lock()
	q.closing = true
	q.waking += q.parked
	q.parked = 0
	q.cond.Broadcast()
	q.mu.Unlock()
}

// runBucket writes f's flight (data, at key) to bucket i until the bucket's answer is
// known, the slot is decided without it, or the writer is aborted. A Create
// whose outcome is unknown is retried with backoff; a Create that finds an
// object (ErrExists) reads it, which also settles "my earlier attempt
// landed but its answer was lost".
func (w *Writer) runBucket(f *Future, i int, key string, data []byte) {
	defer w.life.wg.Done()
	b := w.buckets[i]
	for attempt := 0; ; attempt++ {
		// The first attempt is made even when the slot was committed by
		// faster buckets: every bucket should get its copy. Retries stop
		// once the slot is decided, and nothing is sent for a slot that is
		// dead, blocked or abandoned (above a halt point, or by Abort).
		if st := f.state.Load(); w.life.ctx.Err() != nil || (st != slotPending && (attempt > 0 || st != slotCommitted)) {
			if attempt == 0 {
				w.stats.skipped.Add(1)
			}
			return
		}
		if !w.acquire(f, i) {
			w.stats.skipped.Add(1)
			return
		}
		w.stats.creates.Add(1)
		if attempt > 0 {
			w.stats.createRetries.Add(1)
		}
		err := b.Create(w.life.ctx, key, data)
		<-w.pipe.inflight[i]
		switch {
		case err == nil:
			w.stats.copies.Add(1)
			w.vote(f, voteCopy, nil)
			return
		case errors.Is(err, objstore.ErrExists):
			if (planted.On(planted.LostCreateCounted) && attempt > 0) || planted.On(planted.ReadBackSkipped) {
				w.vote(f, voteCopy, nil) // planted: not read back
				return
			}
			v, cause := w.readExisting(f, i, key, data)
			if v != voteNone {
				w.vote(f, v, cause)
				return
			}
			// The object vanished (or the slot no longer needs this
			// bucket): go round and create again if still needed.
		default:
			if w.life.ctx.Err() != nil {
				return
			}
			if f.pending() {
				w.log.Debug("create failed; retrying", "bucket", b.Name(), "slot", f.slot, "attempt", attempt, "err", err)
			}
		}
		if !w.backoff(f, i, attempt) {
			return
		}
	}
}

// acquire takes one of bucket i's in-flight tokens. It gives up when the
// slot is decided or the writer is aborted while waiting.
func (w *Writer) acquire(f *Future, i int) bool {
	select {
	case w.pipe.inflight[i] <- struct{}{}:
		return true
	default:
	}
	select {
	case w.pipe.inflight[i] <- struct{}{}:
		return true
	case <-f.decidedCh():
		return false
	case <-w.life.ctx.Done():
		return false
	}
}

// readExisting reads the object a Create collided with and classifies it.
// It returns voteNone when the object is gone or the slot got decided
// while the bucket was unreachable.
func (w *Writer) readExisting(f *Future, i int, key string, data []byte) (vote, error) {
	b := w.buckets[i]
	s := wire.Addr{Keys: w.keys, Star: w.star, Epoch: w.epoch, Slot: f.slot}
	for attempt := 0; ; attempt++ {
		if !f.pending() || w.life.ctx.Err() != nil {
			return voteNone, nil
		}
		w.stats.existsReads.Add(1)
		if attempt > 0 {
			w.stats.readRetries.Add(1)
		}
		o := wire.ObserveObject(w.life.ctx, b, s)
		switch o.State {
		case wire.SlotFlight:
			if o.SameFlight(data) {
				w.stats.copies.Add(1)
				w.stats.repairCopies.Add(1)
				return voteCopy, nil
			}
			w.stats.foreign.Add(1)
			err := &wire.ObjectError{Bucket: b.Name(), Key: key, Reason: "a well-formed flight for this slot with other bytes", Err: ErrConflictingFlight}
			w.log.Error("conflicting flight: another writer wrote this epoch", "err", err)
			return voteConflict, err
		case wire.SlotPoison:
			w.stats.poisons.Add(1)
			return votePoison, nil
		case wire.SlotForeign:
			w.stats.foreign.Add(1)
			w.log.Warn("foreign object in slot", "err", o.Err)
			return voteNeither, o.Err
		case wire.SlotEmpty:
			return voteNone, nil
		}
		// Unreachable: the object exists but could not be read; retry.
		if w.life.ctx.Err() != nil {
			return voteNone, nil
		}
		w.log.Debug("read after exists failed; retrying", "bucket", b.Name(), "slot", f.slot, "attempt", attempt, "err", o.Err)
		if !w.backoff(f, i, attempt) {
			return voteNone, nil
		}
	}
}

// vote counts bucket answers and decides the slot: committed at W copies,
// dead at B poisons, blocked when all K have answered and neither
// quorum was reached. Both quorums cannot be reached: W + B = K + 1.
func (w *Writer) vote(f *Future, v vote, cause error) {
	switch v {
	case voteCopy:
		need := w.w
		if planted.On(planted.AckBelowQuorum) && need > 1 {
			need-- // planted: committed at W−1
		}
		if f.copies.Add(1) == need && f.decide(slotCommitted) {
			if planted.On(planted.AckOutOfOrder) {
				w.ackNow(f) // planted: before the slots below it
			}
			w.onCommit()
		}
	case votePoison:
		if f.poisons.Add(1) == w.b && f.decide(slotDead) {
			w.onDead(f)
		}
	case voteNeither:
		f.addForeign(cause)
	case voteConflict:
		// Another writer wrote this epoch: the writer halts here rather
		// than count the slot either way.
		if f.decide(slotConflict) {
			w.onConflict(f, cause)
		}
		return
	}
	if f.votes.Add(1) == w.k && f.copies.Load() < w.w && f.poisons.Load() < w.b && f.decide(slotBlocked) {
		w.onBlocked(f)
	}
}

// backoff waits before the next attempt at bucket i for f. It returns false
// when the slot got decided or the writer was aborted meanwhile.
func (w *Writer) backoff(f *Future, i, attempt int) bool {
	if !f.pending() {
		return false
	}
	t := w.clock.NewTimer(w.backoffDelay(f.slot, i, attempt))
	defer t.Stop()
	select {
	case <-t.C():
		return f.pending()
	case <-f.decidedCh():
		return false
	case <-w.life.ctx.Done():
		return false
	}
}

// backoffDelay is the wait before attempt at bucket for slot, jittered by
// the writer's seed, the slot, the bucket and the attempt: reproducible and
// lock-free.
func (w *Writer) backoffDelay(slot uint64, bucket, attempt int) time.Duration {
	return w.opts.Backoff.Delay(attempt, clock.Seed(w.seed, slot, uint64(bucket)))
}
