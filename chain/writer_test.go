package chain_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
)

// submitAll submits n payloads (payload(0..n-1)) and returns the futures.
func submitAll(t *testing.T, w *chain.Writer, n int) []*chain.Future {
	t.Helper()
	fs := make([]*chain.Future, n)
	for i := range n {
		f, err := w.Submit(context.Background(), payload(i))
		require.NoError(t, err)
		require.Equal(t, uint64(i), f.Slot())
		fs[i] = f
	}
	return fs
}

// submitUntilHalt submits up to n payloads and stops early when the
// writer has halted (a halt may be found before all are submitted); it
// requires the halt not to come before slot min.
func submitUntilHalt(t *testing.T, w *chain.Writer, n int, min uint64) []*chain.Future {
	t.Helper()
	var fs []*chain.Future
	for i := range n {
		f, err := w.Submit(context.Background(), payload(i))
		if err != nil {
			require.Equal(t, w.Err(), err)
			require.Greater(t, uint64(i), min)
			break
		}
		fs = append(fs, f)
	}
	return fs
}

func requireAcked(t *testing.T, rec *epoch.Record, fs []*chain.Future) {
	t.Helper()
	for _, f := range fs {
		pos, err := f.Wait(context.Background())
		require.NoError(t, err, "slot %d", f.Slot())
		require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: f.Slot()}, pos)
	}
}

func requireFenced(t *testing.T, fs []*chain.Future, dead uint64) {
	t.Helper()
	for _, f := range fs {
		_, err := f.Wait(context.Background())
		require.ErrorIs(t, err, chain.ErrFenced, "slot %d", f.Slot())
		var fe *chain.FencedError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, dead, fe.Slot, "slot %d", f.Slot())
		require.Equal(t, payload(int(f.Slot())), f.Payload(), "a failed future keeps its payload for a roll")
	}
}

func TestAppendCommitsAndReads(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	w := e.writer(rec, chain.WriterOptions{})
	for i := range 20 {
		pos, err := w.Append(context.Background(), payload(i))
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: uint64(i)}, pos)
	}
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, uint64(20), w.Released())
	require.NoError(t, w.Err())
	st := w.Stats()
	require.Equal(t, uint64(20), st.Submitted)
	require.Equal(t, uint64(20), st.Released)
	// Every bucket gets every slot when nothing fails, except an attempt
	// skipped because its bucket had its bound of requests in flight and
	// the slot was already committed (rare: a starved scheduler).
	require.Equal(t, uint64(60), st.Creates+st.Skipped, "%+v", st)
	require.LessOrEqual(t, st.Skipped, uint64(20))
	require.Equal(t, st.Creates, st.Copies)
	require.Zero(t, st.CreateRetries)
	total := 0
	for _, b := range e.mems {
		total += b.Len()
	}
	require.Equal(t, int(st.Copies), total)
	// The stored objects are exactly the encoded flights.
	data, err := e.mems[1].Get(context.Background(), e.key(rec, 7))
	require.NoError(t, err)
	require.Equal(t, chain.EncodeFlight(star, rec.Epoch, 7, payload(7)), data)

	got, err := readAll(t, e.reader(), chain.Position{})
	require.NoError(t, err)
	require.Len(t, got, 20)
	for i, f := range got {
		require.Equal(t, payload(i), f.Payload)
	}
	_, err = w.Submit(context.Background(), []byte("late"))
	require.ErrorIs(t, err, chain.ErrClosed)
}

// Acknowledgements are delivered strictly in slot order even when buckets
// answer in random order.
func TestAcksInOrderUnderRandomLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3, func(i int, b objstore.Bucket) objstore.Bucket {
			return latency.Wrap(b, latency.Options{Seed: uint64(i), Create: latency.Uniform(0, 50*time.Millisecond), Default: latency.Uniform(0, 5*time.Millisecond)})
		})
		rec := e.mint(2, 16)
		w := e.writer(rec, chain.WriterOptions{})
		const n = 300
		var prev *chain.Future
		var wg sync.WaitGroup
		var lastReleased atomic.Uint64
		for i := range n {
			f, err := w.Submit(context.Background(), payload(i))
			require.NoError(t, err)
			p := f
			before := prev
			wg.Go(func() {
				<-p.Done()
				if before != nil {
					select {
					case <-before.Done():
					default:
						t.Errorf("slot %d acknowledged before slot %d", p.Slot(), before.Slot())
					}
				}
				pos, err := p.Result()
				assert.NoError(t, err)
				assert.Equal(t, p.Slot(), pos.Slot)
				r := w.Released()
				assert.Greater(t, r, p.Slot())
				for {
					old := lastReleased.Load()
					if r <= old || lastReleased.CompareAndSwap(old, r) {
						break
					}
				}
			})
			prev = f
		}
		wg.Wait()
		require.NoError(t, w.Close(context.Background()))
		require.Equal(t, uint64(n), w.Released())
		got, err := readAll(t, e.reader(), chain.Position{})
		require.NoError(t, err)
		require.Len(t, got, n)
		for i, f := range got {
			require.Equal(t, payload(i), f.Payload)
		}
	})
}

