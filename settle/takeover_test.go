package settle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// The hosts are cutlinetest's reference host over a plain chain.Writer: it
// submits records pipelined and, in an absorb loop, covers each
// acknowledged flight in the index and advances the epoch's checkpoint
// past it (AbsorbEvery 1): the host's two duties. It records what the
// producer saw in a History, which cutlinetest.Check judges.

// failure is a record a host did not acknowledge, and why.
type failure struct {
	id  string
	err error
}

// outcome reads host's answers back from the history: what it
// acknowledged where, and what failed or was refused, in the order
// answered.
func outcome(hist *cutlinetest.History, host string) (map[string]chain.Position, []failure) {
	acked := map[string]chain.Position{}
	var failed []failure
	for _, ev := range hist.Events() {
		if ev.Host != host {
			continue
		}
		switch ev.Op {
		case cutlinetest.Acked:
			acked[ev.ID] = ev.Pos
		case cutlinetest.Failed, cutlinetest.Refused:
			failed = append(failed, failure{ev.ID, ev.Err})
		}
	}
	return acked, failed
}

// requireServesToCut checks what cutlinetest.Check leaves to the test: ep
// is fenced and the reader finds nothing at its cut.
func requireServesToCut(t testing.TB, p *settletest.Party, star string, ep uint64) {
	t.Helper()
	rec, err := p.Minter.Get(context.Background(), star, ep)
	require.NoError(t, err)
	require.True(t, rec.Fenced(), "epoch %s/%d is %s", star, ep, rec.State)
	_, err = p.Reader().Read(context.Background(), star, chain.Position{Epoch: ep, Slot: rec.Cut})
	require.ErrorIs(t, err, chain.ErrNotCommitted)
}

// keyRule makes a fault rule for one slot object's create.
func keyRule(e *settletest.Env, star string, ep, slot uint64, kind fault.Effect) fault.Rule {
	return fault.Rule{Op: fault.OpCreate, Prefix: e.Key(star, ep, slot), Kind: kind, Count: 1}
}

// startA mints star A's epoch on a (W=2 of the Env's zones, the given
// window) and starts its host, host-a, over a writer with opts; the host
// records into a new History.
func startA(t testing.TB, a *settletest.Party, window int, opts chain.WriterOptions) (uint64, *chain.Writer, *cutlinetest.Host, *cutlinetest.History) {
	t.Helper()
	recA, err := a.Minter.Mint(context.Background(), starA, a.Env.Constants(2, window))
	require.NoError(t, err)
	wa := a.Writer(recA, opts)
	hist := &cutlinetest.History{}
	ha := cutlinetest.StartHost(a.Harness(starA), wa, cutlinetest.HostOptions{Name: "host-a", Stream: stream, History: hist})
	return recA.Epoch, wa, ha, hist
}

