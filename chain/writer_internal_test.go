package chain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
)

func TestSlotKeyMatchesKeys(t *testing.T) {
	for _, k := range []wire.Keys{{}, {Prefix: "p"}, {Prefix: "a/b.c"}} {
		w := &Writer{keyPrefix: k.Epoch("star-a", 12)}
		for _, s := range []uint64{0, 1, 9, 10, 12345, 1 << 40, 1<<63 + 5, ^uint64(0)} {
			require.Equal(t, k.Slot("star-a", 12, s), string(w.appendSlotKey(nil, s)))
		}
		// Keys made in the shared buffer stay what they were as it
		// fills up and is replaced.
		var made []string
		for s := range uint64(3*keySlab + 5) {
			made = append(made, w.slotKeyLocked(s))
		}
		for s, key := range made {
			require.Equal(t, k.Slot("star-a", 12, uint64(s)), key)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	w := &Writer{opts: WriterOptions{Backoff: clock.Backoff{Min: 10 * time.Millisecond, Max: time.Second}}, seed: 7}
	for attempt := range 20 {
		d := min(10*time.Millisecond<<attempt, time.Second)
		for slot := range uint64(50) {
			got := w.backoffDelay(slot, attempt%3, attempt)
			require.GreaterOrEqual(t, got, d/2)
			require.Less(t, got, d)
		}
	}
	require.Equal(t, w.backoffDelay(3, 1, 2), w.backoffDelay(3, 1, 2), "reproducible")
	w.opts.Backoff = clock.Backoff{Min: 1, Max: 1}
	require.Equal(t, time.Duration(1), w.backoffDelay(0, 0, 5))
}

// TestLaggingBucketQueueBounded: a bucket whose workers fall behind gets
// a job for every slot the others acknowledge; once its queue holds twice
// the window, push drops the jobs of decided slots (each counted skipped,
// its share of the writer's wait group given back) and keeps the pending
// ones in order, so memory follows the window and not the lag.
func TestLaggingBucketQueueBounded(t *testing.T) {
	const window = 4
	w := &Writer{rec: &epoch.Record{Constants: epoch.Constants{Window: window}}}
	w.pipe.queues = make([]bucketQueue, 1)
	q := &w.pipe.queues[0]
	q.cond.L = &q.mu
	q.waking = 1 // a worker is on its way: push starts none
	futures := make([]*Future, 0, 100)
	for s := range uint64(100) {
		f := &Future{slot: s}
		if s%10 != 9 {
			f.state.Store(slotCommitted) // acknowledged by the other buckets
		}
		futures = append(futures, f)
		w.life.wg.Add(1)
		w.push(0, bucketJob{f: f})
		require.LessOrEqual(t, len(q.jobs)-q.head, 2*window+window, "slot %d", s)
	}
	var pending []uint64
	for _, job := range q.jobs[q.head:] {
		if job.f.state.Load() == slotPending {
			pending = append(pending, job.f.slot)
		}
	}
	require.Equal(t, []uint64{9, 19, 29, 39, 49, 59, 69, 79, 89, 99}, pending, "pending jobs kept, in order")
	left := uint64(len(q.jobs) - q.head)
	require.Equal(t, 100-left, w.stats.skipped.Load(), "every dropped job counted")
	for range left {
		w.life.wg.Done() // the workers would run the rest
	}
	w.life.wg.Wait() // every dropped job gave its count back
}
