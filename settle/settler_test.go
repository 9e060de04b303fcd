package settle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/settle"
)

// deadLayout is a dead writer's epoch laid out directly in storage, K=3,
// W=2, window 8 (so settlement looks at [cut, cut+8]):
//
//	slots 0–9   committed (zones a, b; c holds the even slots too)
//	slot 10     one copy (a): a fence repairs it
//	slot 11     nothing: a fence poisons a and b, the cut is 11
//	slot 12     committed past the hole (b, c): garbage
//	slot 13     one copy (c): garbage
//	slot 14     a foreign object in a (not ours to delete)
//
// plus an object under the epoch's prefix that is not a slot key.
type deadLayout struct {
	ep    uint64
	cut   uint64
	acked []uint64 // the slots the writer acknowledged: 0–9
	claim *epoch.Claim
}

func layDeadEpoch(t testing.TB, e *settletest.Env, p *settletest.Party) deadLayout {
	t.Helper()
	ctx := context.Background()
	rec, err := p.Minter.Mint(ctx, starA, e.Constants(2, 8))
	require.NoError(t, err)
	ep := rec.Epoch
	put := func(slot uint64, zones ...int) {
		for _, z := range zones {
			e.PutFlight(z, starA, ep, slot, record(stream, slot, fmt.Sprintf("r%d", slot)))
		}
	}
	for s := uint64(0); s < 10; s++ {
		put(s, 0, 1)
		if s%2 == 0 {
			put(s, 2)
		}
	}
	put(10, 0)
	put(12, 1, 2)
	put(13, 2)
	require.NoError(t, e.Raw[0].Create(ctx, e.Key(starA, ep, 14), []byte("not a slot object")))
	require.NoError(t, e.Raw[1].Create(ctx, e.Keys.Epoch(starA, ep)+"notes", []byte("operator notes")))
	var acked []uint64
	for s := uint64(0); s < 10; s++ {
		acked = append(acked, s)
	}
	cl, err := rec.Claim() // the dead writer's claim, for tests that move its checkpoint
	require.NoError(t, err)
	return deadLayout{ep: ep, cut: 11, acked: acked, claim: cl}
}

// recorder is a Coverage that records what it was handed.
type recorder struct {
	mu    sync.Mutex
	got   []chain.Position
	fail  error
	inner settle.Coverage
}

func (r *recorder) Cover(ctx context.Context, star string, f chain.Flight) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.got = append(r.got, f.Position)
	if r.inner != nil {
		return r.inner.Cover(ctx, star, f)
	}
	return nil
}

func positions(ep uint64, from, to uint64) []chain.Position {
	var out []chain.Position
	for s := from; s < to; s++ {
		out = append(out, chain.Position{Epoch: ep, Slot: s})
	}
	return out
}

func TestSettleOpenEpochFencesThenSettles(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, p)

	rep, err := p.Settler.Settle(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Equal(t, l.cut, rep.Cut)
	require.NotNil(t, rep.Fence, "an open epoch is fenced first")
	require.Equal(t, l.cut, rep.Fence.Cut)
	require.False(t, rep.AlreadySettled)
	// Garbage: slot 12 in b and c, slot 13 in c.
	require.Equal(t, 3, rep.GarbageDeleted)
	require.Zero(t, rep.GarbageLeft)
	require.Equal(t, 11, rep.Covered, "slots [0, 11) with the checkpoint at 0")
	// The fence read the garbage ahead, so the sweep deletes it without
	// probing it: it probes only the other objects it lists (the cut's
	// two poisons and the foreign object at 14).
	require.Equal(t, []fence.Copy{{Bucket: "b", Slot: 12}, {Bucket: "c", Slot: 12}, {Bucket: "c", Slot: 13}}, rep.Fence.Garbage)
	// Coverage takes the flights of the slots the walk decided, [2, 11)
	// (the estimate 10 less the window; slot 10 once repaired), from the
	// copies the fence read whole, and reads the others.
	require.Equal(t, uint64(2), rep.Fence.WalkStart)
	require.Equal(t, 9, rep.Kept)
	require.Equal(t, 3, rep.Reads-(rep.Covered-rep.Kept), "probes")
	require.Equal(t, 3, rep.Deletes)

	rec := p.Env.On(t).VerifyEpoch(starA, l.ep, l.acked)
	require.Equal(t, epoch.StateSettled, rec.State)
	require.Equal(t, l.cut, rec.Cursors.Checkpoint)
	require.Equal(t, "P P E", e.State(rec, 11))
	for s := uint64(12); s <= l.cut+8; s++ {
		require.NotContains(t, e.State(rec, s), "F", "slot %d past the cut keeps a flight", s)
	}
	require.Equal(t, "X E E", e.State(rec, 14), "a foreign object past the cut is left untouched")
	_, err = e.Raw[1].Get(ctx, e.Keys.Epoch(starA, l.ep)+"notes")
	require.NoError(t, err, "a non-slot object is left untouched")
	require.Len(t, settletest.RefsOf(t, p.Refs, stream), 11)
	require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10"}, settletest.CheckStream(t, p, stream))
}

