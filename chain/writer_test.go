package chain_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// waitBound bounds each wait of a test on a writer (a Submit with the
// window full, a future, a halt, a call): under a bug the test fails with
// a message instead of hanging until the package timeout. Nothing is
// timed. (In a synctest bubble a deadlock fails the test already.)
const waitBound = failfast.Bound

// bounded returns a context that ends waitBound from now (or with t).
func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	t.Cleanup(cancel)
	return ctx
}

// waitHalted waits for w to halt, at most waitBound.
func waitHalted(t testing.TB, w *chain.Writer) {
	t.Helper()
	select {
	case <-w.Halted():
	case <-bounded(t).Done():
		t.Fatalf("the writer did not halt within %v (released %d)", waitBound, w.Released())
	}
}

// submitAll submits n payloads (payload(0..n-1)) and returns the futures.
func submitAll(t *testing.T, w *chain.Writer, n int) []*chain.Future {
	t.Helper()
	fs := make([]*chain.Future, n)
	for i := range n {
		f, err := w.Submit(bounded(t), payload(i))
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
		f, err := w.Submit(bounded(t), payload(i))
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
		pos, err := f.Wait(bounded(t))
		require.NoError(t, err, "slot %d", f.Slot())
		require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: f.Slot()}, pos)
	}
}

func requireFenced(t *testing.T, fs []*chain.Future, dead uint64) {
	t.Helper()
	for _, f := range fs {
		_, err := f.Wait(bounded(t))
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
		pos, err := w.Append(bounded(t), payload(i))
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: uint64(i)}, pos)
	}
	require.NoError(t, w.Close(bounded(t)))
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
	data, err := e.mems[1].Get(bounded(t), e.key(rec, 7))
	require.NoError(t, err)
	require.Equal(t, wire.EncodeFlight(star, rec.Epoch, 7, payload(7)), data)

	got, err := readAll(t, e.reader(), chain.Position{})
	require.NoError(t, err)
	require.Len(t, got, 20)
	for i, f := range got {
		require.Equal(t, payload(i), f.Payload)
	}
	_, err = w.Submit(bounded(t), []byte("late"))
	require.ErrorIs(t, err, cutline.ErrClosed)
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

// A fencer's repair (identical flight bytes already in place) counts as a
// copy.
func TestRepairCopyCounts(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	flight := wire.EncodeFlight(star, rec.Epoch, 2, payload(2))
	e.put(0, rec, 2, flight)
	e.put(1, rec, 2, flight)
	e.poison(2, rec, 2) // the third bucket was poisoned: 2 copies + 1 poison commits
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 4)
	require.NoError(t, w.Close(bounded(t)))
	requireAcked(t, rec, fs)
	st := w.Stats()
	require.Equal(t, uint64(2), st.RepairCopies)
	require.LessOrEqual(t, st.Poisons, uint64(1))
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
	ctx, cancel := context.WithCancel(bounded(t))
	cancel()
	_, err := w.Submit(ctx, payload(2))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, uint64(2), w.Stats().Submitted)

	third := make(chan *chain.Future)
	go func() {
		f, err := w.Submit(bounded(t), payload(2))
		assert.NoError(t, err)
		third <- f
	}()
	g.await(t, 6)
	select {
	case <-third:
		t.Fatal("Submit did not wait for the window")
	default:
	}
	g.Open()
	f := failfast.Recv(t, third, "the third Submit, once the window has room")
	require.Equal(t, uint64(2), f.Slot())
	require.NoError(t, w.Close(bounded(t)))
	requireAcked(t, rec, append(fs, f))
}

func TestSingleBucket(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 3)
	requireAcked(t, rec, fs)
	e.poison(0, rec, 3) // the next free slot: whoever wins it ends the epoch
	f, err := w.Submit(bounded(t), payload(3))
	require.NoError(t, err)
	_, err = f.Wait(bounded(t))
	require.ErrorIs(t, err, chain.ErrFenced)
	require.NoError(t, w.Close(bounded(t)))
	require.Equal(t, uint64(3), w.Released())
}

func TestWaitContext(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	g := newGate()
	e.hooks[0].setCreate(g.hook(nil))
	w := e.writer(rec, chain.WriterOptions{})
	ctx, cancel := context.WithCancel(bounded(t))
	cancel()
	_, err := w.Append(ctx, payload(0))
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, w.Stats().Submitted, "a done context assigns nothing")

	wctx, wcancel := context.WithCancel(bounded(t))
	f, err := w.Submit(wctx, payload(0))
	require.NoError(t, err)
	wcancel()
	_, err = f.Wait(wctx)
	require.ErrorIs(t, err, context.Canceled)
	// The slot keeps going after its waiter gave up.
	g.Open()
	require.NoError(t, w.Close(bounded(t)))
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
				pos, err := w.Append(bounded(t), payload(id))
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
	require.NoError(t, w.Close(bounded(t)))
	got, err := readAll(t, e.reader(), chain.Position{})
	require.NoError(t, err)
	require.Len(t, got, goroutines*per)
	for _, f := range got {
		require.Equal(t, payload(seen[f.Slot]), f.Payload)
	}
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
	f, err := w.Submit(bounded(t), payload(5))
	require.NoError(t, err)
	_, err = f.Result()
	require.ErrorIs(t, err, chain.ErrPending)
	require.Equal(t, payload(5), f.Payload())
	g.Open()
	failfast.Recv(t, f.Done(), "the append's acknowledgement")
	pos, err := f.Result()
	require.NoError(t, err)
	require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: 0}, pos)
	require.Nil(t, f.Payload(), "an acknowledged future drops its payload")
	require.Same(t, rec, w.Record())
	require.NoError(t, w.Close(bounded(t)))
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
	// The holds end with the writer's requests too (Abort, when the test
	// fails), so that a failure does not hang the test's cleanup.
	hold := make(chan struct{})
	held := func(ctx context.Context, key string, data []byte, next func() error) error {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
		return next()
	}
	e.hooks[0].setCreate(held)
	e.hooks[1].setCreate(held)
	// Zone c takes every create: one copy of each slot, below W, so
	// nothing may be released however far it gets. Wait until it has
	// them all, so that the check does not depend on scheduling.
	var landed atomic.Int64
	e.hooks[2].setCreate(func(ctx context.Context, key string, data []byte, next func() error) error {
		err := next()
		if err == nil {
			landed.Add(1)
		}
		return err
	})
	fs := submitAll(t, w, 300)
	ctx := bounded(t)
	for landed.Load() < 300 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, int64(300), landed.Load(), "zone c's creates")
	require.Zero(t, w.Released())
	close(hold)
	for i, f := range fs {
		pos, err := f.Wait(bounded(t))
		require.NoError(t, err)
		require.Equal(t, uint64(i), pos.Slot)
	}
	require.NoError(t, w.Close(bounded(t)))
}
