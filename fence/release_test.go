package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// hookBucket calls before ahead of every Create it forwards: a test's
// window into the order of requests.
type hookBucket struct {
	objstore.Bucket
	before func(key string, data []byte)
}

func (h hookBucket) Create(ctx context.Context, key string, data []byte) error {
	h.before(key, data)
	return h.Bucket.Create(ctx, key, data)
}

// When a straggling create of the writer lands, relative to FenceAt.
type landing int

const (
	landBefore landing = iota // before FenceAt starts
	landDuring                // while its poison creates are in flight
	landAfter                 // after FenceAt returned (and again after Settle)
)

type straggler struct {
	zone int
	d    uint64 // slots past the release point
	when landing
}

// TestFenceAtStragglers races straggling creates of the same writer (at
// its release slot and past it, landing before, during and after the
// poison) against FenceAt, over many seeds, and checks every guarantee
// on the fenced and settled epoch with cutlinetest. A straggler that holds
// the release slot in one of the B buckets FenceAt poisons must send it to
// the full fence; without one, the cut is the release point.
func TestFenceAtStragglers(t *testing.T) {
	seeds := uint64(200)
	if testing.Short() {
		seeds = 40
	}
	var fast, fellBack int
	for seed := range seeds {
		at, ok := plannedRollRun(t, seed)
		if !ok {
			return
		}
		if at {
			fast++
		} else {
			fellBack++
		}
	}
	t.Logf("%d seeds: %d fenced at the release point, %d fell back to the full fence", seeds, fast, fellBack)
	if fast == 0 || fellBack == 0 {
		t.Fatalf("the seeds must cover both paths: %d fast, %d fell back", fast, fellBack)
	}
}

// plannedRollRun runs one seed of TestFenceAtStragglers. It reports
// whether FenceAt decided at the release point, and false for ok once t
// failed.
func plannedRollRun(t testing.TB, seed uint64) (atRelease, ok bool) {
	ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 0x57a991e4))
	kw := [][2]int{{3, 2}, {3, 2}, {5, 3}, {3, 1}, {5, 4}, {1, 1}}[seed%6]
	k, w := kw[0], kw[1]
	b := k - w + 1
	window := 2 + rng.IntN(6)
	const star = "star-a"

	// The plan: stragglers at the release slot and past it, in random
	// zones, landing before, during or after the poison.
	var plan []straggler
	for range rng.IntN(2 * k) {
		// Past the release point, but within the window of it: a
		// writer sends a create only for a slot it assigned, and it
		// assigns one only below its release point plus the window (the
		// fence's estimate rests on that too).
		d := uint64(0)
		if rng.IntN(2) == 0 {
			d = uint64(rng.IntN(window))
		}
		plan = append(plan, straggler{zone: rng.IntN(k), d: d, when: landing(rng.IntN(3))})
	}
	buckets := make([]objstore.Bucket, k)
	for i := range buckets {
		buckets[i] = memblob.New(fmt.Sprintf("zone-%c", 'a'+i))
	}
	var (
		hookMu     sync.Mutex
		releaseKey string    // set once the release point is known
		during     sync.Once // the stragglers landing "during" land once
		land       func(when landing)
	)
	e := cutlinetest.New(t, memstore.New(memstore.Options{}), buckets, cutlinetest.Options{
		Wrap: func(i int, z objstore.Bucket) objstore.Bucket {
			return hookBucket{Bucket: z, before: func(key string, data []byte) {
				hookMu.Lock()
				fire := releaseKey != "" && key == releaseKey
				hookMu.Unlock()
				if fire {
					// The first create at the release slot (FenceAt's
					// poison, or a racing fencer's): the stragglers
					// "during" land now, racing the creates in flight.
					during.Do(func() { land(landDuring) })
				}
			}}
		},
	})
	a := e.Party("star-a")
	rec := a.Mint(star, e.Constants(w, window))
	wr := a.Writer(rec, chain.WriterOptions{})
	n := rng.IntN(3*window + 1)
	var futs []*chain.Future
	for i := range n {
		f, err := wr.Submit(ctx, cutlinetest.Record("s", uint64(i), fmt.Sprintf("r%d", i)))
		if err != nil {
			t.Fatalf("seed %d: submit %d: %v", seed, i, err)
		}
		futs = append(futs, f)
	}
	var acked []uint64
	for i, f := range futs {
		pos, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("seed %d: append %d: %v", seed, i, err)
		}
		acked = append(acked, pos.Slot)
	}
	if n > 0 && rng.IntN(2) == 0 {
		// The host covered and checkpointed a prefix.
		c := uint64(rng.IntN(n + 1))
		for s := range c {
			if err := a.Refs.Cover(ctx, star, chain.Flight{Position: chain.Position{Epoch: rec.Epoch, Slot: s}, Payload: cutlinetest.Record("s", s, fmt.Sprintf("r%d", s))}); err != nil {
				t.Fatalf("seed %d: cover %d: %v", seed, s, err)
			}
		}
		if _, err := wr.Checkpoint(ctx, c); err != nil {
			t.Fatalf("seed %d: checkpoint %d: %v", seed, c, err)
		}
	}
	// A clean close: nothing in flight, every slot assigned acknowledged.
	if err := wr.Close(ctx); err != nil {
		t.Fatalf("seed %d: close: %v", seed, err)
	}
	rel := wr.Released()
	if wr.Err() != nil || rel != wr.Stats().Submitted || rel != uint64(n) {
		t.Fatalf("seed %d: not a clean close: err %v, released %d, submitted %d", seed, wr.Err(), rel, wr.Stats().Submitted)
	}

	// A straggler is a create of the same writer: for a slot, one flight,
	// the same bytes in every zone.
	land = func(when landing) {
		for _, s := range plan {
			if s.when != when {
				continue
			}
			slot := rel + s.d
			data := wire.EncodeFlight(star, rec.Epoch, slot, cutlinetest.Record("s", slot, fmt.Sprintf("straggler-%d", slot)))
			err := e.Raw[s.zone].Create(ctx, cutlinetest.Slot(rec, slot).Key(), data)
			if err != nil && !errors.Is(err, objstore.ErrExists) {
				t.Errorf("seed %d: straggler at %d in zone %d: %v", seed, slot, s.zone, err)
			}
		}
	}
	land(landBefore)
	// Whether a straggler holds the release slot in a bucket FenceAt
	// poisons before it gets there: then it must not decide alone.
	mustFallBack, mayFallBack := false, false
	for _, s := range plan {
		if s.d == 0 && s.zone < b {
			mustFallBack = mustFallBack || s.when == landBefore
			mayFallBack = mayFallBack || s.when != landAfter
		}
	}
	hookMu.Lock()
	releaseKey = cutlinetest.Slot(rec, rel).Key()
	hookMu.Unlock()

	// Some seeds race a full fence of another party against FenceAt.
	var racer chan error
	var racerCut uint64
	if seed%4 == 1 {
		racer = make(chan error, 1)
		p := e.Party("star-b")
		go func() {
			var err error
			racerCut, err = p.Fencer.Fence(ctx, star, rec.Epoch)
			racer <- err
		}()
	}
	rep, err := a.Fencer.FenceAt(ctx, star, rec.Epoch, rel)
	if err != nil {
		t.Fatalf("seed %d: FenceAt(%d): %v", seed, rel, err)
	}
	during.Do(func() { land(landDuring) }) // when nothing created at the release slot
	if racer != nil {
		if err := failfast.Recv(t, racer, "the racing fence"); err != nil {
			t.Fatalf("seed %d: racing fence: %v", seed, err)
		}
		if racerCut != rep.Cut {
			t.Fatalf("seed %d: FenceAt cut %d, racing fence cut %d", seed, rep.Cut, racerCut)
		}
	}
	switch {
	case rep.AtRelease && rep.Cut != rel:
		t.Fatalf("seed %d: fenced at the release point %d with cut %d", seed, rel, rep.Cut)
	case rep.AtRelease && mustFallBack:
		t.Fatalf("seed %d: a straggler held the release slot %d in a poisoned bucket, and FenceAt decided alone: %+v", seed, rel, rep)
	case !rep.AtRelease && !mayFallBack && racer == nil:
		t.Fatalf("seed %d: nothing held the release slot, and FenceAt fell back: %+v", seed, rep)
	case rep.Cut < rel:
		t.Fatalf("seed %d: cut %d below the release point %d", seed, rep.Cut, rel)
	}
	land(landAfter)
	if _, err := a.Settler.Settle(ctx, star, rec.Epoch); err != nil {
		t.Fatalf("seed %d: settle: %v", seed, err)
	}
	land(landAfter) // and again, once the garbage was swept
	if vs := e.CheckEpoch(star, rec.Epoch, acked); len(vs) > 0 {
		t.Errorf("seed %d (K=%d W=%d window %d, release %d, stragglers %+v, report %+v):", seed, k, w, window, rel, plan, rep)
		cutlinetest.Require(t, vs)
	}
	if rep.AtRelease && (rep.Rounds > 2 || rep.Creates != int64(b)) {
		t.Fatalf("seed %d: FenceAt took %d rounds and %d creates (B=%d)", seed, rep.Rounds, rep.Creates, b)
	}
	return rep.AtRelease, !t.Failed()
}