// A fencer published the cut and died; then a straggler landed a copy at
// the cut slot itself. Settlement deletes that stray copy too and leaves
// the poison standing.
func TestSettleFencedEpochDeletesStrayCopyAtCut(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{NoFencer: true})
	l := layDeadEpoch(t, e, p)
	e.PutFlight(1, starA, l.ep, 10, record(stream, 10, "r10")) // the earlier fencer's repair
	e.PutPoison(0, starA, l.ep, 11)
	e.PutPoison(1, starA, l.ep, 11)
	_, err := p.Minter.Publish(ctx, starA, l.ep, l.cut)
	require.NoError(t, err)
	e.PutFlight(2, starA, l.ep, 11, record(stream, 11, "r11")) // the straggler

	rep, err := p.Settler.Settle(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Nil(t, rep.Fence, "a fenced epoch is not fenced again")
	require.Equal(t, 4, rep.GarbageDeleted, "slot 11 in c, 12 in b and c, 13 in c")
	rec := p.Env.On(t).VerifyEpoch(starA, l.ep, l.acked)
	require.Equal(t, "P P E", e.State(rec, 11), "the stray copy is deleted, the poison stands")
}

func TestSettleCoversExactlyCheckpointToCutInOrder(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, p)
	// The host covered [0, 4) and advanced the checkpoint.
	_, err := l.claim.Advance(ctx, 4)
	require.NoError(t, err)
	rc := &recorder{}
	s, err := settle.New(p.Minter, p.Zones, rc, settle.Options{Fencer: p.Fencer})
	require.NoError(t, err)
	rep, err := s.Settle(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Equal(t, positions(l.ep, 4, 11), rc.got, "exactly the committed flights in [checkpoint, cut), in order")
	require.Equal(t, 7, rep.Covered)
}

