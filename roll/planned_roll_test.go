package roll_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/roll"
)

// roundCounter counts sequential round trips to object storage: each
// request gets the depth 1 + the greatest depth of the requests that
// finished before it started, and the rounds are the greatest depth. A
// batch of parallel requests is one round; a request sent after another
// answered is the next. It overcounts, never undercounts: requests that do
// not depend on each other still count as sequential when one finished
// before the other started.
type roundCounter struct {
	mu       sync.Mutex
	finished int // the greatest depth of a finished request
	rounds   int
	requests int
	inflight int
}

func (c *roundCounter) start() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.finished + 1
	c.rounds = max(c.rounds, d)
	c.requests++
	c.inflight++
	return d
}

func (c *roundCounter) finish(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finished = max(c.finished, d)
	c.inflight--
}

// quiesce waits until no request has been in flight or started for a
// while: a writer's background creates to the buckets a decided slot no
// longer needed end after its acknowledgements.
func (c *roundCounter) quiesce(t testing.TB) {
	t.Helper()
	last, idleSince := -1, time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		n, busy := c.requests, c.inflight > 0
		c.mu.Unlock()
		if busy || n != last {
			last, idleSince = n, time.Now()
			continue
		}
		if time.Since(idleSince) >= 50*time.Millisecond {
			return
		}
	}
	t.Fatal("object requests never stopped")
}

func (c *roundCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finished, c.rounds, c.requests = 0, 0, 0
}

// get returns the rounds and requests since the last reset.
func (c *roundCounter) get() (rounds, requests int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rounds, c.requests
}

// wrap returns b with every request counted.
func (c *roundCounter) wrap(b objstore.Bucket) objstore.Bucket { return &roundBucket{Bucket: b, c: c} }

type roundBucket struct {
	objstore.Bucket
	c *roundCounter
}

func (b *roundBucket) Create(ctx context.Context, key string, data []byte) error {
	defer b.c.finish(b.c.start())
	return b.Bucket.Create(ctx, key, data)
}

func (b *roundBucket) Get(ctx context.Context, key string) ([]byte, error) {
	defer b.c.finish(b.c.start())
	return b.Bucket.Get(ctx, key)
}

func (b *roundBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	defer b.c.finish(b.c.start())
	return b.Bucket.GetRange(ctx, key, off, n)
}

func (b *roundBucket) Delete(ctx context.Context, key string) error {
	defer b.c.finish(b.c.start())
	return b.Bucket.Delete(ctx, key)
}

func (b *roundBucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	defer b.c.finish(b.c.start())
	return b.Bucket.List(ctx, prefix, after, limit)
}

// TestRollerPlannedRollRounds: a planned roll from a writer that closed
// cleanly, every append acknowledged and covered, costs at most 3
// sequential round trips to object storage (here: one, the B poison
// creates at the release point), not a fence walk.
func TestRollerPlannedRollRounds(t *testing.T) {
	for _, kw := range [][2]int{{3, 2}, {5, 3}, {1, 1}} {
		k, w := kw[0], kw[1]
		t.Run(fmt.Sprintf("K=%d,W=%d", k, w), func(t *testing.T) {
			ctx := t.Context()
			var rc roundCounter
			// Latency under the counter lets parallel requests overlap,
			// as they do on real storage.
			e := newMemEnv(t, k, func(_ int, z objstore.Bucket) objstore.Bucket {
				return rc.wrap(latency.Wrap(z, latency.Options{Default: latency.Fixed(2 * time.Millisecond)}))
			})
			p := e.Party("star-a")
			c := e.Constants(w, 64)
			r, err := roll.Open(ctx, p.Settler, "star-a", c, roll.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Close(ctx) }()
			for roll := range 3 {
				ep := r.Epoch().Epoch
				for i := range 64 {
					off := uint64(roll*64 + i)
					pos, err := r.Append(ctx, cutlinetest.Record("s", off, fmt.Sprintf("r%d", off)))
					if err != nil {
						t.Fatal(err)
					}
					if err := p.Refs.Cover(ctx, "star-a", chain.Flight{Position: pos, Payload: cutlinetest.Record("s", off, fmt.Sprintf("r%d", off))}); err != nil {
						t.Fatal(err)
					}
					if err := r.Checkpoint(ctx, chain.Position{Epoch: pos.Epoch, Slot: pos.Slot + 1}); err != nil {
						t.Fatal(err)
					}
				}
				rc.quiesce(t)
				rc.reset()
				c.Window = 64 - roll%2 - 1 // a change of constants
				if err := r.Roll(ctx, c); err != nil {
					t.Fatal(err)
				}
				rounds, requests := rc.get()
				t.Logf("roll %d: %d rounds, %d requests", roll, rounds, requests)
				if rounds > 3 {
					t.Fatalf("a planned roll from a cleanly closed writer took %d sequential round trips (%d requests), want ≤ 3", rounds, requests)
				}
				if b := k - w + 1; requests != b {
					t.Fatalf("a planned roll made %d requests, want the B=%d poison creates", requests, b)
				}
				rec := e.VerifyEpoch("star-a", ep, nil)
				if rec.Cut != 64 {
					t.Fatalf("epoch %d: cut %d, want the release point 64", ep, rec.Cut)
				}
			}
		})
	}
}

func newMemEnv(t testing.TB, k int, wrap func(int, objstore.Bucket) objstore.Bucket) *cutlinetest.Env {
	buckets := make([]objstore.Bucket, k)
	for i := range buckets {
		buckets[i] = memblob.New(fmt.Sprintf("zone-%c", 'a'+i))
	}
	return cutlinetest.New(t, memstore.New(memstore.Options{}), buckets, cutlinetest.Options{Wrap: wrap})
}