// Poison already holding B buckets of slot n: slot n and everything after
// fail with ErrFenced; everything before is acknowledged.
func TestPoisonedSlotNeverAcks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		k, w   int
		poison []int // buckets poisoned at the dead slot
	}{
		{"K3W2", 3, 2, []int{0, 1}},
		{"K3W2-other-pair", 3, 2, []int{1, 2}},
		{"K3W1-all", 3, 1, []int{0, 1, 2}},
		{"K5W3", 5, 3, []int{0, 2, 4}},
		{"K1W1", 1, 1, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const dead = 5
			e := newEnv(t, tc.k)
			rec := e.mint(tc.w, 4)
			for _, i := range tc.poison {
				e.poison(i, rec, dead)
			}
			w := e.writer(rec, chain.WriterOptions{})
			var fs []*chain.Future
			for i := 0; ; i++ {
				f, err := w.Submit(context.Background(), payload(i))
				if err != nil {
					require.ErrorIs(t, err, chain.ErrFenced)
					require.Greater(t, i, dead)
					break
				}
				fs = append(fs, f)
			}
			<-w.Halted()
			require.NoError(t, w.Close(context.Background()))
			requireAcked(t, rec, fs[:dead])
			requireFenced(t, fs[dead:], dead)
			require.Equal(t, uint64(dead), w.Released())
			var fe *chain.FencedError
			require.ErrorAs(t, w.Err(), &fe)
			require.Equal(t, chain.FencedError{Star: star, Epoch: rec.Epoch, Slot: dead}, *fe)
			require.GreaterOrEqual(t, w.Stats().Poisons, uint64(rec.Constants.B()))
		})
	}
}

// The fencer's poison lands while the writer's creates for the slot are in
// flight: the slot dies, nothing from it on is acknowledged.
func TestAppendRacingPoison(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	const dead = 3
	for _, i := range []int{0, 2} {
		i := i
		e.hooks[i].setCreate(func(ctx context.Context, key string, data []byte, next func() error) error {
			if slotOf(key) == dead {
				e.poison(i, rec, dead)
			}
			return next()
		})
	}
	w := e.writer(rec, chain.WriterOptions{})
	var fs []*chain.Future
	for i := range 6 {
		f, err := w.Submit(context.Background(), payload(i))
		if err != nil {
			require.ErrorIs(t, err, chain.ErrFenced) // the halt came first
			require.Greater(t, i, dead)
			break
		}
		fs = append(fs, f)
	}
	require.NoError(t, w.Close(context.Background()))
	requireAcked(t, rec, fs[:dead])
	requireFenced(t, fs[dead:], dead)
	_, err := w.Submit(context.Background(), payload(9))
	require.ErrorIs(t, err, chain.ErrFenced)
}

// Poison in fewer than B buckets does not stop a commit.
func TestPoisonBelowBlockingSetCommits(t *testing.T) {
	e := newEnv(t, 5)
	rec := e.mint(3, 8) // B = 3
	e.poison(0, rec, 2)
	e.poison(4, rec, 2)
	e.poison(3, rec, 4)
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 8)
	require.NoError(t, w.Close(context.Background()))
	requireAcked(t, rec, fs)
	require.NoError(t, w.Err())
	require.LessOrEqual(t, w.Stats().Poisons, uint64(3))
}

// A fencer's repair (identical flight bytes already in place) counts as a
// copy.
func TestRepairCopyCounts(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	flight := chain.EncodeFlight(star, rec.Epoch, 2, payload(2))
	e.put(0, rec, 2, flight)
	e.put(1, rec, 2, flight)
	e.poison(2, rec, 2) // the third bucket was poisoned: 2 copies + 1 poison commits
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 4)
	require.NoError(t, w.Close(context.Background()))
	requireAcked(t, rec, fs)
	st := w.Stats()
	require.Equal(t, uint64(2), st.RepairCopies)
	require.LessOrEqual(t, st.Poisons, uint64(1))
}