// takeover runs the library-level takeover on env e. Star A writes 40
// records, then 16 more that meet a ragged tail of faults (its writer
// makes no retries before it dies: its clock never moves):
//
//	slot 40  a only                          (fewer than W: repaired)
//	slot 43  c only; a and b are stragglers   (repaired)
//	slot 44  nothing; c is a straggler        (poisoned: the cut)
//	slot 47  a and b; c is a straggler        (garbage)
//	slot 50  nothing; a and b are stragglers  (land after settlement: W
//	                                          copies past the cut)
//
// A 57th record waits for window space. Then A dies: either its writer is
// aborted (zombie false), or it stays alive and wakes up after the
// takeover (zombie true). Star B settles A's chain and then serves the
// stream in its own chain; the producer retries every record A failed.
func takeover(t *testing.T, e *settletest.Env, zombie bool) {
	ctx := context.Background()
	const window = 16
	frozen := clock.NewFake(time.Now())
	ep, wa, ha, hist := startA(t, e.NewParty(starA, settletest.PartyOptions{}), window, chain.WriterOptions{Clock: frozen})

	for i := range 40 {
		require.NoError(t, ha.Submit(ctx, fmt.Sprintf("p%d", i)))
	}
	synctest.Wait()
	require.Equal(t, 40, ha.Acked())

	rules := []struct {
		slot  uint64
		zone  int
		kind  fault.Effect
		apply bool
	}{
		{40, 1, fault.Fail, true}, {40, 2, fault.Fail, true},
		{43, 0, fault.Straggler, true}, {43, 1, fault.Straggler, true},
		{44, 0, fault.Fail, true}, {44, 1, fault.Fail, true}, {44, 2, fault.Straggler, true},
		{47, 2, fault.Straggler, true},
		{50, 0, fault.Straggler, true}, {50, 1, fault.Straggler, true}, {50, 2, fault.Fail, true},
	}
	for _, r := range rules {
		require.NoError(t, e.Zones[r.zone].AddRule(keyRule(e, starA, ep, r.slot, r.kind)))
	}
	for i := 40; i < 40+window; i++ {
		require.NoError(t, ha.Submit(ctx, fmt.Sprintf("p%d", i)))
	}
	go func() { _ = ha.Submit(ctx, "p56") }() // waits for window space
	synctest.Wait()
	require.Equal(t, 40, ha.Acked(), "slot 40 holds the release point")
	if !zombie {
		wa.Abort()
		synctest.Wait()
	}

	// Star B takes over: fence and settle A's chain.
	b := e.NewParty(starB, settletest.PartyOptions{})
	reps, err := b.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	rep := reps[0]
	require.Equal(t, uint64(44), rep.Cut)
	require.NotNil(t, rep.Fence)
	require.Equal(t, int64(4), rep.Fence.Repaired, "slot 40 into b and c, slot 43 into a and b")
	require.Equal(t, int64(2), rep.Fence.Poisoned)
	require.Equal(t, 4, rep.Covered, "A covered [0, 40) and advanced its checkpoint; settlement covers 40–43")
	require.Positive(t, rep.GarbageDeleted)
	rec := e.Record(starA, ep)
	for s := uint64(45); s < 40+window; s++ {
		require.NotContains(t, e.State(rec, s), "F", "garbage at slot %d", s)
	}
	idsAtCut, _ := settletest.ChainIDs(t, b, starA)

	// The zombie's stragglers arrive after settlement.
	landed := 0
	for _, z := range e.Zones {
		landed += z.ReleaseStragglers(ctx)
	}
	require.Equal(t, 1, strings.Count(e.State(rec, 44), "F"), "a straggler landed at the cut slot")
	require.Equal(t, 2, strings.Count(e.State(rec, 50), "F"), "stragglers landed a quorum of copies past the cut")
	require.Equal(t, 1, strings.Count(e.State(rec, 47), "F"))
	require.GreaterOrEqual(t, landed, 4)

	if zombie {
		// The zombie wakes: its retries find the repaired copies below the
		// cut (late acknowledgements, already covered) and the poison at the
		// cut (it halts; nothing at or past 44 is acknowledged).
		for range 100 {
			synctest.Wait()
			if frozen.Waiters() == 0 {
				break
			}
			frozen.Advance(time.Hour)
		}
		<-wa.Halted()
		require.ErrorIs(t, wa.Err(), chain.ErrFenced)
		var fe *chain.FencedError
		require.ErrorAs(t, wa.Err(), &fe)
		require.Equal(t, uint64(44), fe.Slot, "the zombie halts at the cut")
	}
	// Close absorbs what is left; every checkpoint move it refused was one
	// a stale epoch's checkpoint cannot make (epoch.ErrCursorRegression).
	require.NoError(t, ha.Close(ctx))
	acked, failed := outcome(hist, "host-a")

	// Nothing read or acknowledged the late objects.
	idsNow, _ := settletest.ChainIDs(t, b, starA)
	require.Equal(t, idsAtCut, idsNow)
	var want []string
	for i := range 44 {
		want = append(want, fmt.Sprintf("p%d", i))
	}
	require.Equal(t, want, idsNow, "A's chain is exactly [0, cut)")
	for _, pos := range acked {
		require.Equal(t, ep, pos.Epoch)
	}
	requireServesToCut(t, b, starA, ep)

	// The producer retries what A failed, in order, with B, at offsets
	// past the recovered stream.
	var retry []string
	for _, f := range failed {
		switch {
		case zombie:
			require.ErrorIs(t, f.err, chain.ErrFenced, "%s", f.id)
		case f.id == "p56":
			require.ErrorIs(t, f.err, cutline.ErrClosed)
		default:
			require.ErrorIs(t, f.err, chain.ErrAborted, "%s", f.id)
		}
		retry = append(retry, f.id)
	}
	if zombie {
		require.Len(t, acked, 44, "the zombie acknowledged 40–43 late: they are below the cut and covered")
		require.Len(t, retry, 13)
	} else {
		require.Len(t, acked, 40)
		require.Len(t, retry, 17)
	}
	next, err := b.Refs.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(44), next)
	recB, err := b.Minter.Mint(ctx, starB, e.Constants(2, window))
	require.NoError(t, err)
	wb := b.Writer(recB, chain.WriterOptions{})
	hb := cutlinetest.StartHost(b.Harness(starB), wb, cutlinetest.HostOptions{Name: "host-b", Stream: stream, History: hist})
	for _, id := range retry {
		require.NoError(t, hb.Submit(ctx, id))
	}
	require.NoError(t, hb.Close(ctx))
	require.Empty(t, hb.Failed())

	// The six guarantees over the whole run: every acknowledged record is
	// served exactly once, through the index and in chain order;
	// guarantees 1–4 hold on A's fenced epoch and B's open one.
	e.Verify(hist)
	ids := settletest.CheckStream(t, b, stream)
	for i := range 57 {
		require.Contains(t, ids, fmt.Sprintf("p%d", i))
	}
	if zombie {
		settletest.RequireUnique(t, ids, "stream")
		require.Len(t, ids, 57)
	} else {
		// Aborted appends have an unknown outcome: 40–43 were completed by
		// the fence's repair and are in A's chain, and their producer
		// retried them too (at-least-once for what was never
		// acknowledged).
		require.Len(t, ids, 61)
	}
}

