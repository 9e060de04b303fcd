package epoch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/epoch"
)

func TestPublish(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	e.clock.Advance(time.Minute)

	r, err := e.m.Publish(ctx, "s1", 1, 17)
	require.NoError(t, err)
	assert.Equal(t, epoch.StateFenced, r.State)
	assert.True(t, r.Fenced())
	assert.Equal(t, uint64(17), r.Cut)
	assert.True(t, r.FencedAt.Equal(t0.Add(time.Minute)))
	assert.True(t, r.MintedAt.Equal(t0))
	assert.Equal(t, standard(), r.Constants, "constants never change")
	assert.Equal(t, r, e.get(t, "s1", 1))

	// The same cut again is a read: same record, nothing written.
	e.clock.Advance(time.Minute)
	txns, _ := e.store.counts()
	again, err := e.m.Publish(ctx, "s1", 1, 17)
	require.NoError(t, err)
	assert.Equal(t, r, again)
	after, _ := e.store.counts()
	assert.Equal(t, txns, after)
}

func TestPublishCutZero(t *testing.T) {
	// An epoch whose first slot is dead has cut 0: a real cut, not "unset".
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", express())
	r, err := e.m.Publish(ctx, "s1", 1, 0)
	require.NoError(t, err)
	assert.Equal(t, epoch.StateFenced, r.State)
	assert.Zero(t, r.Cut)
	_, err = e.m.Publish(ctx, "s1", 1, 1)
	assert.ErrorIs(t, err, epoch.ErrCutMismatch)
}

func TestPublishDifferentCut(t *testing.T) {
	ctx := context.Background()
	for _, settle := range []bool{false, true} {
		e := newEnv(t)
		e.mint(t, "s1", standard())
		_, err := e.m.Publish(ctx, "s1", 1, 17)
		require.NoError(t, err)
		if settle {
			_, err = e.m.MarkSettled(ctx, "s1", 1)
			require.NoError(t, err)
		}
		before := e.get(t, "s1", 1)

		txns, _ := e.store.counts()
		r, err := e.m.Publish(ctx, "s1", 1, 18)
		require.ErrorIs(t, err, epoch.ErrCutMismatch)
		assert.Nil(t, r)
		var cm *epoch.CutMismatchError
		require.True(t, errors.As(err, &cm))
		assert.Equal(t, epoch.CutMismatchError{Star: "s1", Epoch: 1, Published: 17, Offered: 18}, *cm)
		assert.Contains(t, err.Error(), "s1/1")

		after, _ := e.store.counts()
		assert.Equal(t, txns, after, "a mismatch is never retried and writes nothing")
		assert.Equal(t, before, e.get(t, "s1", 1))

		// The published cut is still accepted.
		r, err = e.m.Publish(ctx, "s1", 1, 17)
		require.NoError(t, err)
		assert.Equal(t, before, r)
	}
}

func TestRacingPublishersOfTheSameCut(t *testing.T) {
	const n = 8
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		out   = make([]*epoch.Record, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = e.m.Publish(ctx, "s1", 1, 9)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, epoch.StateFenced, out[i].State)
		assert.Equal(t, uint64(9), out[i].Cut)
		assert.Equal(t, out[0].Revision, out[i].Revision, "one publication, the others read it")
	}
	_, applied := e.store.counts()
	assert.Equal(t, 2, applied, "one mint and one publication")
}

func TestRacingPublishersOfDifferentCuts(t *testing.T) {
	// Not a real protocol run (fencers agree), but the record must end with
	// exactly one cut and every loser must learn it.
	const n = 8
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = e.m.Publish(ctx, "s1", 1, uint64(100+i))
		})
	}
	close(start)
	wg.Wait()
	final := e.get(t, "s1", 1)
	wins := 0
	for i, err := range errs {
		if err == nil {
			wins++
			assert.Equal(t, uint64(100+i), final.Cut)
			continue
		}
		var cm *epoch.CutMismatchError
		require.True(t, errors.As(err, &cm), "%v", err)
		assert.Equal(t, final.Cut, cm.Published)
		assert.Equal(t, uint64(100+i), cm.Offered)
	}
	assert.Equal(t, 1, wins)
}

func TestPublishRefusesCheckpointPastCut(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	e.checkpoint(t, "s1", 1, epoch.Cursors{Checkpoint: 10})
	before := e.get(t, "s1", 1)

	r, err := e.m.Publish(ctx, "s1", 1, 9)
	require.ErrorIs(t, err, epoch.ErrCursorAhead)
	assert.Nil(t, r)
	var ce *epoch.CursorError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "checkpoint", ce.Cursor)
	assert.Equal(t, uint64(10), ce.From)
	assert.Equal(t, uint64(9), ce.To)
	assert.Equal(t, before, e.get(t, "s1", 1), "nothing written")

	r, err = e.m.Publish(ctx, "s1", 1, 10)
	require.NoError(t, err, "a cut equal to the checkpoint is fine")
	assert.Equal(t, uint64(10), r.Cut)
}

