package roll_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/roll"
)

// rollScenario is what one incarnation of a star's roller does:
// Open, three appends, a planned roll (window 8 → 4), three more
// appends of which the second meets a slot poisoned in advance (a halt:
// the roller rolls in process and republishes). Epoch 2 slot 1 is
// poisoned in zones a and b before anything runs.
type rollScenario struct {
	c1, c2 epoch.Constants
	opts   roll.Options
}

func newRollScenario(e *settletest.Env) rollScenario {
	c1 := e.Constants(2, 8)
	c2 := e.Constants(2, 4)
	return rollScenario{c1: c1, c2: c2, opts: roll.Options{
		RollOnHalt: true,
		Backoff:    clock.Backoff{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond},
		Writer:     chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 8 * time.Millisecond}},
	}}
}

// incarnation runs the scenario until it finishes or the process crashes,
// then ends the roller as a dying process would (Close on a done context
// stops everything at once). It returns every append with its id.
type submitted struct {
	id  string
	app *roll.Future
}

func (sc rollScenario) run(t testing.TB, ctx context.Context, p *settletest.Party, k *settletest.KillSwitch) []submitted {
	t.Helper()
	r, err := roll.Open(ctx, p.Settler, starA, sc.c1, sc.opts)
	if err != nil {
		require.True(t, k.Dead(), "Open failed without a crash: %v", err)
		return nil
	}
	var out []submitted
	submit := func(i int) bool {
		id := fmt.Sprintf("r%d", i)
		a, err := r.Submit(ctx, record(stream, uint64(i), id))
		if err != nil {
			require.True(t, k.Dead(), "Submit failed without a crash: %v", err)
			return false
		}
		out = append(out, submitted{id, a})
		return true
	}
	ok := submit(0) && submit(1) && submit(2)
	if ok {
		if err := r.Roll(ctx, sc.c2); err != nil {
			require.True(t, k.Dead(), "Roll failed without a crash: %v", err)
			ok = false
		}
	}
	ok = ok && submit(3) && submit(4) && submit(5)
	all := make(chan struct{})
	go func() {
		for _, s := range out {
			<-s.app.Done()
		}
		close(all)
	}()
	select {
	case <-all:
	case <-k.Fired():
	}
	closeCtx := context.Background()
	if k.Dead() {
		var cancel context.CancelFunc
		closeCtx, cancel = context.WithCancel(closeCtx)
		cancel()
	}
	err = r.Close(closeCtx)
	if !k.Dead() {
		require.NoError(t, err)
	}
	<-all // Close decides every append
	return out
}

// Layer 5 for rolls: the first incarnation of a star crashes at each of
// its mutating requests in turn: the mint, the appends' creates, the
// planned roll's mint, fence (poison, publication) and settlement
// (deletes, coverage, settled mark), the halt roll's steps and its
// republication. A new incarnation then opens on the same storage (which
// settles what was left), and the producer retries what was not
// acknowledged, at offsets past the recovered stream's end. Then every
// acknowledged payload is readable exactly once, at the position it was
// acknowledged at, in submission order; no epoch has a hole; no append was
// decided twice.
func TestRollerCrashPoints(t *testing.T) {
	for _, lost := range []bool{false, true} {
		points := 0
		for at := 1; ; at++ {
			var fired bool
			synctest.Test(t, func(t *testing.T) {
				fired = rollCrashRun(t, at, lost)
			})
			if !fired {
				break
			}
			points++
		}
		t.Logf("lost answer %v: %d crash points", lost, points)
		require.GreaterOrEqual(t, points, 30, "lost=%v: every step must have been crashed", lost)
	}
}