func TestTakeover(t *testing.T) {
	for _, be := range settletest.Backends {
		for _, zombie := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/zombie=%v", be.Name, zombie), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					takeover(t, be.New(t, 3), zombie)
				})
			})
		}
	}
}

// The same takeover with faults drawn at random: each of A's creates past
// slot 30 fails (never retried) or straggles with some probability, A dies
// with whatever ragged tail that left, and B takes over. The expected
// outcome is not scripted; the guarantees are checked.
func TestTakeoverRandomTails(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomTakeover(t, seed) })
		})
	}
}

func randomTakeover(t *testing.T, seed uint64) {
	ctx := context.Background()
	e := settletest.NewOn(t, []objstore.Bucket{memblob.New("a"), memblob.New("b"), memblob.New("c")}, fault.Options{Seed: seed * 16})
	const window = 12
	frozen := clock.NewFake(time.Now())
	ep, wa, ha, hist := startA(t, e.NewParty(starA, settletest.PartyOptions{}), window, chain.WriterOptions{Clock: frozen})
	for i := range 30 {
		require.NoError(t, ha.Submit(ctx, fmt.Sprintf("p%d", i)))
	}
	synctest.Wait()
	for _, z := range e.Zones {
		require.NoError(t, z.AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.Straggler, Probability: 0.15}))
		require.NoError(t, z.AddRule(fault.Rule{Op: fault.OpCreate, Probability: 0.15}))
	}
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 30; i < 200; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = ha.Submit(ctx, fmt.Sprintf("p%d", i)) // a refusal is recorded
		}
	}()
	synctest.Wait() // the window is full, or every record is in
	close(stop)
	wa.Abort()
	<-produced
	synctest.Wait()

	b := e.NewParty(starB, settletest.PartyOptions{})
	reps, err := b.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	cut := reps[0].Cut
	for _, z := range e.Zones {
		z.ClearRules()
		z.ReleaseStragglers(ctx)
	}
	// The writer was aborted under the absorb loop: a checkpoint move
	// it refused then is no finding here.
	if err := ha.Close(ctx); err != nil {
		t.Logf("host A: %v", err)
	}
	acked, failed := outcome(hist, "host-a")
	e.Verify(hist)
	requireServesToCut(t, b, starA, ep)
	ids, _ := settletest.ChainIDs(t, b, starA)
	require.Len(t, ids, int(cut))
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("p%d", i), id)
	}
	next, err := b.Refs.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, cut, next)
	for _, f := range failed {
		require.True(t, errors.Is(f.err, chain.ErrAborted) || errors.Is(f.err, cutline.ErrClosed), "%s: %v", f.id, f.err)
	}
	require.Equal(t, ids, settletest.CheckStream(t, b, stream))
	t.Logf("seed %d: acked %d, cut %d, failed %d, garbage deleted %d", seed, len(acked), cut, len(failed), reps[0].GarbageDeleted)
}

