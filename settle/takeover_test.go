package settle_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	memstore "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/mem"
	"github.com/cutline/cutline/settle"
)

// host is a star's serving side over a plain chain.Writer: it submits
// records pipelined and, in an absorb loop, covers each acknowledged
// flight in the index and advances the epoch's checkpoint past it: the
// host's two duties.
type host struct {
	t     testing.TB
	p     *party
	star  string
	w     *chain.Writer
	queue chan item
	done  chan struct{}

	mu       sync.Mutex
	acked    map[string]chain.Position
	ackOrder []string
	failed   []failure // in submission order
	advance  []error   // refused checkpoint moves
}

type item struct {
	id      string
	payload []byte
	f       *chain.Future
}

type failure struct {
	id  string
	err error
}

func startHost(t testing.TB, p *party, star string, w *chain.Writer) *host {
	h := &host{t: t, p: p, star: star, w: w, queue: make(chan item, 1024), done: make(chan struct{}), acked: map[string]chain.Position{}}
	go h.absorb()
	return h
}

func (h *host) absorb() {
	defer close(h.done)
	ctx := context.Background()
	for it := range h.queue {
		pos, err := it.f.Wait(ctx)
		if err != nil {
			h.mu.Lock()
			h.failed = append(h.failed, failure{it.id, err})
			h.mu.Unlock()
			continue
		}
		// Cover on ack, then advance the checkpoint past what is covered.
		if err := h.p.refs.Cover(ctx, h.star, chain.Flight{Position: pos, Payload: it.payload}); err != nil {
			h.t.Errorf("cover %s at %v: %v", it.id, pos, err)
		}
		_, aerr := h.w.Checkpoint(ctx, pos.Slot+1)
		h.mu.Lock()
		h.acked[it.id] = pos
		h.ackOrder = append(h.ackOrder, it.id)
		if aerr != nil {
			h.advance = append(h.advance, aerr)
		}
		h.mu.Unlock()
	}
}

// submit sends one record; a refused Submit is a failure the producer
// retries.
func (h *host) submit(ctx context.Context, id string, offset uint64) {
	p := record(stream, offset, id)
	f, err := h.w.Submit(ctx, p)
	if err != nil {
		h.mu.Lock()
		h.failed = append(h.failed, failure{id, err})
		h.mu.Unlock()
		return
	}
	h.queue <- item{id: id, payload: p, f: f}
}

func (h *host) ackedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

func (h *host) stop() {
	close(h.queue)
	<-h.done
}