// Objects that are neither a valid flight nor poison count as neither; if
// the slot cannot be decided the writer halts naming them.
func TestForeignObjects(t *testing.T) {
	t.Run("one foreign object does not stop a commit", func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 8)
		e.put(1, rec, 1, []byte("not a flight"))
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitAll(t, w, 3)
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs)
		require.LessOrEqual(t, w.Stats().Foreign, uint64(1))
	})
	t.Run("blocked slot halts naming the objects", func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 8)
		const slot = 1
		e.put(0, rec, slot, []byte("garbage"))
		e.put(1, rec, slot, chain.EncodeFlight(star, rec.Epoch, 99, payload(1))) // misplaced
		e.poison(2, rec, slot)
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitUntilHalt(t, w, 3, slot)
		<-w.Halted()
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs[:slot])
		var ue *chain.BlockedError
		require.ErrorAs(t, w.Err(), &ue)
		require.Equal(t, uint64(slot), ue.Slot)
		require.Equal(t, 0, ue.Copies)
		require.Equal(t, 1, ue.Poisons)
		require.Len(t, ue.Objects, 2)
		require.ErrorIs(t, w.Err(), chain.ErrBlocked)
		require.ErrorIs(t, w.Err(), chain.ErrCorrupt)
		require.ErrorIs(t, w.Err(), chain.ErrMisplaced)
		require.NotErrorIs(t, w.Err(), chain.ErrFenced)
		var oe *chain.ObjectError
		require.ErrorAs(t, w.Err(), &oe)
		require.Contains(t, []string{"zone-a", "zone-b"}, oe.Bucket)
		require.Equal(t, e.key(rec, slot), oe.Key)
		for _, f := range fs[slot:] {
			_, err := f.Wait(context.Background())
			require.ErrorIs(t, err, chain.ErrBlocked)
		}
		_, err := w.Submit(context.Background(), payload(7))
		require.ErrorIs(t, err, chain.ErrBlocked)
	})
	t.Run("a different flight for the slot is a conflict", func(t *testing.T) {
		e := newEnv(t, 1)
		rec := e.mint(1, 4)
		e.put(0, rec, 0, chain.EncodeFlight(star, rec.Epoch, 0, []byte("someone else")))
		w := e.writer(rec, chain.WriterOptions{})
		f, err := w.Submit(context.Background(), payload(0))
		require.NoError(t, err)
		_, err = f.Wait(context.Background())
		require.ErrorIs(t, err, chain.ErrConflictingFlight)
		var ce *chain.ConflictError
		require.ErrorAs(t, err, &ce, "a conflict halts the writer as such, not as blocked")
		require.NoError(t, w.Close(context.Background()))
	})
}

// K=3, W=2: a whole zone down does not stop appends.
func TestZoneDownKeepsAppending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 8)
		e.faults[1].SetDown(true)
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitAll(t, w, 50)
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs)
		require.Zero(t, e.mems[1].Len())
		require.Zero(t, e.faults[1].Stats().Forwarded[fault.OpCreate])
		require.Equal(t, 50, e.faults[0].Stats().Calls[fault.OpCreate])
		got, err := readAll(t, e.reader(), chain.Position{})
		require.NoError(t, err)
		require.Len(t, got, 50)
	})
}

// Two zones down out of three: nothing can commit; the writer keeps
// retrying until Close gives up and Abort ends it; a zone coming back lets
// everything through.
func TestQuorumLostThenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 4)
		e.hooks[0].setCreate(down)
		e.hooks[1].setCreate(down)
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitAll(t, w, 4)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.ErrorIs(t, w.Close(ctx), context.DeadlineExceeded)
		for _, f := range fs {
			_, err := f.Result()
			require.ErrorIs(t, err, chain.ErrPending)
		}
		require.Greater(t, w.Stats().CreateRetries, uint64(8))
		e.hooks[1].setCreate(nil)
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs)
	})
}

// Transient errors are retried with backoff on the injected clock.
func TestTransientErrorsRetriedOnFakeClock(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	var fails atomic.Int32
	fails.Store(3)
	e.hooks[0].setCreate(func(ctx context.Context, key string, data []byte, next func() error) error {
		if fails.Add(-1) >= 0 {
			return objstore.Unavailable(errors.New("503"))
		}
		return next()
	})
	fake := clock.NewFake(time.Unix(1000, 0))
	w := e.writer(rec, chain.WriterOptions{Clock: fake, Backoff: clock.Backoff{Min: time.Second, Max: 4 * time.Second}})
	f, err := w.Submit(context.Background(), payload(0))
	require.NoError(t, err)
	for range 3 {
		fake.BlockUntil(1) // the writer waits on the clock, not on the wall
		select {
		case <-f.Done():
			t.Fatal("acknowledged before the retry")
		default:
		}
		fake.Advance(4 * time.Second)
	}
	pos, err := f.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(0), pos.Slot)
	st := w.Stats()
	require.Equal(t, uint64(4), st.Creates)
	require.Equal(t, uint64(3), st.CreateRetries)
	require.NoError(t, w.Close(context.Background()))
}

// A create that landed but whose answer was lost is retried, finds its own
// bytes (ErrExists) and counts them as the copy.
func TestLostAnswerResolvedByRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 8)
		for _, h := range e.hooks[:2] {
			h.setCreate(func(ctx context.Context, key string, data []byte, next func() error) error {
				if err := next(); err != nil {
					return err
				}
				if slotOf(key)%3 == 0 {
					return objstore.Unavailable(errors.New("connection reset after the write"))
				}
				return nil
			})
		}
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitAll(t, w, 12)
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs)
		st := w.Stats()
		require.Positive(t, st.RepairCopies)
		require.Equal(t, st.RepairCopies, st.ExistsReads)
		require.Zero(t, st.Poisons+st.Foreign)
	})
}