// A takeover of a live writer, seeded: star A appends pipelined (with
// retries) through transient faults, lost answers, straggling creates that
// land on their own later, and latency. When it stops taking new records
// (it lost its lease), its appends in flight keep going while star B fences
// and settles A's chain. A halts at the cut (at the latest with its next
// append); the guarantees are checked once every straggler has landed.
func TestTakeoverOfLiveWriter(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { liveTakeover(t, seed) })
		})
	}
}

func liveTakeover(t *testing.T, seed uint64) {
	ctx := context.Background()
	e := settletest.NewOn(t, []objstore.Bucket{memblob.New("a"), memblob.New("b"), memblob.New("c")},
		fault.Options{Seed: seed * 16, StragglerDelay: 40 * time.Millisecond})
	slow := func(i int, b objstore.Bucket) objstore.Bucket {
		return latency.Wrap(b, latency.Options{Seed: seed*16 + uint64(i), Default: latency.Uniform(time.Millisecond, 6*time.Millisecond)})
	}
	const window = 16
	ep, wa, ha, hist := startA(t, e.NewParty(starA, settletest.PartyOptions{Wrap: slow}), window,
		chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}})
	for _, z := range e.Zones {
		require.NoError(t, z.AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.Straggler, Probability: 0.08}))
		require.NoError(t, z.AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: 0.05}))
		require.NoError(t, z.AddRule(fault.Rule{Probability: 0.05}))
	}
	// A produces until it learns it lost its lease (stop); what it has
	// in flight keeps going, with retries and stragglers.
	stop := make(chan struct{})
	produced := make(chan int)
	go func() {
		i := 0
		defer func() { produced <- i }()
		for ; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = ha.Submit(ctx, fmt.Sprintf("p%d", i)) // a refusal is recorded
		}
	}()
	require.NoError(t, ha.WaitAcked(ctx, 30))
	close(stop)
	n := <-produced

	b := e.NewParty(starB, settletest.PartyOptions{Wrap: slow, Fence: settletest.FenceFast, Settle: settle.Options{Backoff: clock.Backoff{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond}}})
	reps, err := b.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	cut := reps[0].Cut

	// One more append by the zombie: it can only fail.
	_ = ha.Submit(ctx, fmt.Sprintf("p%d", n))
	<-wa.Halted()
	// Every checkpoint move Close's absorb refused was a stale epoch's
	// (epoch.ErrCursorRegression), which the host takes as no error.
	require.NoError(t, ha.Close(ctx))
	for _, z := range e.Zones {
		z.ClearRules()
		z.ReleaseStragglers(ctx)
	}
	acked, failed := outcome(hist, "host-a")
	var fe *chain.FencedError
	require.ErrorAs(t, wa.Err(), &fe)
	require.Equal(t, cut, fe.Slot, "the writer halts exactly at the cut")
	e.Verify(hist)
	requireServesToCut(t, b, starA, ep)
	for _, f := range failed {
		require.ErrorIs(t, f.err, chain.ErrFenced, "%s", f.id)
	}
	ids, _ := settletest.ChainIDs(t, b, starA)
	require.Len(t, ids, int(cut))
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("p%d", i), id)
	}
	require.Len(t, acked, int(cut), "a live writer acknowledges everything below the cut")
	require.Equal(t, ids, settletest.CheckStream(t, b, stream))
	t.Logf("seed %d: cut %d, garbage deleted %d, repaired %d, poisoned %d", seed, cut, reps[0].GarbageDeleted, reps[0].Fence.Repaired, reps[0].Fence.Poisoned)
}