// keyRule makes a fault rule for one slot object's create.
func (e *env) keyRule(star string, ep, slot uint64, kind fault.Kind) fault.Rule {
	return fault.Rule{Op: fault.OpCreate, Prefix: e.key(star, ep, slot), Kind: kind, Count: 1}
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
func takeover(t *testing.T, e *env, zombie bool) {
	ctx := context.Background()
	const window = 16
	a := e.party(starA, partyOpts{})
	recA, err := a.minter.Mint(ctx, starA, e.constants(2, window))
	require.NoError(t, err)
	ep := recA.Epoch
	frozen := clock.NewFake(time.Now())
	wa := a.writer(recA, chain.WriterOptions{Clock: frozen})
	ha := startHost(t, a, starA, wa)

	for i := range 40 {
		ha.submit(ctx, fmt.Sprintf("p%d", i), uint64(i))
	}
	synctest.Wait()
	require.Equal(t, 40, ha.ackedCount())

	rules := []struct {
		slot  uint64
		zone  int
		kind  fault.Kind
		apply bool
	}{
		{40, 1, fault.Fail, true}, {40, 2, fault.Fail, true},
		{43, 0, fault.Straggler, true}, {43, 1, fault.Straggler, true},
		{44, 0, fault.Fail, true}, {44, 1, fault.Fail, true}, {44, 2, fault.Straggler, true},
		{47, 2, fault.Straggler, true},
		{50, 0, fault.Straggler, true}, {50, 1, fault.Straggler, true}, {50, 2, fault.Fail, true},
	}
	for _, r := range rules {
		require.NoError(t, e.zones[r.zone].AddRule(e.keyRule(starA, ep, r.slot, r.kind)))
	}
	for i := 40; i < 40+window; i++ {
		ha.submit(ctx, fmt.Sprintf("p%d", i), uint64(i))
	}
	go ha.submit(ctx, "p56", 56) // waits for window space
	synctest.Wait()
	require.Equal(t, 40, ha.ackedCount(), "slot 40 holds the release point")
	if !zombie {
		wa.Abort()
		synctest.Wait()
	}

	// Star B takes over: fence and settle A's chain.
	b := e.party(starB, partyOpts{})
	reps, err := b.settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	rep := reps[0]
	require.Equal(t, uint64(44), rep.Cut)
	require.NotNil(t, rep.Fence)
	require.Equal(t, int64(4), rep.Fence.Repaired, "slot 40 into b and c, slot 43 into a and b")
	require.Equal(t, int64(2), rep.Fence.Poisoned)
	require.Equal(t, 4, rep.Covered, "A covered [0, 40) and advanced its checkpoint; settlement covers 40–43")
	require.Positive(t, rep.GarbageDeleted)
	before := e.objects(starA, ep)
	for s := uint64(45); s < 40+window; s++ {
		require.Zero(t, before.count(e, starA, ep, s, "flight"), "garbage at slot %d", s)
	}
	idsAtCut, _ := chainIDs(t, b, starA)

	// The zombie's stragglers arrive after settlement.
	landed := 0
	for _, z := range e.zones {
		landed += z.ReleaseStragglers(ctx)
	}
	after := e.objects(starA, ep)
	require.Equal(t, 1, after.count(e, starA, ep, 44, "flight"), "a straggler landed at the cut slot")
	require.Equal(t, 2, after.count(e, starA, ep, 50, "flight"), "stragglers landed a quorum of copies past the cut")
	require.Equal(t, 1, after.count(e, starA, ep, 47, "flight"))
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
		require.NoError(t, wa.Close(ctx))
	}
	ha.stop()

	// Nothing read or acknowledged the late objects.
	idsNow, _ := chainIDs(t, b, starA)
	require.Equal(t, idsAtCut, idsNow)
	var want []string
	for i := range 44 {
		want = append(want, fmt.Sprintf("p%d", i))
	}
	require.Equal(t, want, idsNow, "A's chain is exactly [0, cut)")
	acked := []uint64{}
	for _, pos := range ha.acked {
		require.Equal(t, ep, pos.Epoch)
		acked = append(acked, pos.Slot)
	}
	checkEpochInvariants(t, b, starA, ep, acked)
	for _, err := range ha.advance {
		require.ErrorIs(t, err, epoch.ErrCursorRegression, "a stale epoch's checkpoint never moves")
	}

	// The producer retries what A failed, in order, with B, at offsets
	// past the recovered stream.
	var retry []string
	for _, f := range ha.failed {
		switch {
		case zombie:
			require.ErrorIs(t, f.err, chain.ErrFenced, "%s", f.id)
		case f.id == "p56":
			require.ErrorIs(t, f.err, chain.ErrClosed)
		default:
			require.ErrorIs(t, f.err, chain.ErrAborted, "%s", f.id)
		}
		retry = append(retry, f.id)
	}
	if zombie {
		require.Len(t, ha.acked, 44, "the zombie acknowledged 40–43 late: they are below the cut and covered")
		require.Len(t, retry, 13)
	} else {
		require.Len(t, ha.acked, 40)
		require.Len(t, retry, 17)
	}
	next, err := b.refs.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(44), next)
	recB, err := b.minter.Mint(ctx, starB, e.constants(2, window))
	require.NoError(t, err)
	wb := b.writer(recB, chain.WriterOptions{})
	hb := startHost(t, b, starB, wb)
	for j, id := range retry {
		hb.submit(ctx, id, next+uint64(j))
	}
	require.NoError(t, wb.Close(ctx))
	hb.stop()
	require.Empty(t, hb.failed)

	ids := checkStream(t, b, stream)
	for id := range ha.acked {
		require.Equal(t, 1, count(ids, id), "acknowledged %s must be served exactly once", id)
	}
	for i := range 57 {
		require.Contains(t, ids, fmt.Sprintf("p%d", i))
	}
	if zombie {
		requireUnique(t, ids, "stream")
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
	for _, be := range backends {
		for _, zombie := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/zombie=%v", be.name, zombie), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					takeover(t, be.make(t, 3), zombie)
				})
			})
		}
	}
}

// The same takeover with faults drawn at random: each of A's creates past
// slot 30 fails (never retried) or straggles with some probability, A dies
// with whatever ragged tail that left, and B takes over. The expected
// outcome is not scripted; the invariants are checked.
func TestTakeoverRandomTails(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomTakeover(t, seed) })
		})
	}
}