// A read after ErrExists that fails is retried until it answers.
func TestExistsReadRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1)
		rec := e.mint(1, 2)
		e.put(0, rec, 0, chain.EncodeFlight(star, rec.Epoch, 0, payload(0)))
		var fails atomic.Int32
		fails.Store(2)
		e.hooks[0].setRead(func(ctx context.Context, key string, next func() ([]byte, error)) ([]byte, error) {
			if fails.Add(-1) >= 0 {
				return nil, objstore.Unavailable(errors.New("timeout"))
			}
			return next()
		})
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitAll(t, w, 1)
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs)
		st := w.Stats()
		require.Equal(t, uint64(3), st.ExistsReads)
		require.Equal(t, uint64(2), st.ReadRetries)
		require.Equal(t, uint64(1), st.RepairCopies)
	})
}

// Never more than window slots are assigned past the release point.
func TestWindowBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 6
		e := newEnv(t, 3)
		rec := e.mint(2, window)
		var wp atomic.Pointer[chain.Writer]
		var maxAhead atomic.Uint64
		rng := rand.New(rand.NewPCG(3, 4))
		var mu sync.Mutex
		for _, h := range e.hooks {
			h.setCreate(func(ctx context.Context, key string, data []byte, next func() error) error {
				ahead := slotOf(key) - wp.Load().Released() + 1
				for {
					old := maxAhead.Load()
					if ahead <= old || maxAhead.CompareAndSwap(old, ahead) {
						break
					}
				}
				mu.Lock()
				d := time.Duration(rng.IntN(20)) * time.Millisecond
				mu.Unlock()
				time.Sleep(d)
				return next()
			})
		}
		w := e.writer(rec, chain.WriterOptions{})
		wp.Store(w)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 25 {
					_, err := w.Append(context.Background(), payload(g*1000+i))
					assert.NoError(t, err)
				}
			})
		}
		wg.Wait()
		require.NoError(t, w.Close(context.Background()))
		require.Equal(t, uint64(200), w.Released())
		require.LessOrEqual(t, maxAhead.Load(), uint64(window))
		require.Equal(t, uint64(window), maxAhead.Load(), "the pipeline should fill the window")
	})
}

// Submit blocks while the window is full, bounded by its ctx; a cancelled
// Submit assigns nothing.
func TestSubmitBlocksOnFullWindow(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 2)
	g := newGate()
	for _, h := range e.hooks {
		h.setCreate(g.hook(nil))
	}
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := w.Submit(ctx, payload(2))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, uint64(2), w.Stats().Submitted)

	third := make(chan *chain.Future)
	go func() {
		f, err := w.Submit(context.Background(), payload(2))
		assert.NoError(t, err)
		third <- f
	}()
	g.await(6)
	select {
	case <-third:
		t.Fatal("Submit did not wait for the window")
	default:
	}
	g.Open()
	f := <-third
	require.Equal(t, uint64(2), f.Slot())
	require.NoError(t, w.Close(context.Background()))
	requireAcked(t, rec, append(fs, f))
}

// A halted writer wakes Submits blocked on the full window.
func TestHaltWakesBlockedSubmit(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 2)
	e.poison(0, rec, 0)
	g := newGate()
	e.hooks[1].setCreate(g.hook(nil))
	e.hooks[2].setCreate(g.hook(nil))
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 2)
	errc := make(chan error)
	go func() {
		_, err := w.Submit(context.Background(), payload(2))
		errc <- err
	}()
	g.await(4)
	e.poison(1, rec, 0)
	g.Open()
	require.ErrorIs(t, <-errc, chain.ErrFenced)
	require.NoError(t, w.Close(context.Background()))
	requireFenced(t, fs, 0)
}

func TestSingleBucket(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 3)
	requireAcked(t, rec, fs)
	e.poison(0, rec, 3) // the next free slot: whoever wins it ends the epoch
	f, err := w.Submit(context.Background(), payload(3))
	require.NoError(t, err)
	_, err = f.Wait(context.Background())
	require.ErrorIs(t, err, chain.ErrFenced)
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, uint64(3), w.Released())
}

func TestAbort(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	g := newGate()
	for _, h := range e.hooks {
		h.setCreate(g.hook(func(key string) bool { return slotOf(key) >= 2 }))
	}
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 5)
	requireAcked(t, rec, fs[:2])
	g.await(9)
	w.Abort()
	for _, f := range fs[2:] {
		_, err := f.Wait(context.Background())
		require.ErrorIs(t, err, chain.ErrAborted)
		var ae *chain.AbortedError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, f.Slot(), ae.Slot)
		require.Equal(t, payload(int(f.Slot())), f.Payload())
	}
	_, err := w.Submit(context.Background(), payload(5))
	require.ErrorIs(t, err, chain.ErrClosed)
	w.Abort() // idempotent
	require.NoError(t, w.Close(context.Background()))
	require.NoError(t, w.Err())
}