// TestRollerPlannedRollStragglers races straggling creates of the old
// writer (at its release slot and past it, landing before, during and
// after the roll's poison) against planned rolls, over many seeds, and
// checks the six guarantees over the whole run with cutlinetest.Check.
// Stragglers that hold the release slot in a bucket the roll poisons
// send it to the full fence, which completes the slot (a fence always
// completes rather than kills): those seeds check the old epoch with
// CheckEpoch, since the completed slot carries a record no host
// submitted.
func TestRollerPlannedRollStragglers(t *testing.T) {
	seeds := uint64(60)
	if testing.Short() {
		seeds = 15
	}
	for seed := range seeds {
		rollerStragglerRun(t, seed)
		if t.Failed() {
			return
		}
	}
}

func rollerStragglerRun(t *testing.T, seed uint64) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 0x2011))
	kw := [][2]int{{3, 2}, {5, 3}, {3, 1}, {1, 1}}[seed%4]
	k, w := kw[0], kw[1]
	b := k - w + 1
	window := 2 + rng.IntN(6)
	fallback := seed%5 == 2 && b < k // a straggler holds the release slot in a poisoned bucket
	const star = "star-a"

	type straggler struct {
		zone int
		d    uint64
		when int // 0 before the roll, 1 during its poison, 2 after it
	}
	var plan []straggler
	for range 1 + rng.IntN(2*k) {
		s := straggler{zone: rng.IntN(k), d: uint64(rng.IntN(window)), when: rng.IntN(3)}
		if s.d == 0 && s.zone < b && s.when < 2 {
			// Unless this seed tests the fallback, keep the release
			// slot of the poisoned buckets to the roll.
			s.zone = b + rng.IntN(k-b+1) - 1
			if s.zone < b {
				s.d = 1 + uint64(rng.IntN(window-1))
			}
		}
		plan = append(plan, s)
	}
	if fallback {
		plan = append(plan, straggler{zone: 0, d: 0, when: 0})
	}
	var (
		mu         sync.Mutex
		releaseKey string
		during     sync.Once
		land       func(when int)
	)
	e := newMemEnv(t, k, func(_ int, z objstore.Bucket) objstore.Bucket {
		return hookBucket{Bucket: z, before: func(key string) {
			mu.Lock()
			fire := releaseKey != "" && key == releaseKey
			mu.Unlock()
			if fire {
				during.Do(func() { land(1) })
			}
		}}
	})
	p := e.Party(star)
	hist := &cutlinetest.History{}
	c := e.Constants(w, window)
	r, err := roll.Open(ctx, p.Settler, star, c, roll.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := cutlinetest.StartRoller(p, r, cutlinetest.HostOptions{Name: "host-a", History: hist, AbsorbEvery: 1 + rng.IntN(3)})
	n := 1 + rng.IntN(3*window)
	for i := range n {
		if err := h.Submit(ctx, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatalf("seed %d: submit: %v", seed, err)
		}
	}
	if err := h.WaitAcked(ctx, n); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	old := r.Epoch()
	rel := uint64(n) // the first epoch holds the n records, all acknowledged
	land = func(when int) {
		for _, s := range plan {
			if s.when != when {
				continue
			}
			slot := rel + s.d
			data := wire.EncodeFlight(star, old.Epoch, slot, cutlinetest.Record("s", slot, fmt.Sprintf("straggler-%d", slot)))
			if err := e.Raw[s.zone].Create(ctx, cutlinetest.Slot(old, slot).Key(), data); err != nil && !errors.Is(err, objstore.ErrExists) {
				t.Errorf("seed %d: straggler: %v", seed, err)
			}
		}
	}
	land(0)
	mu.Lock()
	releaseKey = cutlinetest.Slot(old, rel).Key()
	mu.Unlock()
	c.Window++
	if err := r.Roll(ctx, c); err != nil {
		t.Fatalf("seed %d: roll: %v", seed, err)
	}
	during.Do(func() { land(1) })
	land(2)
	got := e.Record(star, old.Epoch)
	if !fallback && got.Cut != rel {
		t.Fatalf("seed %d: the planned roll cut epoch %d at %d, want the release point %d (stragglers %+v)", seed, old.Epoch, got.Cut, rel, plan)
	}
	if fallback {
		// The full fence completed the straggler's slot: no host
		// submitted it, so only the epoch is checked.
		if got.Cut <= rel {
			t.Fatalf("seed %d: a straggler held the release slot %d, and the cut is %d: it was not completed", seed, rel, got.Cut)
		}
		h.Kill()
		acked := make([]uint64, n)
		for i := range acked {
			acked[i] = uint64(i)
		}
		cutlinetest.Require(t, e.CheckEpoch(star, old.Epoch, acked))
		return
	}
	for i := range 1 + rng.IntN(2*window) {
		if err := h.Submit(ctx, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatalf("seed %d: submit after the roll: %v", seed, err)
		}
	}
	if err := h.Close(ctx); err != nil {
		t.Fatalf("seed %d: close: %v", seed, err)
	}
	if vs := e.Check(hist); len(vs) > 0 {
		t.Errorf("seed %d (K=%d W=%d window %d, release %d, stragglers %+v):", seed, k, w, window, rel, plan)
		cutlinetest.Require(t, vs)
	}
}

// hookBucket calls before ahead of every Create it forwards.
type hookBucket struct {
	objstore.Bucket
	before func(key string)
}

func (h hookBucket) Create(ctx context.Context, key string, data []byte) error {
	h.before(key)
	return h.Bucket.Create(ctx, key, data)
}
