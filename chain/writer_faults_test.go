package chain_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
)

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
	f, err := w.Submit(bounded(t), payload(0))
	require.NoError(t, err)
	for range 3 {
		failfast.Timers(t, fake, 1, "the writer's backoff on the clock, not on the wall")
		select {
		case <-f.Done():
			t.Fatal("acknowledged before the retry")
		default:
		}
		fake.Advance(4 * time.Second)
	}
	pos, err := f.Wait(bounded(t))
	require.NoError(t, err)
	require.Equal(t, uint64(0), pos.Slot)
	st := w.Stats()
	require.Equal(t, uint64(4), st.Creates)
	require.Equal(t, uint64(3), st.CreateRetries)
	require.NoError(t, w.Close(bounded(t)))
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
		e.put(0, rec, 0, wire.EncodeFlight(star, rec.Epoch, 0, payload(0)))
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
	f, err := w.Submit(bounded(t), payload(0))
	require.NoError(t, err)
	failfast.Timers(t, fake, 1, "the writer's backoff after the failed create")
	require.Equal(t, 1, e.faults[0].ReleaseStragglers(bounded(t)))
	fake.Advance(clock.DefaultMaxBackoff)
	requireAcked(t, rec, []*chain.Future{f})
	require.Equal(t, uint64(1), w.Stats().RepairCopies)
	require.NoError(t, w.Close(bounded(t)))
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