func TestCloseWaitsForDecisions(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	g := newGate()
	for _, h := range e.hooks {
		h.setCreate(g.hook(nil))
	}
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 4)
	g.await(12)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, w.Close(ctx), context.Canceled)
	_, err := w.Submit(context.Background(), payload(4))
	require.ErrorIs(t, err, chain.ErrClosed)
	for _, f := range fs {
		select {
		case <-f.Done():
			t.Fatal("decided before the buckets answered")
		default:
		}
	}
	g.Open()
	require.NoError(t, w.Close(context.Background()))
	requireAcked(t, rec, fs)
	require.Equal(t, uint64(12), w.Stats().Copies, "Close waits for every bucket's attempt")
}

// Slots below the dead slot keep going: if they commit they are
// acknowledged; if one of them is dead too, the halt point moves down.
func TestHaltPointMovesDown(t *testing.T) {
	for _, lowerDies := range []bool{false, true} {
		t.Run(map[bool]string{false: "lower commits", true: "lower dies"}[lowerDies], func(t *testing.T) {
			e := newEnv(t, 3)
			rec := e.mint(2, 8)
			g := newGate()
			for _, h := range e.hooks {
				h.setCreate(g.hook(func(key string) bool { return slotOf(key) == 2 }))
			}
			e.poison(0, rec, 4)
			e.poison(2, rec, 4)
			w := e.writer(rec, chain.WriterOptions{})
			fs := submitUntilHalt(t, w, 7, 4)
			<-w.Halted()
			requireFenced(t, fs[4:], 4)
			requireAcked(t, rec, fs[:2])
			select {
			case <-fs[3].Done():
				t.Fatal("slot 3 acknowledged while slot 2 is undecided")
			default:
			}
			if lowerDies {
				e.poison(1, rec, 2)
				e.poison(2, rec, 2)
			}
			g.Open()
			require.NoError(t, w.Close(context.Background()))
			if lowerDies {
				requireFenced(t, fs[2:4], 2)
				require.Equal(t, uint64(2), w.Err().(*chain.FencedError).Slot)
				require.Equal(t, uint64(2), w.Released())
			} else {
				requireAcked(t, rec, fs[:4])
				require.Equal(t, uint64(4), w.Err().(*chain.FencedError).Slot)
				require.Equal(t, uint64(4), w.Released())
			}
		})
	}
}

func TestPayloadTooLarge(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	w := e.writer(rec, chain.WriterOptions{})
	_, err := w.Submit(context.Background(), make([]byte, chain.MaxPayload+1))
	require.ErrorIs(t, err, chain.ErrPayloadTooLarge)
	var pe *chain.PayloadError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, chain.MaxPayload+1, pe.Size)
	require.Zero(t, w.Stats().Submitted)
	pos, err := w.Append(context.Background(), nil) // empty payloads are fine
	require.NoError(t, err)
	require.Equal(t, uint64(0), pos.Slot)
	require.NoError(t, w.Close(context.Background()))
}

func TestWaitContext(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	g := newGate()
	e.hooks[0].setCreate(g.hook(nil))
	w := e.writer(rec, chain.WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := w.Append(ctx, payload(0))
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, w.Stats().Submitted, "a done context assigns nothing")

	wctx, wcancel := context.WithCancel(context.Background())
	f, err := w.Submit(wctx, payload(0))
	require.NoError(t, err)
	wcancel()
	_, err = f.Wait(wctx)
	require.ErrorIs(t, err, context.Canceled)
	// The slot keeps going after its waiter gave up.
	g.Open()
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, uint64(1), w.Released())
}

func TestConcurrentAppendsUniquePositions(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 32)
	w := e.writer(rec, chain.WriterOptions{})
	const goroutines, per = 8, 100
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range per {
				id := g*per + i
				pos, err := w.Append(context.Background(), payload(id))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				_, dup := seen[pos.Slot]
				seen[pos.Slot] = id
				mu.Unlock()
				assert.False(t, dup, "slot %d acknowledged twice", pos.Slot)
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Close(context.Background()))
	got, err := readAll(t, e.reader(), chain.Position{})
	require.NoError(t, err)
	require.Len(t, got, goroutines*per)
	for _, f := range got {
		require.Equal(t, payload(seen[f.Slot]), f.Payload)
	}
}

// TestResumeRefused is the resumed-epoch schedule: a first writer's
// flight X for slot 0 landed in zone a only when it crashed; a restarted
// host must not be able to build a second writer on the epoch, whether
// from the record read back or from the minted one again.
func TestResumeRefused(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	first := e.writer(rec, chain.WriterOptions{})
	first.Abort()
	e.put(0, rec, 0, chain.EncodeFlight(star, rec.Epoch, 0, []byte("X")))

	_, err := chain.NewWriter(rec, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrClaimed, "the minted record was claimed by the first writer")
	copied := *rec
	_, err = chain.NewWriter(&copied, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrClaimed, "a copy of the minted record shares its claim")
	back, err := e.minter.Get(context.Background(), star, rec.Epoch)
	require.NoError(t, err)
	_, err = chain.NewWriter(back, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrNotMinted, "a record read back cannot be written")
	for r, err := range e.minter.Epochs(context.Background(), star) {
		require.NoError(t, err)
		_, err = chain.NewWriter(r, chain.MustZones(e.buckets...), chain.WriterOptions{})
		require.ErrorIs(t, err, epoch.ErrNotMinted)
	}
	// Nothing was written by the refused writers: zone a still holds X
	// alone, zones b and c nothing.
	require.Equal(t, 1, e.mems[0].Len())
	require.Equal(t, 0, e.mems[1].Len()+e.mems[2].Len())
}