func TestMarkSettled(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())

	// Open: refused.
	r, err := e.m.MarkSettled(ctx, "s1", 1)
	require.ErrorIs(t, err, epoch.ErrState)
	assert.Nil(t, r)
	var se *epoch.StateError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, epoch.StateError{Star: "s1", Epoch: 1, Have: epoch.StateOpen, Op: "settle"}, *se)
	assert.Equal(t, epoch.StateOpen, e.get(t, "s1", 1).State)

	e.checkpoint(t, "s1", 1, epoch.Cursors{Checkpoint: 4, Trimmed: 2, Rewritten: 3})
	_, err = e.m.Publish(ctx, "s1", 1, 12)
	require.NoError(t, err)
	e.clock.Advance(time.Hour)

	r, err = e.m.MarkSettled(ctx, "s1", 1)
	require.NoError(t, err)
	assert.Equal(t, epoch.StateSettled, r.State)
	assert.True(t, r.Fenced())
	assert.Equal(t, uint64(12), r.Cut)
	assert.Equal(t, epoch.Cursors{Checkpoint: 12, Trimmed: 2, Rewritten: 3}, r.Cursors, "the checkpoint moves to the cut")
	assert.True(t, r.SettledAt.Equal(t0.Add(time.Hour)))
	assert.Equal(t, r, e.get(t, "s1", 1))

	// Settled twice: a no-op returning the record.
	e.clock.Advance(time.Hour)
	txns, _ := e.store.counts()
	again, err := e.m.MarkSettled(ctx, "s1", 1)
	require.NoError(t, err)
	assert.Equal(t, r, again)
	after, _ := e.store.counts()
	assert.Equal(t, txns, after)

	// A settled epoch still answers Publish of its cut.
	p, err := e.m.Publish(ctx, "s1", 1, 12)
	require.NoError(t, err)
	assert.Equal(t, r, p)
}

func TestRacingSettlers(t *testing.T) {
	const n = 6
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	_, err := e.m.Publish(ctx, "s1", 1, 5)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = e.m.MarkSettled(ctx, "s1", 1) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	r := e.get(t, "s1", 1)
	assert.Equal(t, epoch.StateSettled, r.State)
	assert.Equal(t, uint64(5), r.Cursors.Checkpoint)
}

func TestAdvance(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())

	// The minter alone never moves an open epoch's checkpoint: only its
	// writer knows what was acknowledged.
	before := e.get(t, "s1", 1)
	_, err := e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 1000})
	require.ErrorIs(t, err, epoch.ErrState)
	assert.Equal(t, before, e.get(t, "s1", 1), "nothing written")

	e.checkpoint(t, "s1", 1, epoch.Cursors{Checkpoint: 5, Trimmed: 1, Rewritten: 2})
	r := e.get(t, "s1", 1)
	assert.Equal(t, epoch.Cursors{Checkpoint: 5, Trimmed: 1, Rewritten: 2}, r.Cursors)
	assert.Equal(t, epoch.StateOpen, r.State)

	// Trimmed and rewritten move through the minter up to the checkpoint.
	r, err = e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 5, Trimmed: 5, Rewritten: 5})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), r.Cursors.Trimmed)
	_, err = e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 5, Trimmed: 6, Rewritten: 5})
	require.ErrorIs(t, err, epoch.ErrCursorAhead)

	// Equal cursors: no-op, nothing written.
	txns, _ := e.store.counts()
	same, err := e.m.Advance(ctx, "s1", 1, r.Cursors)
	require.NoError(t, err)
	assert.Equal(t, r, same)
	after, _ := e.store.counts()
	assert.Equal(t, txns, after)
}

func TestAdvanceFencedAndSettled(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	_, err := e.m.Publish(ctx, "s1", 1, 20)
	require.NoError(t, err)

	r, err := e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 20, Trimmed: 15})
	require.NoError(t, err, "up to the cut")
	assert.Equal(t, uint64(20), r.Cursors.Checkpoint)
	assert.Equal(t, epoch.StateFenced, r.State, "advancing never changes the state")

	_, err = e.m.MarkSettled(ctx, "s1", 1)
	require.NoError(t, err)
	r, err = e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 20, Trimmed: 20, Rewritten: 20})
	require.NoError(t, err, "trimming a settled epoch")
	assert.Equal(t, epoch.StateSettled, r.State)
	assert.Equal(t, epoch.Cursors{Checkpoint: 20, Trimmed: 20, Rewritten: 20}, r.Cursors)

	_, err = e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 21, Trimmed: 20, Rewritten: 20})
	assert.ErrorIs(t, err, epoch.ErrCursorAhead)
	_, err = e.claims["s1/1"].Advance(ctx, 21)
	assert.ErrorIs(t, err, epoch.ErrCursorAhead, "not even its writer moves the checkpoint past the cut")
}

