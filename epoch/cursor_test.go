package epoch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// settle fences an epoch at cut 0 and marks it settled.
func (e *env) settle(t *testing.T, star string, n uint64) {
	t.Helper()
	ctx := context.Background()
	_, err := e.m.Publish(ctx, star, n, 0)
	require.NoError(t, err)
	_, err = e.m.MarkSettled(ctx, star, n)
	require.NoError(t, err)
}

func (e *env) cursor(t *testing.T, star string) uint64 {
	t.Helper()
	ch, err := e.m.Chain(context.Background(), star)
	require.NoError(t, err)
	return ch.Unsettled
}

func unsettled(t *testing.T, m *epoch.Minter, star string) []uint64 {
	t.Helper()
	var out []uint64
	for r, err := range m.Unsettled(context.Background(), star) {
		require.NoError(t, err)
		out = append(out, r.Epoch)
	}
	return out
}

func epochsFrom(t *testing.T, m *epoch.Minter, star string, from uint64) []uint64 {
	t.Helper()
	var out []uint64
	for r, err := range m.EpochsFrom(context.Background(), star, from) {
		require.NoError(t, err)
		out = append(out, r.Epoch)
	}
	return out
}

// The cursor moves past the oldest unsettled epoch when it is settled, and
// past every settled or burned one after it; it waits while an older epoch
// is unsettled.
func TestSettlementCursor(t *testing.T) {
	e := newEnv(t)
	for range 5 {
		e.mint(t, "s1", standard())
	}
	require.Equal(t, uint64(0), e.cursor(t, "s1"), "minting moves no cursor")
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, unsettled(t, e.m, "s1"))

	e.settle(t, "s1", 1)
	require.Equal(t, uint64(2), e.cursor(t, "s1"))
	e.settle(t, "s1", 3)
	require.Equal(t, uint64(2), e.cursor(t, "s1"), "epoch 2 is still unsettled")
	require.Equal(t, []uint64{2, 4, 5}, unsettled(t, e.m, "s1"))

	e.remove(t, e.m.RecordKey("s1", 4)) // burned
	e.settle(t, "s1", 2)
	require.Equal(t, uint64(5), e.cursor(t, "s1"), "past 2, the settled 3 and the burned 4")
	require.Equal(t, []uint64{5}, unsettled(t, e.m, "s1"))

	e.settle(t, "s1", 5)
	require.Equal(t, uint64(6), e.cursor(t, "s1"), "every epoch is settled: the cursor is the counter's next")
	require.Empty(t, unsettled(t, e.m, "s1"))

	// Settling again is a no-op and leaves the cursor.
	_, err := e.m.MarkSettled(context.Background(), "s1", 5)
	require.NoError(t, err)
	require.Equal(t, uint64(6), e.cursor(t, "s1"))

	// A mint keeps the cursor (it copies the counter).
	e.mint(t, "s1", express())
	require.Equal(t, uint64(6), e.cursor(t, "s1"))
	require.Equal(t, []uint64{6}, unsettled(t, e.m, "s1"))
}

// A counter written before the cursor existed has none: Unsettled walks
// from epoch 1 (a listing once the walk is long), and the next settlement
// of its oldest unsettled epoch moves the cursor all the way.
func TestSettlementCursorLegacyCounter(t *testing.T) {
	e := newEnv(t)
	for range 20 {
		e.mint(t, "s1", standard())
	}
	for n := uint64(1); n <= 20; n++ {
		if n != 12 && n != 15 {
			e.settle(t, "s1", n)
		}
	}
	require.Equal(t, uint64(12), e.cursor(t, "s1"))
	e.putChain(t, "s1", 21, map[string]uint64{"standard": 20}) // no cursor
	require.Equal(t, uint64(0), e.cursor(t, "s1"))
	require.Equal(t, []uint64{12, 15}, unsettled(t, e.m, "s1"))
	e.settle(t, "s1", 12)
	require.Equal(t, uint64(15), e.cursor(t, "s1"))
	e.settle(t, "s1", 15)
	require.Equal(t, uint64(21), e.cursor(t, "s1"))
}

// A cursor past the counter is corrupt and never acted upon.
func TestSettlementCursorPastNext(t *testing.T) {
	e := newEnv(t)
	e.mint(t, "s1", standard())
	e.overwrite(t, e.m.ChainKey("s1"), []byte(`{"kind":"chain","format":1,"star":"s1","next":2,"heads":{"standard":1},"unsettled":3}`))
	_, err := e.m.Chain(context.Background(), "s1")
	require.ErrorIs(t, err, metastore.ErrBadRecord)
	for _, err := range e.m.Unsettled(context.Background(), "s1") {
		require.ErrorIs(t, err, metastore.ErrBadRecord)
	}
	// MarkSettled still settles; the cursor is left alone.
	_, err = e.m.Publish(context.Background(), "s1", 1, 0)
	require.NoError(t, err)
	_, err = e.m.MarkSettled(context.Background(), "s1", 1)
	require.NoError(t, err)
	_, err = e.m.Chain(context.Background(), "s1")
	require.ErrorIs(t, err, metastore.ErrBadRecord, "the corrupt counter was not overwritten")
}