// TestConflictingFlightHalts: a writer that meets another well-formed
// flight at its own slot halts there with a *ConflictError: another writer
// exists, so the epoch is compromised. (With W < K the slot may commit on
// the other zones before the conflicting answer arrives; the fence and the
// reader then refuse the slot, see fence's TestConflictingFlights.)
func TestConflictingFlightHalts(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(3, 4)
	e.put(0, rec, 1, chain.EncodeFlight(star, rec.Epoch, 1, []byte("X")))
	w := e.writer(rec, chain.WriterOptions{})
	pos, err := w.Append(context.Background(), payload(0))
	require.NoError(t, err)
	require.Equal(t, uint64(0), pos.Slot)
	_, err = w.Append(context.Background(), payload(1))
	require.ErrorIs(t, err, chain.ErrConflictingFlight)
	var ce *chain.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(1), ce.Slot)
	require.ErrorContains(t, err, "zone-a")
	<-w.Halted()
	require.ErrorIs(t, w.Err(), chain.ErrConflictingFlight)
	_, err = w.Submit(context.Background(), payload(2))
	require.ErrorIs(t, err, chain.ErrConflictingFlight, "a halted writer refuses appends")
	require.Equal(t, uint64(1), w.Released())
}

// TestWriterCheckpoint: the writer moves its open epoch's checkpoint, never
// past what it acknowledged; the minter alone refuses to move it.
func TestWriterCheckpoint(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	w := e.writer(rec, chain.WriterOptions{})
	for i := range 3 {
		_, err := w.Append(ctx, payload(i))
		require.NoError(t, err)
	}
	_, err := w.Checkpoint(ctx, 1000)
	require.ErrorIs(t, err, epoch.ErrCursorAhead)
	_, err = e.minter.Advance(ctx, star, rec.Epoch, epoch.Cursors{Checkpoint: 1000})
	require.ErrorIs(t, err, epoch.ErrState, "only the writer moves an open epoch's checkpoint")
	_, err = e.minter.Advance(ctx, star, rec.Epoch, epoch.Cursors{Checkpoint: 2})
	require.ErrorIs(t, err, epoch.ErrState)
	got, err := w.Checkpoint(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, uint64(3), got.Cursors.Checkpoint)
	_, err = w.Checkpoint(ctx, 2)
	require.ErrorIs(t, err, epoch.ErrCursorRegression)
	require.Equal(t, uint64(3), e.record(rec).Cursors.Checkpoint)
	require.NoError(t, w.Close(ctx))
}

func TestNewWriterValidation(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	var ce *epoch.ConfigError
	// A zone the record names is missing from the zone set.
	_, err := chain.NewWriter(rec, chain.MustZones(e.buckets[:2]...), chain.WriterOptions{})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "buckets[2]", ce.Field)
	_, err = chain.NewWriter(rec, nil, chain.WriterOptions{})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "buckets[0]", ce.Field)
	_, err = chain.NewWriter(nil, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorAs(t, err, &ce)
	for _, tc := range []struct {
		opts  chain.WriterOptions
		field string
	}{
		{chain.WriterOptions{Backoff: clock.Backoff{Min: -1}}, "Backoff.Min"},
		{chain.WriterOptions{Backoff: clock.Backoff{Max: -1}}, "Backoff.Max"},
		{chain.WriterOptions{Backoff: clock.Backoff{Min: time.Second, Max: time.Millisecond}}, "Backoff.Max"},
		{chain.WriterOptions{Backoff: clock.Backoff{Min: clock.MaxBackoff + 1}}, "Backoff.Min"},
		{chain.WriterOptions{Backoff: clock.Backoff{Max: clock.MaxBackoff + 1}}, "Backoff.Max"},
	} {
		_, err := chain.NewWriter(rec, chain.MustZones(e.buckets...), tc.opts)
		require.ErrorAs(t, err, &ce, "%+v", tc.opts)
		require.Equal(t, tc.field, ce.Field)
		require.ErrorIs(t, err, epoch.ErrInvalidConfig)
	}

	fenced, err := e.minter.Publish(context.Background(), star, rec.Epoch, 0)
	require.NoError(t, err)
	_, err = chain.NewWriter(fenced, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrState)
	// Refused options did not take the minted record's claim.
	stale := *rec
	stale.State = epoch.StateFenced
	_, err = chain.NewWriter(&stale, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrState)
	var se *epoch.StateError
	require.ErrorAs(t, err, &se)
	require.Equal(t, epoch.StateFenced, se.Have)
}