func TestSettleCoverageFailureLeavesEpochFenced(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, p)
	boom := errors.New("index down")
	rc := &recorder{fail: boom}
	s, err := settle.New(p.Minter, p.Zones, rc, settle.Options{Fencer: p.Fencer})
	require.NoError(t, err)
	_, err = s.Settle(ctx, starA, l.ep)
	require.ErrorIs(t, err, boom)
	rec, err := p.Minter.Get(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Equal(t, epoch.StateFenced, rec.State, "coverage not restored: not settled")
	require.Zero(t, rec.Cursors.Checkpoint)

	rc.fail = nil
	rep, err := s.Settle(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Equal(t, positions(l.ep, 0, 11), rc.got)
	require.Zero(t, rep.GarbageDeleted, "the first attempt deleted the garbage already")
}

func TestSettleRequiresFence(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{NoFencer: true})
	l := layDeadEpoch(t, e, p)
	before := e.States(e.Record(starA, l.ep))
	_, err := p.Settler.Settle(ctx, starA, l.ep)
	require.ErrorIs(t, err, epoch.ErrState)
	var se *epoch.StateError
	require.ErrorAs(t, err, &se)
	require.Equal(t, epoch.StateOpen, se.Have)
	require.Equal(t, before, e.States(e.Record(starA, l.ep)), "nothing touched")
	rec, err := p.Minter.Get(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Equal(t, epoch.StateOpen, rec.State)

	_, err = p.Settler.Settle(ctx, starA, l.ep+1)
	require.ErrorIs(t, err, epoch.ErrNoRecord)
	_, err = p.Settler.Settle(ctx, "bad/star", 1)
	require.ErrorIs(t, err, cutline.ErrInvalid)
}

func TestSettleSettledIsNoop(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, p)
	_, err := p.Settler.Settle(ctx, starA, l.ep)
	require.NoError(t, err)
	rec1, err := p.Minter.Get(ctx, starA, l.ep)
	require.NoError(t, err)
	for _, z := range e.Zones {
		z.ResetStats()
	}
	rep, err := p.Settler.Settle(ctx, starA, l.ep)
	require.NoError(t, err)
	require.True(t, rep.AlreadySettled)
	require.Equal(t, l.cut, rep.Cut)
	require.Zero(t, rep.Reads+rep.Deletes+rep.Covered+rep.GarbageDeleted)
	for _, z := range e.Zones {
		st := z.Stats()
		for op, n := range st.Calls {
			require.Zero(t, n, "a settled epoch costs no %s requests", op)
		}
	}
	rec2, err := p.Minter.Get(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Equal(t, rec1.Revision, rec2.Revision, "the record is not written again")
}

// A bucket that stays unreachable while the garbage is deleted keeps its
// copies (harmless: nothing reads past the cut); the epoch still settles.
func TestSettleUnreachableBucketLeavesGarbage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		p := e.NewParty("successor", settletest.PartyOptions{Settle: settle.Options{Retries: 2, Backoff: clock.Backoff{Min: time.Second, Max: time.Second}}})
		l := layDeadEpoch(t, e, p)
		_, err := p.Fencer.Fence(ctx, starA, l.ep)
		require.NoError(t, err)
		e.Zones[2].SetDown(true)
		start := time.Now()
		rep, err := p.Settler.Settle(ctx, starA, l.ep)
		require.NoError(t, err)
		require.Equal(t, 2*time.Second, time.Since(start), "two retries, one backoff each (synctest time)")
		// Slots 11..19 in c were never observed: 9 targets left. b's copy
		// of slot 12 is deleted.
		require.Equal(t, 9, rep.GarbageLeft)
		require.Equal(t, 1, rep.GarbageDeleted)
		e.Zones[2].SetDown(false)
		rec := p.Env.On(t).VerifyEpoch(starA, l.ep, l.acked)
		require.Equal(t, "E E F", e.State(rec, 12), "c keeps its copies")
		require.Equal(t, "E E F", e.State(rec, 13))
		require.Equal(t, epoch.StateSettled, rec.State)
	})
}

// Transient delete failures are retried.
func TestSettleRetriesFailedDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		p := e.NewParty("successor", settletest.PartyOptions{})
		l := layDeadEpoch(t, e, p)
		require.NoError(t, e.Zones[2].AddRule(fault.Rule{Op: fault.OpDelete, Count: 1}))
		require.NoError(t, e.Zones[1].AddRule(fault.Rule{Op: fault.OpDelete, Kind: fault.LostAnswer, Count: 1}))
		rep, err := p.Settler.Settle(ctx, starA, l.ep)
		require.NoError(t, err)
		require.Zero(t, rep.GarbageLeft)
		require.Equal(t, 2, rep.GarbageDeleted, "one delete failed before landing and was repeated; one landed with its answer lost and found nothing to delete")
		rec := e.Record(starA, l.ep)
		for s := l.cut; s <= l.cut+8; s++ {
			require.NotContains(t, e.State(rec, s), "F", "slot %d", s)
		}
	})
}

