package fence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
)

// TestScenarios fences hand-laid epochs. Rows give each slot's objects per
// bucket (F flight, P poison, X corrupt, M misplaced, E empty); down lists
// the buckets that are unreachable; the expected cut and the cut slot's
// final state are written down.
func TestScenarios(t *testing.T) {
	cases := []struct {
		name     string
		k, w     int
		rows     []string
		down     []int
		wantCut  uint64
		wantErr  error
		after    map[uint64]string // slot → expected final state
		poisoned int64             // poison objects this fence must create
	}{
		{name: "empty epoch", k: 3, w: 2, wantCut: 0, after: map[uint64]string{0: "P P E"}, poisoned: 2},
		{name: "all committed", k: 3, w: 2, rows: []string{"F F F", "F F F", "F F E", "E F F", "F E F"},
			wantCut: 5, after: map[uint64]string{5: "P P E"}, poisoned: 2},
		{name: "pipelined tail: repair, then cut before a straggler", k: 3, w: 2,
			rows:    []string{"F F F", "F F F", "F E E", "F F E", "E E E", "F E E"},
			wantCut: 4, after: map[uint64]string{2: "F F F", 4: "P P E", 5: "F E E"}, poisoned: 2},
		{name: "flight and poison with the deciding zone down: undecided", k: 3, w: 2,
			rows: []string{"F F F", "F P E"}, down: []int{2}, wantErr: ErrUndecided},
		{name: "one short of quorum: repair, never poison", k: 3, w: 2,
			rows: []string{"F F F", "F E F"}, down: []int{2},
			// slot 1 was acknowledged (a and c); c is down, so the fencer
			// sees one flight and repairs b; slot 2 is then poisoned in a
			// and b, c being down.
			wantCut: 2, after: map[uint64]string{1: "F F F", 2: "P P E"}, poisoned: 2},
		{name: "a crashed fencer's poison is resumed", k: 3, w: 2,
			rows: []string{"F F F", "P E E"}, wantCut: 1, after: map[uint64]string{1: "P P E"}, poisoned: 1},
		{name: "a crashed fencer's poison after a racing flight: repair wins", k: 3, w: 2,
			rows: []string{"F F F", "P F E"}, wantCut: 2, after: map[uint64]string{1: "P F F", 2: "P P E"}, poisoned: 2},
		{name: "dead already", k: 3, w: 2, rows: []string{"F F F", "P P E", "F F F"},
			wantCut: 1, after: map[uint64]string{1: "P P E", 2: "F F F"}, poisoned: 0},
		{name: "K=1 W=1", k: 1, w: 1, rows: []string{"F", "F"}, wantCut: 2, after: map[uint64]string{2: "P"}, poisoned: 1},
		{name: "K=1 W=1 poisoned by a racer", k: 1, w: 1, rows: []string{"F", "P"}, wantCut: 1, poisoned: 0},
		{name: "K=1 W=1 bucket down", k: 1, w: 1, rows: []string{"F"}, down: []int{0}, wantErr: ErrUndecided},
		{name: "K=2 W=2: one poison kills", k: 2, w: 2, rows: []string{"F F", "F E", "E E"},
			wantCut: 2, after: map[uint64]string{1: "F F", 2: "P E"}, poisoned: 1},
		{name: "K=5 W=3", k: 5, w: 3, rows: []string{"F F F E E", "F F E E E", "P P E E E"},
			wantCut: 2, after: map[uint64]string{1: "F F F F F", 2: "P P P E E"}, poisoned: 1},
		{name: "K=5 W=3 two zones down", k: 5, w: 3, rows: []string{"F F F E E", "F E F E E"}, down: []int{3, 4},
			wantCut: 2, after: map[uint64]string{1: "F F F E E", 2: "P P P E E"}, poisoned: 3},
		{name: "foreign object holds the deciding vote", k: 3, w: 2, rows: []string{"F P X"}, wantErr: ErrForeign},
		{name: "misplaced objects hold every bucket", k: 3, w: 2, rows: []string{"M M M"}, wantErr: ErrForeign},
		{name: "misplaced object is neither flight nor poison", k: 3, w: 2, rows: []string{"M E E"},
			wantCut: 0, after: map[uint64]string{0: "X P P"}, poisoned: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.k, c.w, 4)
			e.layout(c.rows...)
			for _, d := range c.down {
				e.zones[d].down.Store(true)
			}
			f := e.fencer(Options{Identity: "test-fencer"})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			rep, err := f.FenceReport(ctx, star, e.rec.Epoch)
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
				require.Equal(t, epoch.StateOpen, e.record().State, "nothing published")
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.wantCut, rep.Cut)
			require.Equal(t, c.poisoned, rep.Poisoned, "poison objects created")
			rec := e.record()
			require.Equal(t, epoch.StateFenced, rec.State)
			require.Equal(t, c.wantCut, rec.Cut)
			for s, want := range c.after {
				require.Equal(t, want, e.state(s), "slot %d", s)
			}
			// invariant: [0, cut) committed
			for s := uint64(0); s < rep.Cut; s++ {
				require.GreaterOrEqual(t, countOf(e.state(s), 'F'), c.w, "slot %d below the cut is committed", s)
			}
			// the cut is dead
			require.GreaterOrEqual(t, countOf(e.state(rep.Cut), 'P'), c.k-c.w+1)
			// a later fence is a read, with the same cut
			rep2, err := f.FenceReport(context.Background(), star, e.rec.Epoch)
			require.NoError(t, err)
			require.True(t, rep2.AlreadyFenced)
			require.Equal(t, rep.Cut, rep2.Cut)
		})
	}
}