func TestFutureAndPosition(t *testing.T) {
	a := chain.Position{Epoch: 1, Slot: 9}
	b := chain.Position{Epoch: 2, Slot: 0}
	c := chain.Position{Epoch: 2, Slot: 3}
	require.True(t, a.Less(b))
	require.True(t, b.Less(c))
	require.False(t, c.Less(a))
	require.Equal(t, 0, b.Compare(b))
	require.Equal(t, 1, c.Compare(b))
	require.Equal(t, -1, a.Compare(c))
	require.Equal(t, "2/3", c.String())

	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	g := newGate()
	e.hooks[0].setCreate(g.hook(nil))
	w := e.writer(rec, chain.WriterOptions{})
	f, err := w.Submit(context.Background(), payload(5))
	require.NoError(t, err)
	_, err = f.Result()
	require.ErrorIs(t, err, chain.ErrPending)
	require.Equal(t, payload(5), f.Payload())
	g.Open()
	<-f.Done()
	pos, err := f.Result()
	require.NoError(t, err)
	require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: 0}, pos)
	require.Nil(t, f.Payload(), "an acknowledged future drops its payload")
	require.Same(t, rec, w.Record())
	require.NoError(t, w.Close(context.Background()))
}

// Transient failures of creates and reads, drawn at random, are retried
// until every slot commits.
func TestTransientFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 8)
		for _, fb := range e.faults {
			require.NoError(t, fb.AddRule(fault.Rule{Op: fault.OpCreate, Probability: 0.4}))
			require.NoError(t, fb.AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: 0.2}))
			require.NoError(t, fb.AddRule(fault.Rule{Op: fault.OpGet, Probability: 0.4}))
		}
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitAll(t, w, 100)
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs)
		st := w.Stats()
		require.Positive(t, st.CreateRetries)
		require.Positive(t, st.RepairCopies, "lost answers are found by the read after ErrExists")
		require.Zero(t, st.Poisons+st.Foreign)
		injected := 0
		for _, fb := range e.faults {
			injected += fb.Stats().Injected[fault.OpCreate]
			fb.ClearRules()
		}
		require.Positive(t, injected)
		got, err := readAll(t, e.reader(), chain.Position{})
		require.NoError(t, err)
		require.Len(t, got, 100)
		for i, f := range got {
			require.Equal(t, payload(i), f.Payload)
		}
	})
}

// A create answered with an error lands later (a straggler): the retry
// finds it with ErrExists and counts it as the copy.
func TestStragglerLandsBeforeRetry(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	require.NoError(t, e.faults[0].AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.Straggler, Count: 1}))
	fake := clock.NewFake(time.Unix(0, 0))
	w := e.writer(rec, chain.WriterOptions{Clock: fake})
	f, err := w.Submit(context.Background(), payload(0))
	require.NoError(t, err)
	fake.BlockUntil(1)
	require.Equal(t, 1, e.faults[0].ReleaseStragglers(context.Background()))
	fake.Advance(clock.DefaultMaxBackoff)
	requireAcked(t, rec, []*chain.Future{f})
	require.Equal(t, uint64(1), w.Stats().RepairCopies)
	require.NoError(t, w.Close(context.Background()))
}

// A straggler that arrives after the retry landed finds its key taken.
func TestStragglerAfterRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 8)
		for _, fb := range e.faults {
			require.NoError(t, fb.AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.Straggler, Probability: 0.3}))
		}
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitAll(t, w, 40)
		require.NoError(t, w.Close(context.Background()))
		requireAcked(t, rec, fs)
		for _, fb := range e.faults {
			queued := fb.Stats().StragglersQueued
			landed := fb.ReleaseStragglers(context.Background())
			st := fb.Stats()
			require.Equal(t, queued, st.StragglersLanded+st.StragglersFailed)
			_ = landed
		}
		got, err := readAll(t, e.reader(), chain.Position{})
		require.NoError(t, err)
		require.Len(t, got, 40)
	})
}

// A racing poisoner and random faults, over many seeds: whatever happens,
// every acknowledged slot holds W copies of its flight and lies below the
// first dead slot; everything at or past the first dead slot failed with
// ErrFenced naming a dead slot; everything below it was acknowledged, and
// the writer's final error names the first dead slot.
func TestRandomizedPoisonRace(t *testing.T) {
	for seed := range uint64(25) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { poisonRace(t, seed) })
		})
	}
}