func rollCrashRun(t *testing.T, at int, lost bool) bool {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	e.PutPoison(0, starA, 2, 1)
	e.PutPoison(1, starA, 2, 1)
	sc := newRollScenario(e)
	k := settletest.NewKillSwitch(at, lost)
	first := e.NewParty("incarnation-1", settletest.PartyOptions{Kill: k})
	subs := sc.run(t, k.Bind(ctx), first, k)
	fired, what := k.Report()
	repro := fmt.Sprintf("crash at request %d (%s), lost answer %v", at, what, lost)

	acked := map[string]chain.Position{}
	var unacked []string
	var last chain.Position
	for i, s := range subs {
		pos, err := s.app.Wait(ctx) // decided already: Close decides every append
		if err != nil {
			require.True(t, fired, "%s: append %s failed without a crash: %v", repro, s.id, err)
			require.ErrorIs(t, err, roll.ErrClosedForTest, repro)
			unacked = append(unacked, s.id)
			continue
		}
		if i > 0 && len(acked) > 0 {
			require.True(t, last.Less(pos), "%s: %s acknowledged at %v after %v", repro, s.id, pos, last)
		}
		last = pos
		acked[s.id] = pos
	}
	if !fired {
		require.Len(t, acked, 6)
	}

	// Recovery: a new incarnation on the same storage. The producer retries
	// what was not acknowledged, at offsets past the recovered stream.
	second := e.NewParty("incarnation-2", settletest.PartyOptions{})
	r, err := roll.Open(ctx, second.Settler, starA, sc.c1, sc.opts)
	require.NoError(t, err, repro)
	for ep := uint64(1); ep < r.Epoch().Epoch; ep++ {
		rec, err := second.Minter.Get(ctx, starA, ep)
		if errors.Is(err, epoch.ErrNoRecord) {
			continue
		}
		require.NoError(t, err, repro)
		require.Equal(t, epoch.StateSettled, rec.State, "%s: Open settles every earlier epoch", repro)
	}
	next, err := second.Refs.Next(ctx, stream)
	require.NoError(t, err)
	retried := map[string]chain.Position{}
	for j, id := range unacked {
		pos, err := r.Append(ctx, record(stream, next+uint64(j), id))
		require.NoError(t, err, repro)
		retried[id] = pos
	}
	require.NoError(t, r.Close(ctx), repro)
	checker := e.NewParty("checker", settletest.PartyOptions{})
	_, err = checker.Settler.SettleAll(ctx, starA)
	require.NoError(t, err, repro)

	// Every epoch: guarantees 1–4, with the slots acknowledged in it.
	perEpoch := map[uint64][]uint64{}
	for _, pos := range acked {
		perEpoch[pos.Epoch] = append(perEpoch[pos.Epoch], pos.Slot)
	}
	for _, pos := range retried {
		perEpoch[pos.Epoch] = append(perEpoch[pos.Epoch], pos.Slot)
	}
	for rec, err := range checker.Minter.Epochs(ctx, starA) {
		require.NoError(t, err)
		checker.Env.On(t).VerifyEpoch(starA, rec.Epoch, perEpoch[rec.Epoch])
	}

	// Guarantee 5: every acknowledged payload once, where it was
	// acknowledged. A payload that was never acknowledged may have reached
	// the chain before the crash and again by its retry (at-least-once for
	// those); never twice from one incarnation.
	ids, poss := settletest.ChainIDs(t, checker, starA)
	at1 := map[string]chain.Position{}
	for i, id := range ids {
		if pos, ok := acked[id]; ok {
			require.Equal(t, pos, poss[i], "%s: %s read at %v, acknowledged at %v", repro, id, poss[i], pos)
		}
		if pos, ok := retried[id]; ok && pos == poss[i] {
			continue
		}
		_, dup := at1[id]
		require.False(t, dup, "%s: %s twice in the first incarnation's epochs", repro, id)
		at1[id] = poss[i]
	}
	for id := range acked {
		require.Equal(t, 1, count(ids, id), "%s: acknowledged %s must be read exactly once", repro, id)
	}
	for id := range retried {
		require.Contains(t, ids, id)
	}
	indexed := settletest.CheckStream(t, checker, stream)
	require.ElementsMatch(t, ids, indexed, "%s: the index covers the whole chain", repro)
	return fired
}

func count(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}