// TestFenceAtRefusesBelowCheckpoint: a release point below the checkpoint
// cannot be the writer's, and nothing is written.
func TestFenceAtRefusesBelowCheckpoint(t *testing.T) {
	ctx := t.Context()
	e := cutlinetest.NewMem(t, 3)
	a := e.Party("star-a")
	rec := a.Mint("star-a", e.Constants(2, 4))
	wr := a.Writer(rec, chain.WriterOptions{})
	for i := range 3 {
		if _, err := wr.Append(ctx, cutlinetest.Record("s", uint64(i), "x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wr.Checkpoint(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := wr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := a.Fencer.FenceAt(ctx, "star-a", rec.Epoch, 1)
	if !errors.Is(err, cutline.ErrInvalid) {
		t.Fatalf("FenceAt below the checkpoint: %v, want cutline.ErrInvalid", err)
	}
	if got := e.Record("star-a", rec.Epoch); got.Fenced() {
		t.Fatalf("the record was fenced: %v", got)
	}
	// The real release point fences, and a second call reads the cut.
	rep, err := a.Fencer.FenceAt(ctx, "star-a", rec.Epoch, 3)
	if err != nil || !rep.AtRelease || rep.Cut != 3 {
		t.Fatalf("FenceAt(3) = %+v, %v", rep, err)
	}
	rep, err = a.Fencer.FenceAt(ctx, "star-a", rec.Epoch, 3)
	if err != nil || !rep.AlreadyFenced || rep.Cut != 3 || rep.Creates != 0 {
		t.Fatalf("FenceAt again = %+v, %v", rep, err)
	}
	e.VerifyEpoch("star-a", rec.Epoch, []uint64{0, 1, 2})
}