func poisonRace(t *testing.T, seed uint64) {
	const k, wq, window, n = 3, 2, 8, 60
	e := newEnv(t, k, func(i int, b objstore.Bucket) objstore.Bucket {
		return latency.Wrap(b, latency.Options{Seed: seed*10 + uint64(i), Default: latency.Uniform(0, 10*time.Millisecond)})
	})
	for _, fb := range e.faults {
		require.NoError(t, fb.AddRule(fault.Rule{Op: fault.OpCreate, Probability: 0.1}))
		require.NoError(t, fb.AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: 0.1}))
		require.NoError(t, fb.AddRule(fault.Rule{Op: fault.OpGet, Probability: 0.1}))
	}
	rec := e.mint(wq, window)
	w := e.writer(rec, chain.WriterOptions{})
	rng := rand.New(rand.NewPCG(seed, 99))
	poisonerDone := make(chan struct{})
	go func() {
		defer close(poisonerDone)
		prng := rand.New(rand.NewPCG(seed, 7))
		for range 4 {
			time.Sleep(time.Duration(prng.IntN(200)) * time.Millisecond)
			s := w.Released() + uint64(prng.IntN(2*window))
			for _, i := range prng.Perm(k)[:1+min(1, prng.IntN(3))] {
				_ = e.mems[i].Create(context.Background(), e.key(rec, s), chain.EncodePoison(star, rec.Epoch, s, "fencer"))
			}
		}
	}()
	var fs []*chain.Future
	for i := range n {
		f, err := w.Submit(context.Background(), payload(i))
		if err != nil {
			require.ErrorIs(t, err, chain.ErrFenced)
			break
		}
		fs = append(fs, f)
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		}
	}
	<-poisonerDone
	require.NoError(t, w.Close(context.Background()))

	// What the buckets hold.
	dead := uint64(len(fs))
	copies := make([]int, len(fs))
	isDead := make([]bool, len(fs))
	for s := range uint64(len(fs)) {
		poisons := 0
		for _, mb := range e.mems {
			o := chain.ObserveObject(context.Background(), mb, chain.Addr{Keys: e.keys, Star: star, Epoch: rec.Epoch, Slot: s})
			switch {
			case o.SameFlight(chain.EncodeFlight(star, rec.Epoch, s, payload(int(s)))):
				copies[s]++
			case o.State == chain.SlotPoison:
				poisons++
			case o.State != chain.SlotEmpty:
				t.Fatalf("slot %d: unexpected %v", s, o.State)
			}
		}
		isDead[s] = poisons >= k-wq+1
		if isDead[s] && dead == uint64(len(fs)) {
			dead = s
		}
	}
	for _, f := range fs {
		pos, err := f.Result()
		if f.Slot() < dead {
			require.NoError(t, err, "slot %d below the first dead slot %d", f.Slot(), dead)
			require.Equal(t, f.Slot(), pos.Slot)
			require.GreaterOrEqual(t, copies[f.Slot()], wq, "acknowledged slot %d", f.Slot())
		} else {
			// A future fails with the halt error known when it failed:
			// the halt point may have moved down since.
			require.ErrorIs(t, err, chain.ErrFenced, "slot %d at or past the first dead slot %d", f.Slot(), dead)
			named := err.(*chain.FencedError).Slot
			require.True(t, dead <= named && named <= f.Slot() && isDead[named], "slot %d failed naming slot %d", f.Slot(), named)
		}
	}
	t.Logf("submitted %d, first dead slot %d, stats %+v", len(fs), dead, w.Stats())
	require.Equal(t, min(dead, uint64(len(fs))), w.Released())
	if dead < uint64(len(fs)) {
		require.Equal(t, dead, w.Err().(*chain.FencedError).Slot)
	} else {
		require.NoError(t, w.Err())
	}
}

// TestWriterMemoryIndependentOfWindow: a writer minted with the largest
// window allocates for what is in flight, not for the window.
func TestWriterMemoryIndependentOfWindow(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, epoch.MaxWindow)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := e.writer(rec, chain.WriterOptions{})
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "NewWriter at window %d", epoch.MaxWindow)
	// It still pipelines past its first ring: zone a holds every create
	// until 300 appends are in flight, so none is released before the
	// ring has grown several times.
	hold := make(chan struct{})
	e.hooks[0].setCreate(func(ctx context.Context, key string, data []byte, next func() error) error {
		<-hold
		return next()
	})
	e.hooks[1].setCreate(func(ctx context.Context, key string, data []byte, next func() error) error {
		<-hold
		return next()
	})
	fs := submitAll(t, w, 300)
	require.Zero(t, w.Released())
	close(hold)
	for i, f := range fs {
		pos, err := f.Wait(context.Background())
		require.NoError(t, err)
		require.Equal(t, uint64(i), pos.Slot)
	}
	require.NoError(t, w.Close(context.Background()))
}

// TestStaleMintedRecordIsFenced: a minted record whose epoch was fenced
// before its writer started (the record in hand says open) gives a writer
// that halts with ErrFenced at its first slot, not a blocked or
// conflicting slot.
func TestStaleMintedRecordIsFenced(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	e.poison(0, rec, 0)
	e.poison(1, rec, 0)
	e.publish(rec, 0)
	w := e.writer(rec, chain.WriterOptions{})
	_, err := w.Append(ctx, payload(0))
	require.ErrorIs(t, err, chain.ErrFenced)
	require.NotErrorIs(t, err, chain.ErrBlocked)
	require.NotErrorIs(t, err, chain.ErrConflictingFlight)
	var fe *chain.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, uint64(0), fe.Slot)
	require.NoError(t, w.Close(ctx))
}
