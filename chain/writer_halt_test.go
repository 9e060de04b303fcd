package chain_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
)

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
				require.Less(t, i, dead+1000, "the writer never halted at the dead slot %d", dead)
				f, err := w.Submit(bounded(t), payload(i))
				if err != nil {
					require.ErrorIs(t, err, chain.ErrFenced)
					require.Greater(t, i, dead)
					break
				}
				fs = append(fs, f)
			}
			waitHalted(t, w)
			require.NoError(t, w.Close(bounded(t)))
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
		f, err := w.Submit(bounded(t), payload(i))
		if err != nil {
			require.ErrorIs(t, err, chain.ErrFenced) // the halt came first
			require.Greater(t, i, dead)
			break
		}
		fs = append(fs, f)
	}
	require.NoError(t, w.Close(bounded(t)))
	requireAcked(t, rec, fs[:dead])
	requireFenced(t, fs[dead:], dead)
	_, err := w.Submit(bounded(t), payload(9))
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
	require.NoError(t, w.Close(bounded(t)))
	requireAcked(t, rec, fs)
	require.NoError(t, w.Err())
	require.LessOrEqual(t, w.Stats().Poisons, uint64(3))
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
		require.NoError(t, w.Close(bounded(t)))
		requireAcked(t, rec, fs)
		require.LessOrEqual(t, w.Stats().Foreign, uint64(1))
	})
	t.Run("blocked slot halts naming the objects", func(t *testing.T) {
		e := newEnv(t, 3)
		rec := e.mint(2, 8)
		const slot = 1
		e.put(0, rec, slot, []byte("garbage"))
		e.put(1, rec, slot, wire.EncodeFlight(star, rec.Epoch, 99, payload(1))) // misplaced
		e.poison(2, rec, slot)
		w := e.writer(rec, chain.WriterOptions{})
		fs := submitUntilHalt(t, w, 3, slot)
		waitHalted(t, w)
		require.NoError(t, w.Close(bounded(t)))
		requireAcked(t, rec, fs[:slot])
		var ue *chain.NoQuorumError
		require.ErrorAs(t, w.Err(), &ue)
		require.Equal(t, uint64(slot), ue.Slot)
		require.Equal(t, 0, ue.Copies)
		require.Equal(t, 1, ue.Poisons)
		require.Len(t, ue.Objects, 2)
		require.ErrorIs(t, w.Err(), chain.ErrNoQuorum)
		require.ErrorIs(t, w.Err(), wire.ErrCorrupt)
		require.ErrorIs(t, w.Err(), wire.ErrMisplaced)
		require.NotErrorIs(t, w.Err(), chain.ErrFenced)
		var oe *wire.ObjectError
		require.ErrorAs(t, w.Err(), &oe)
		require.Contains(t, []string{"zone-a", "zone-b"}, oe.Bucket)
		require.Equal(t, e.key(rec, slot), oe.Key)
		for _, f := range fs[slot:] {
			_, err := f.Wait(bounded(t))
			require.ErrorIs(t, err, chain.ErrNoQuorum)
		}
		_, err := w.Submit(bounded(t), payload(7))
		require.ErrorIs(t, err, chain.ErrNoQuorum)
	})
	t.Run("a different flight for the slot is a conflict", func(t *testing.T) {
		e := newEnv(t, 1)
		rec := e.mint(1, 4)
		e.put(0, rec, 0, wire.EncodeFlight(star, rec.Epoch, 0, []byte("someone else")))
		w := e.writer(rec, chain.WriterOptions{})
		f, err := w.Submit(bounded(t), payload(0))
		require.NoError(t, err)
		_, err = f.Wait(bounded(t))
		require.ErrorIs(t, err, chain.ErrConflictingFlight)
		var ce *chain.ConflictError
		require.ErrorAs(t, err, &ce, "a conflict halts the writer as such, not as blocked")
		require.NoError(t, w.Close(bounded(t)))
	})
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
		_, err := w.Submit(bounded(t), payload(2))
		errc <- err
	}()
	g.await(t, 4)
	e.poison(1, rec, 0)
	g.Open()
	require.ErrorIs(t, <-errc, chain.ErrFenced)
	require.NoError(t, w.Close(bounded(t)))
	requireFenced(t, fs, 0)
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
			waitHalted(t, w)
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
			require.NoError(t, w.Close(bounded(t)))
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

// TestConflictingFlightHalts: a writer that meets another well-formed
// flight at its own slot halts there with a *ConflictError: another writer
// exists, so the epoch is compromised. (With W < K the slot may commit on
// the other zones before the conflicting answer arrives; the fence and the
// reader then refuse the slot, see fence's TestConflictingFlights.)
func TestConflictingFlightHalts(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(3, 4)
	e.put(0, rec, 1, wire.EncodeFlight(star, rec.Epoch, 1, []byte("X")))
	w := e.writer(rec, chain.WriterOptions{})
	pos, err := w.Append(bounded(t), payload(0))
	require.NoError(t, err)
	require.Equal(t, uint64(0), pos.Slot)
	_, err = w.Append(bounded(t), payload(1))
	require.ErrorIs(t, err, chain.ErrConflictingFlight)
	var ce *chain.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(1), ce.Slot)
	require.ErrorContains(t, err, "zone-a")
	waitHalted(t, w)
	require.ErrorIs(t, w.Err(), chain.ErrConflictingFlight)
	_, err = w.Submit(bounded(t), payload(2))
	require.ErrorIs(t, err, chain.ErrConflictingFlight, "a halted writer refuses appends")
	require.Equal(t, uint64(1), w.Released())
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
				_ = e.mems[i].Create(bounded(t), e.key(rec, s), wire.EncodePoison(star, rec.Epoch, s, "fencer"))
			}
		}
	}()
	var fs []*chain.Future
	for i := range n {
		f, err := w.Submit(bounded(t), payload(i))
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
	require.NoError(t, w.Close(bounded(t)))

	// What the buckets hold.
	dead := uint64(len(fs))
	copies := make([]int, len(fs))
	isDead := make([]bool, len(fs))
	for s := range uint64(len(fs)) {
		poisons := 0
		for _, mb := range e.mems {
			o := wire.ObserveObject(bounded(t), mb, wire.Addr{Keys: e.keys, Star: star, Epoch: rec.Epoch, Slot: s})
			switch {
			case o.SameFlight(wire.EncodeFlight(star, rec.Epoch, s, payload(int(s)))):
				copies[s]++
			case o.State == wire.SlotPoison:
				poisons++
			case o.State != wire.SlotEmpty:
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

// TestStaleMintedRecordIsFenced: a minted record whose epoch was fenced
// before its writer started (the record in hand says open) gives a writer
// that halts with ErrFenced at its first slot, not a blocked or
// conflicting slot.
func TestStaleMintedRecordIsFenced(t *testing.T) {
	ctx := bounded(t)
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	e.poison(0, rec, 0)
	e.poison(1, rec, 0)
	e.publish(rec, 0)
	w := e.writer(rec, chain.WriterOptions{})
	_, err := w.Append(ctx, payload(0))
	require.ErrorIs(t, err, chain.ErrFenced)
	require.NotErrorIs(t, err, chain.ErrNoQuorum)
	require.NotErrorIs(t, err, chain.ErrConflictingFlight)
	var fe *chain.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, uint64(0), fe.Slot)
	require.NoError(t, w.Close(ctx))
}