// Records past a counter that lags them (restored metadata) are still
// found, by number and by listing.
func TestUnsettledPastALaggingCounter(t *testing.T) {
	e := newEnv(t)
	for range 4 {
		e.mint(t, "s1", standard())
	}
	e.settle(t, "s1", 1)
	e.settle(t, "s1", 2)
	e.putChain(t, "s1", 3, map[string]uint64{"standard": 2}) // restored: lags 3 and 4
	require.Equal(t, []uint64{3, 4}, unsettled(t, e.m, "s1"))
	require.Equal(t, []uint64{3, 4}, epochsFrom(t, e.m, "s1", 2)[1:])
}

// EpochsFrom yields what Epochs yields from the given number on, by
// number or, after a long walk, by listing; burned numbers are skipped.
func TestEpochsFrom(t *testing.T) {
	e := newEnv(t)
	for range 30 {
		e.mint(t, "s1", standard())
	}
	for _, n := range []uint64{3, 4, 17, 30} {
		e.remove(t, e.m.RecordKey("s1", n))
	}
	var all []uint64
	for r, err := range e.m.Epochs(context.Background(), "s1") {
		require.NoError(t, err)
		all = append(all, r.Epoch)
	}
	for from := uint64(0); from <= 32; from++ {
		var want []uint64
		for _, n := range all {
			if n >= from {
				want = append(want, n)
			}
		}
		require.Equal(t, want, epochsFrom(t, e.m, "s1", from), "from %d", from)
	}
	require.Empty(t, epochsFrom(t, e.m, "never", 5))

	// Stopping early stops reading.
	for r, err := range e.m.EpochsFrom(context.Background(), "s1", 5) {
		require.NoError(t, err)
		require.Equal(t, uint64(5), r.Epoch)
		break
	}
	var failed error
	for _, err := range e.m.EpochsFrom(context.Background(), "bad/star", 1) {
		failed = err
	}
	require.ErrorIs(t, failed, cutline.ErrInvalid)
}

// Unsettled and a mint and settle cycle read as many keys after 10 settled
// epochs as after 1,000, and list nothing.
func TestUnsettledFlatInHistory(t *testing.T) {
	ctx := context.Background()
	measure := func(past int) metacount.Stats {
		store := metacount.Wrap(memstore.New(memstore.Options{}))
		m, err := epoch.NewMinter(store, epoch.Options{})
		require.NoError(t, err)
		for range past {
			r, err := m.Mint(ctx, "s1", standard())
			require.NoError(t, err)
			_, err = m.Publish(ctx, "s1", r.Epoch, 0)
			require.NoError(t, err)
			_, err = m.MarkSettled(ctx, "s1", r.Epoch)
			require.NoError(t, err)
		}
		prev, err := m.Mint(ctx, "s1", standard())
		require.NoError(t, err)
		store.Reset()
		require.Equal(t, []uint64{prev.Epoch}, unsettled(t, m, "s1"))
		_, err = m.Publish(ctx, "s1", prev.Epoch, 0)
		require.NoError(t, err)
		_, err = m.MarkSettled(ctx, "s1", prev.Epoch)
		require.NoError(t, err)
		_, err = m.Mint(ctx, "s1", standard())
		require.NoError(t, err)
		return store.Stats()
	}
	small, large := measure(10), measure(1000)
	t.Logf("after 10 settled epochs: %+v; after 1,000: %+v", small, large)
	require.Equal(t, small, large)
	require.Zero(t, large.Lists)
}

// Mints and settlements racing on one star never move the cursor past an
// unsettled epoch.
func TestSettlementCursorRaces(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const workers, rounds = 4, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				r, err := e.m.Mint(ctx, "s1", standard())
				if err != nil {
					t.Error(err)
					return
				}
				ch, err := e.m.Chain(ctx, "s1")
				if err != nil {
					t.Error(err)
					return
				}
				// Settle a random epoch minted so far, if not settled.
				n := 1 + rng.Uint64N(ch.Next-1)
				if rng.IntN(2) == 0 {
					n = r.Epoch
				}
				if _, err := e.m.Publish(ctx, "s1", n, 0); err != nil {
					t.Error(fmt.Errorf("publish %d: %w", n, err))
					return
				}
				if _, err := e.m.MarkSettled(ctx, "s1", n); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ch, err := e.m.Chain(ctx, "s1")
	require.NoError(t, err)
	var want []uint64
	for r, err := range e.m.Epochs(ctx, "s1") {
		require.NoError(t, err)
		if r.Epoch < ch.Unsettled {
			require.Equal(t, epoch.StateSettled, r.State, "epoch %d below the cursor %d", r.Epoch, ch.Unsettled)
		}
		if r.State != epoch.StateSettled {
			want = append(want, r.Epoch)
		}
	}
	require.Equal(t, want, unsettled(t, e.m, "s1"))
}