func TestAdvanceRegressions(t *testing.T) {
	ctx := context.Background()
	base := epoch.Cursors{Checkpoint: 10, Trimmed: 5, Rewritten: 4}
	for _, tc := range []struct {
		name   string
		fenced bool
		to     epoch.Cursors
		cursor string
		reason string
		want   error
	}{
		{"checkpoint backwards", false, epoch.Cursors{Checkpoint: 9, Trimmed: 5, Rewritten: 4}, "checkpoint", "backwards", epoch.ErrCursorRegression},
		{"trimmed backwards", false, epoch.Cursors{Checkpoint: 10, Trimmed: 4, Rewritten: 4}, "trimmed", "backwards", epoch.ErrCursorRegression},
		{"rewritten backwards", false, epoch.Cursors{Checkpoint: 10, Trimmed: 5, Rewritten: 3}, "rewritten", "backwards", epoch.ErrCursorRegression},
		{"all backwards", false, epoch.Cursors{}, "checkpoint", "backwards", epoch.ErrCursorRegression},
		{"trimmed past checkpoint", false, epoch.Cursors{Checkpoint: 10, Trimmed: 11, Rewritten: 4}, "trimmed", "checkpoint", epoch.ErrCursorAhead},
		{"rewritten past checkpoint", false, epoch.Cursors{Checkpoint: 10, Trimmed: 5, Rewritten: 11}, "rewritten", "checkpoint", epoch.ErrCursorAhead},
		{"checkpoint past cut", true, epoch.Cursors{Checkpoint: 21, Trimmed: 5, Rewritten: 4}, "checkpoint", "cut", epoch.ErrCursorAhead},
		{"fenced checkpoint backwards", true, epoch.Cursors{Checkpoint: 9, Trimmed: 5, Rewritten: 4}, "checkpoint", "backwards", epoch.ErrCursorRegression},
		{"fenced trimmed past checkpoint", true, epoch.Cursors{Checkpoint: 12, Trimmed: 13, Rewritten: 4}, "trimmed", "checkpoint", epoch.ErrCursorAhead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.mint(t, "s1", standard())
			e.checkpoint(t, "s1", 1, base)
			if tc.fenced {
				_, err := e.m.Publish(ctx, "s1", 1, 20)
				require.NoError(t, err)
			}
			before := e.get(t, "s1", 1)
			rev := e.mem.Revision()

			r, err := e.m.Advance(ctx, "s1", 1, tc.to)
			require.ErrorIs(t, err, tc.want)
			assert.Nil(t, r)
			var ce *epoch.CursorError
			require.True(t, errors.As(err, &ce))
			assert.Equal(t, tc.cursor, ce.Cursor)
			assert.Contains(t, ce.Reason, tc.reason)
			assert.Equal(t, "s1", ce.Star)
			assert.Equal(t, uint64(1), ce.Epoch)
			assert.Contains(t, err.Error(), tc.cursor)

			assert.Equal(t, rev, e.mem.Revision(), "nothing written")
			assert.Equal(t, before, e.get(t, "s1", 1))
		})
	}
}

func TestConcurrentAdvanceEndsAtTheMaximum(t *testing.T) {
	// Racing cursor updates: each either lands or is refused as a
	// regression; the highest always lands and nothing moves back.
	const n = 16
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	_, err := e.m.Publish(ctx, "s1", 1, 100)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			v := uint64(i + 1)
			_, errs[i] = e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: v, Trimmed: v / 2, Rewritten: v / 3})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, epoch.ErrCursorRegression)
		}
	}
	assert.NoError(t, errs[n-1])
	assert.Equal(t, epoch.Cursors{Checkpoint: n, Trimmed: n / 2, Rewritten: n / 3}, e.get(t, "s1", 1).Cursors)
}

func TestStateMachineNeverMovesBack(t *testing.T) {
	// Walk every transition from every state and check the state only
	// moves forward.
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	order := map[epoch.State]int{epoch.StateOpen: 1, epoch.StateFenced: 2, epoch.StateSettled: 3}
	ops := []func() error{
		func() error { _, err := e.m.MarkSettled(ctx, "s1", 1); return err },
		func() error { _, err := e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 2}); return err },
		func() error { _, err := e.m.Publish(ctx, "s1", 1, 3); return err },
		func() error { _, err := e.m.Publish(ctx, "s1", 1, 4); return err },
		func() error { _, err := e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 3}); return err },
		func() error { _, err := e.m.MarkSettled(ctx, "s1", 1); return err },
		func() error { _, err := e.m.Publish(ctx, "s1", 1, 3); return err },
		func() error { _, err := e.m.MarkSettled(ctx, "s1", 1); return err },
	}
	last := 1
	for i, op := range ops {
		_ = op()
		r := e.get(t, "s1", 1)
		require.GreaterOrEqual(t, order[r.State], last, "step %d", i)
		last = order[r.State]
	}
	r := e.get(t, "s1", 1)
	assert.Equal(t, epoch.StateSettled, r.State)
	assert.Equal(t, uint64(3), r.Cut)
	assert.Equal(t, uint64(3), r.Cursors.Checkpoint)
}
