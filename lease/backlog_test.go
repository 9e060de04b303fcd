package lease_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/settle"
)

// slowIndex holds every CoverFlights until the test lets it go.
type slowIndex struct {
	lease.Index
	gate chan struct{}
}

func (x *slowIndex) CoverFlights(ctx context.Context, star string, flights []settle.Placed) error {
	select {
	case <-x.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return x.Index.CoverFlights(ctx, star, flights)
}

// While the index cannot keep up, acknowledged flights pile up only to
// AbsorbEvery plus the window: the answers wait, the writer's window
// fills, and Submit waits; once the index moves, everything is
// acknowledged and covered.
func TestAbsorbBacklogBounded(t *testing.T) {
	synctest.Test(t, testAbsorbBacklogBounded)
}

func testAbsorbBacklogBounded(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	p := env.Party("star-a")
	sess, err := env.Store.NewSession(t.Context(), time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	idx := &slowIndex{Index: p.Refs, gate: make(chan struct{})}
	const absorbEvery, window = 4, 8
	s, err := lease.Start(t.Context(), lease.Config{Star: "star-a", Store: env.Store, Session: sess, Minter: p.Minter,
		Settler: p.Settler, Index: idx, Constants: env.Constants(2, window)}, lease.Options{AbsorbEvery: absorbEvery})
	require.NoError(t, err)
	t.Cleanup(s.Abort)
	_, err = s.Open(t.Context(), "s", lease.OpenOptions{})
	require.NoError(t, err)

	const n = 60
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	futures := make(chan *lease.Future, n)
	submitted := make(chan error, 1)
	go func() {
		for i := range n {
			f, err := s.Submit(ctx, cutlinetest.Record("s", uint64(i), fmt.Sprint("r", i)))
			if err != nil {
				submitted <- err
				return
			}
			futures <- f
		}
		submitted <- nil
	}()
	// Every goroutine of the bubble blocks: the submitter stalls, as the
	// backlog, the writer's window and the answer queue are full, and
	// nothing is covered.
	synctest.Wait()
	select {
	case err := <-submitted:
		t.Fatalf("every append was taken while the index held every cover (err %v): the backlog is not bounded", err)
	default:
	}
	st := s.AbsorbStats()
	require.Positive(t, st.Waits, "the answer loop never waited for room: %+v", st)
	require.LessOrEqual(t, st.Pending, absorbEvery+window, "backlog %+v", st)
	require.LessOrEqual(t, st.MaxPending, absorbEvery+window, "backlog %+v", st)
	close(idx.gate) // the index keeps up again
	require.NoError(t, <-submitted)
	close(futures)
	for f := range futures {
		_, err := f.Wait(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, s.Absorb(ctx))
	st = s.AbsorbStats()
	require.Zero(t, st.Pending)
	require.LessOrEqual(t, st.MaxPending, absorbEvery+window, "backlog %+v", st)
	require.Equal(t, n, st.Flights)
	next, err := p.Refs.Next(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, uint64(n), next)
}