func TestSettleAllSettlesEveryUnsettledEpochOldestFirst(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{})
	c := e.Constants(2, 4)
	var eps []uint64
	for range 3 {
		rec := p.Mint(ctx, starA, c)
		eps = append(eps, rec.Epoch)
		for s := range uint64(3) {
			for z := range 2 {
				e.PutFlight(z, starA, rec.Epoch, s, record(stream, uint64(len(eps)-1)*3+s, fmt.Sprintf("e%ds%d", rec.Epoch, s)))
			}
		}
	}
	_, err := p.Settler.Settle(ctx, starA, eps[0])
	require.NoError(t, err)
	_, err = p.Fencer.Fence(ctx, starA, eps[1])
	require.NoError(t, err)

	reps, err := p.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Len(t, reps, 2)
	require.Equal(t, eps[1], reps[0].Epoch)
	require.Nil(t, reps[0].Fence)
	require.Equal(t, eps[2], reps[1].Epoch)
	require.NotNil(t, reps[1].Fence)
	for _, ep := range eps {
		rec := p.Env.On(t).VerifyEpoch(starA, ep, []uint64{0, 1, 2})
		require.Equal(t, epoch.StateSettled, rec.State)
		require.Equal(t, uint64(3), rec.Cut)
	}
	ids, _ := settletest.ChainIDs(t, p, starA)
	require.Len(t, ids, 9)
	require.Len(t, settletest.CheckStream(t, p, stream), 9)

	reps, err = p.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Empty(t, reps, "nothing left to settle")
	reps, err = p.Settler.SettleAll(ctx, "never-wrote")
	require.NoError(t, err)
	require.Empty(t, reps)
}

func TestNewValidates(t *testing.T) {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("x", settletest.PartyOptions{})
	_, err := settle.New(nil, p.Zones, p.Refs, settle.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = settle.New(p.Minter, p.Zones, nil, settle.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = settle.New(p.Minter, p.Zones, p.Refs, settle.Options{Retries: -1})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = settle.New(p.Minter, chain.Zones{}, p.Refs, settle.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
}

// Settling an epoch reads only that epoch: a later epoch whose first
// flight no bucket can serve does not stop it.
func TestSettleReadsOnlyItsEpoch(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("successor", settletest.PartyOptions{})
	c := e.Constants(2, 4)
	first := p.Mint(ctx, starA, c)
	for s := range uint64(3) {
		for z := range 3 {
			e.PutFlight(z, starA, first.Epoch, s, record(stream, s, fmt.Sprint(s)))
		}
	}
	_, err := p.Fencer.Fence(ctx, starA, first.Epoch)
	require.NoError(t, err)
	second := p.Mint(ctx, starA, c)
	for z := range 3 {
		require.NoError(t, e.Raw[z].Create(ctx, e.Key(starA, second.Epoch, 0), []byte("corrupt")))
	}
	_, err = p.Minter.Publish(ctx, starA, second.Epoch, 1) // as a (mistaken) fencer did
	require.NoError(t, err)
	rep, err := p.Settler.Settle(ctx, starA, first.Epoch)
	require.NoError(t, err)
	require.Equal(t, 3, rep.Covered)
	rec, err := p.Minter.Get(ctx, starA, first.Epoch)
	require.NoError(t, err)
	require.Equal(t, epoch.StateSettled, rec.State)
}

// Successors racing to settle the same epoch converge: one cut, one set of
// refs, every call succeeds.
func TestSettleRacingSettlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		l := layDeadEpoch(t, e, e.NewParty("host", settletest.PartyOptions{}))
		var wg sync.WaitGroup
		reps := make([]settle.SettleReport, 4)
		errs := make([]error, 4)
		for i := range reps {
			p := e.NewParty(fmt.Sprintf("successor-%d", i), settletest.PartyOptions{Fence: settletest.FenceFast})
			wg.Go(func() { reps[i], errs[i] = p.Settler.Settle(ctx, starA, l.ep) })
		}
		wg.Wait()
		for i := range reps {
			require.NoError(t, errs[i])
			require.Equal(t, l.cut, reps[i].Cut)
		}
		p := e.NewParty("checker", settletest.PartyOptions{})
		p.Env.On(t).VerifyEpoch(starA, l.ep, l.acked)
		require.Len(t, settletest.CheckStream(t, p, stream), int(l.cut))
	})
}