func randomTakeover(t *testing.T, seed uint64) {
	ctx := context.Background()
	e := newEnvOn(t, []objstore.Bucket{mem.New("a"), mem.New("b"), mem.New("c")}, seed)
	const window = 12
	a := e.party(starA, partyOpts{})
	recA, err := a.minter.Mint(ctx, starA, e.constants(2, window))
	require.NoError(t, err)
	ep := recA.Epoch
	frozen := clock.NewFake(time.Now())
	wa := a.writer(recA, chain.WriterOptions{Clock: frozen})
	ha := startHost(t, a, starA, wa)
	for i := range 30 {
		ha.submit(ctx, fmt.Sprintf("p%d", i), uint64(i))
	}
	synctest.Wait()
	for _, z := range e.zones {
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
			ha.submit(ctx, fmt.Sprintf("p%d", i), uint64(i))
		}
	}()
	synctest.Wait() // the window is full, or every record is in
	close(stop)
	wa.Abort()
	<-produced
	synctest.Wait()

	b := e.party(starB, partyOpts{})
	reps, err := b.settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	cut := reps[0].Cut
	for _, z := range e.zones {
		z.ClearRules()
		z.ReleaseStragglers(ctx)
	}
	ha.stop()
	var acked []uint64
	for _, pos := range ha.acked {
		acked = append(acked, pos.Slot)
	}
	checkEpochInvariants(t, b, starA, ep, acked)
	ids, _ := chainIDs(t, b, starA)
	require.Len(t, ids, int(cut))
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("p%d", i), id)
	}
	next, err := b.refs.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, cut, next)
	for _, f := range ha.failed {
		require.True(t, errors.Is(f.err, chain.ErrAborted) || errors.Is(f.err, chain.ErrClosed), "%s: %v", f.id, f.err)
	}
	indexed := checkStream(t, b, stream)
	require.Equal(t, ids, indexed)
	for id := range ha.acked {
		require.Equal(t, 1, count(indexed, id))
	}
	t.Logf("seed %d: acked %d, cut %d, failed %d, garbage deleted %d", seed, len(ha.acked), cut, len(ha.failed), reps[0].GarbageDeleted)
}

// A takeover of a live writer, seeded: star A appends pipelined (with
// retries) through transient faults, lost answers, straggling creates that
// land on their own later, and latency. When it stops taking new records
// (it lost its lease), its appends in flight keep going while star B fences
// and settles A's chain. A halts at the cut (at the latest with its next
// append); the invariants are checked once every straggler has landed.
func TestTakeoverOfLiveWriter(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { liveTakeover(t, seed) })
		})
	}
}

func liveTakeover(t *testing.T, seed uint64) {
	ctx := context.Background()
	var raw []objstore.Bucket
	for _, n := range []string{"a", "b", "c"} {
		raw = append(raw, mem.New(n))
	}
	e := &env{t: t, store: memstore.New(memstore.Options{}), raw: raw, keys: chain.Keys{Prefix: "chains"}}
	for i, b := range raw {
		e.zones = append(e.zones, fault.Wrap(b, fault.Options{Seed: seed*16 + uint64(i), StragglerDelay: 40 * time.Millisecond}))
	}
	slow := func(i int, b objstore.Bucket) objstore.Bucket {
		return latency.Wrap(b, latency.Options{Seed: seed*16 + uint64(i), Default: latency.Uniform(time.Millisecond, 6*time.Millisecond)})
	}
	const window = 16
	a := e.party(starA, partyOpts{wrap: slow})
	recA, err := a.minter.Mint(ctx, starA, e.constants(2, window))
	require.NoError(t, err)
	ep := recA.Epoch
	wa := a.writer(recA, chain.WriterOptions{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	ha := startHost(t, a, starA, wa)
	for _, z := range e.zones {
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
			ha.submit(ctx, fmt.Sprintf("p%d", i), uint64(i))
		}
	}()
	for ha.ackedCount() < 30 {
		time.Sleep(time.Millisecond) // synctest time: lets A run
	}
	close(stop)
	n := <-produced

	b := e.party(starB, partyOpts{wrap: slow, fence: fenceFast, settle: settle.Options{Backoff: 5 * time.Millisecond}})
	reps, err := b.settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	cut := reps[0].Cut

	// One more append by the zombie: it can only fail.
	ha.submit(ctx, fmt.Sprintf("p%d", n), uint64(n))
	<-wa.Halted()
	require.NoError(t, wa.Close(ctx))
	ha.stop()
	for _, z := range e.zones {
		z.ClearRules()
		z.ReleaseStragglers(ctx)
	}
	var acked []uint64
	for _, pos := range ha.acked {
		acked = append(acked, pos.Slot)
	}
	var fe *chain.FencedError
	require.ErrorAs(t, wa.Err(), &fe)
	require.Equal(t, cut, fe.Slot, "the writer halts exactly at the cut")
	checkEpochInvariants(t, b, starA, ep, acked)
	for _, f := range ha.failed {
		require.ErrorIs(t, f.err, chain.ErrFenced, "%s", f.id)
	}
	ids, _ := chainIDs(t, b, starA)
	require.Len(t, ids, int(cut))
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("p%d", i), id)
	}
	require.Len(t, acked, int(cut), "a live writer acknowledges everything below the cut")
	require.Equal(t, ids, checkStream(t, b, stream))
	for _, err := range ha.advance {
		require.ErrorIs(t, err, epoch.ErrCursorRegression)
	}
	t.Logf("seed %d: cut %d, garbage deleted %d, repaired %d, poisoned %d", seed, cut, reps[0].GarbageDeleted, reps[0].Fence.Repaired, reps[0].Fence.Poisoned)
}