func countOf(state string, c byte) int {
	n := 0
	for i := 0; i < len(state); i++ {
		if state[i] == c {
			n++
		}
	}
	return n
}

func TestUndecidedReportsWaitingAndAge(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F P E")
	e.zones[2].down.Store(true)
	f := e.fencer(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := f.Fence(ctx, star, e.rec.Epoch)
	var ue *UndecidedError
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, uint64(0), ue.Slot)
	require.Equal(t, []string{"c"}, ue.Waiting)
	require.False(t, ue.Since.IsZero())
	u := f.Undecided()
	require.Len(t, u, 1)
	require.Equal(t, ue.Since, u[0].Since)

	// The zone comes back holding nothing: the slot is repaired into c.
	e.zones[2].down.Store(false)
	cut, err := f.Fence(context.Background(), star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cut)
	require.Equal(t, "F P F", e.state(0))
	require.Empty(t, f.Undecided())
}

func TestUndecidedUsesInjectedClock(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F P E")
	e.zones[2].down.Store(true)
	fc := clockFake()
	f := e.fencer(Options{Clock: fc, MinBackoff: time.Second, MaxBackoff: time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := f.Fence(context.Background(), star, e.rec.Epoch)
		done <- err
	}()
	// Each retry waits on the fake clock; bring the zone back while the
	// fencer waits for the fourth time.
	for i := range 4 {
		fc.BlockUntil(1)
		require.Len(t, f.Undecided(), 1)
		if i == 3 {
			e.zones[2].down.Store(false)
		}
		fc.Advance(time.Second)
	}
	require.NoError(t, <-done)
	require.Equal(t, "F P F", e.state(0))
}

func TestCutMismatchIsNeverRetried(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F F F", "F F F")
	_, err := e.minter.Publish(context.Background(), star, e.rec.Epoch, 1) // a bogus publication
	require.NoError(t, err)
	// A fresh fencer reads the published cut: a later fence is a read.
	cut, err := e.fencer(Options{}).Fence(context.Background(), star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cut)
	// Publishing a different cut is refused.
	_, err = e.minter.Publish(context.Background(), star, e.rec.Epoch, 2)
	require.ErrorIs(t, err, epoch.ErrCutMismatch)
}

func TestNoRecord(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	_, err := e.fencer(Options{}).Fence(context.Background(), star, 99)
	require.ErrorIs(t, err, epoch.ErrNoRecord)
}

// TestRacingFencers: several fencers with different views (random outages
// that come and go) converge on one cut, and write no more poison than B.
func TestRacingFencers(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			k := 3 + 2*rng.IntN(2) // 3 or 5
			w := k/2 + 1
			window := 1 + rng.IntN(6)
			e := newEnv(t, k, w, window)
			// A writer that died: n committed slots, then a ragged tail
			// within the window.
			n := rng.IntN(20)
			for s := range n {
				for b := range k {
					if b < w || rng.IntN(2) == 0 {
						e.put(uint64(s), b, 'F')
					}
				}
			}
			for s := n; s < n+window; s++ {
				for b := range k {
					if rng.IntN(3) == 0 {
						e.put(uint64(s), b, 'F')
					}
				}
			}
			fencers := 2 + rng.IntN(2)
			cuts := make([]uint64, fencers)
			errs := make([]error, fencers)
			spans := make([]int, fencers)
			for i := range spans {
				spans[i] = 1 + rng.IntN(8)
			}
			var wg sync.WaitGroup
			for i := range fencers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					f := e.fencer(Options{Identity: fmt.Sprint("fencer-", i), Span: spans[i], Fanout: 1 + i})
					cuts[i], errs[i] = f.Fence(context.Background(), star, e.rec.Epoch)
				}()
			}
			wg.Wait()
			for i := range fencers {
				require.NoError(t, errs[i])
				require.Equal(t, cuts[0], cuts[i], "fencer %d", i)
			}
			cut := cuts[0]
			require.GreaterOrEqual(t, cut, uint64(n), "the committed prefix survives")
			for s := uint64(0); s < cut; s++ {
				require.GreaterOrEqual(t, countOf(e.state(s), 'F'), w, "slot %d", s)
				require.Zero(t, countOf(e.state(s), 'P'), "no poison below the cut at slot %d when nobody raced a writer", s)
			}
			require.Equal(t, k-w+1, countOf(e.state(cut), 'P'), "exactly B poison at the cut")
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	_, err := New(e.minter, e.buckets(), Options{Fanout: -1})
	require.ErrorIs(t, err, epoch.ErrInvalidConfig)
	_, err = New(e.minter, e.buckets(), Options{Keys: chain.Keys{Prefix: "../x"}})
	require.ErrorIs(t, err, epoch.ErrInvalidConfig)
	_, err = New(nil, e.buckets(), Options{})
	require.ErrorIs(t, err, epoch.ErrInvalidConfig)
	// a record naming a zone the fencer does not know
	_, err = e.fencer(Options{}).Fence(context.Background(), star, e.rec.Epoch)
	require.NoError(t, err)
	f, err := New(e.minter, chain.Zones{}, Options{Keys: e.keys})
	require.NoError(t, err)
	rec, err := e.minter.Mint(context.Background(), star, e.rec.Constants)
	require.NoError(t, err)
	_, err = f.Fence(context.Background(), star, rec.Epoch)
	require.ErrorIs(t, err, epoch.ErrInvalidConfig)
	require.False(t, errors.Is(err, ErrUndecided))
}