// K=1, W=1: one poison kills a slot. A takeover of a single-zone chain
// settles like any other.
func TestSettleSingleZone(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 1)
	a := e.NewParty(starA, settletest.PartyOptions{})
	rec := a.Mint(ctx, starA, e.Constants(1, 4))
	w := a.Writer(rec, chain.WriterOptions{})
	var acked []uint64
	for i := range 5 {
		pos, err := w.Append(ctx, record(stream, uint64(i), fmt.Sprint(i)))
		require.NoError(t, err)
		acked = append(acked, pos.Slot)
	}
	w.Abort()
	e.PutFlight(0, starA, rec.Epoch, 6, record(stream, 6, "6")) // past a hole: garbage
	b := e.NewParty(starB, settletest.PartyOptions{})
	reps, err := b.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Equal(t, uint64(5), reps[0].Cut)
	require.Equal(t, 1, reps[0].GarbageDeleted)
	b.Env.On(t).VerifyEpoch(starA, rec.Epoch, acked)
	require.Len(t, settletest.CheckStream(t, b, stream), 5)
}

// A writer abandoned an epoch whose flights bundle three streams, after
// its host covered the first four flights but moved the checkpoint only to
// 2. Settlement covers every span of every flight of [checkpoint, cut), in
// slot order: each stream is tiled, each ref names its flight and the
// bytes of its run.
func TestSettleCoversBundledSpans(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	host := e.NewParty("host", settletest.PartyOptions{})
	refs, err := settle.NewRefIndex(host.Store, "", locateRuns)
	require.NoError(t, err)
	rec := host.Mint(ctx, starA, e.Constants(2, 8))
	w := host.Writer(rec, chain.WriterOptions{})
	// Flight i carries i%3+1 records of a, 2 of b, and one of c but
	// every third flight; the streams come in a different order each
	// time.
	next := map[string]uint64{}
	run := func(s string, n uint64) string {
		line := fmt.Sprintf("%s %d %d", s, next[s], n)
		next[s] += n
		return line
	}
	var payloads [][]byte
	for i := range 9 {
		lines := []string{run("a", uint64(i%3+1)), run("b", 2)}
		if i%3 != 2 {
			lines = append(lines, run("c", 1))
		}
		if i%2 == 1 {
			slices.Reverse(lines)
		}
		p := runs(lines...)
		pos, err := w.Append(ctx, p)
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: uint64(i)}, pos)
		payloads = append(payloads, p)
		if i < 4 {
			require.NoError(t, refs.Cover(ctx, starA, chain.Flight{Position: pos, Payload: p}))
		}
	}
	_, err = w.Checkpoint(ctx, 2)
	require.NoError(t, err)
	w.Abort()

	successor := e.NewParty("successor", settletest.PartyOptions{})
	s, err := settle.New(successor.Minter, successor.Zones, refs, settle.Options{Fencer: successor.Fencer})
	require.NoError(t, err)
	reps, err := s.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.Equal(t, uint64(9), reps[0].Cut)
	require.Equal(t, 7, reps[0].Covered, "flights [2, 9), counted as flights")

	for _, stream := range []string{"a", "b", "c"} {
		var at uint64
		for _, r := range settletest.RefsOf(t, refs, stream) {
			require.Equal(t, at, r.Offset, "stream %s is tiled", stream)
			at += r.Count
			require.Equal(t, starA, r.Star)
			p := payloads[r.Slot]
			require.Equal(t, fmt.Sprintf("%s %d %d\n", stream, r.Offset, r.Count), string(p[r.Start:r.End]),
				"the ref's bytes hold its run")
		}
		require.Equal(t, next[stream], at, "stream %s is covered to its end", stream)
		n, err := refs.Next(ctx, stream)
		require.NoError(t, err)
		require.Equal(t, next[stream], n)
	}
	require.Len(t, settletest.RefsOf(t, refs, "a"), 9)
	require.Len(t, settletest.RefsOf(t, refs, "b"), 9)
	require.Len(t, settletest.RefsOf(t, refs, "c"), 6)
}
