package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	metamem "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/mem"
	"github.com/cutline/cutline/settle"
)

// takeoverLatency is the latency of every object request in the takeover
// and roll figures; the metastore has none.
const takeoverLatency = 20 * time.Millisecond

// countedZones returns K in-memory zones, the fault wrappers that count
// their requests, and the views with latency the parties use.
func countedZones(lat time.Duration) (raw []objstore.Bucket, counted []*fault.Bucket, slow []objstore.Bucket) {
	for i := range k {
		m := mem.New(zoneName(i))
		f := fault.Wrap(m, fault.Options{})
		raw = append(raw, m)
		counted = append(counted, f)
		var d latency.Dist
		if lat > 0 {
			d = latency.Fixed(lat)
		}
		slow = append(slow, latency.Wrap(f, latency.Options{Default: d}))
	}
	return raw, counted, slow
}

type requests struct{ reads, creates, deletes, lists int }

func (r requests) total() int { return r.reads + r.creates + r.deletes + r.lists }

func (r requests) String() string {
	return fmt.Sprintf("%d reads, %d creates, %d deletes, %d lists", r.reads, r.creates, r.deletes, r.lists)
}

func count(zones []*fault.Bucket) requests {
	var c requests
	for _, z := range zones {
		s := z.Stats()
		c.reads += s.Calls[fault.OpGet] + s.Calls[fault.OpGetRange]
		c.creates += s.Calls[fault.OpCreate]
		c.deletes += s.Calls[fault.OpDelete]
		c.lists += s.Calls[fault.OpList]
	}
	return c
}

func resetCounts(zones []*fault.Bucket) {
	for _, z := range zones {
		z.ResetStats()
	}
}

// layRaggedEpoch lays out a dead writer's epoch: n committed slots, then a
// ragged pipelined tail of a full window: slot n has one copy, n+1 two, n+2
// three, n+3 one, n+4 none (the cut), and the rest of the window a random
// number of copies each. The host covered (in refs) and checkpointed all
// but the last lag acknowledged slots. (settle's BenchmarkTakeover lays the
// same epoch.)
func layRaggedEpoch(ctx context.Context, m *epoch.Minter, refs *settle.RefIndex, raw []objstore.Bucket, n, win, lag int, seed uint64) (uint64, error) {
	rec, err := m.Mint(ctx, star, constants(raw, win))
	if err != nil {
		return 0, err
	}
	put := func(slot uint64, zones ...int) error {
		data := wire.EncodeFlight(star, rec.Epoch, slot, record(slot))
		for _, z := range zones {
			if err := raw[z].Create(ctx, keys.Slot(star, rec.Epoch, slot), data); err != nil {
				return err
			}
		}
		return nil
	}
	for s := range uint64(n) {
		if err := put(s, int(s%3), int(s+1)%3); err != nil {
			return 0, err
		}
	}
	tail := uint64(n)
	rng := rand.New(rand.NewPCG(seed, seed))
	err = errors.Join(put(tail, 0), put(tail+1, 1, 2), put(tail+2, 0, 1, 2), put(tail+3, 2))
	for s := tail + 5; s < tail+uint64(win); s++ {
		var zs []int
		for z := range 3 {
			if rng.IntN(2) == 0 {
				zs = append(zs, z)
			}
		}
		err = errors.Join(err, put(s, zs...))
	}
	if err != nil {
		return 0, err
	}
	for s := range uint64(n - lag) {
		if err := refs.Cover(ctx, star, chain.Flight{Position: chain.Position{Epoch: rec.Epoch, Slot: s}, Payload: record(s)}); err != nil {
			return 0, err
		}
	}
	cl, err := rec.Claim()
	if err != nil {
		return 0, err
	}
	if _, err := cl.Advance(ctx, uint64(n-lag)); err != nil {
		return 0, err
	}
	return rec.Epoch, nil
}

// figTakeover: a successor fences and settles a dead writer's epoch (256
// committed slots, a ragged tail of a full window, 16 acknowledged slots
// not yet covered); and a planned roll of a Roller with nothing in flight.
// Every object request takes 20 ms.
func figTakeover(s *scope, cfg config) ([]Row, error) {
	const (
		committed = 256
		lag       = 16
	)
	ctx := s.Context()
	var tTime time.Duration
	var tReq requests
	var rounds int
	for i := range cfg.takeovers {
		store := metamem.New(metamem.Options{})
		m, err := epoch.NewMinter(store, epoch.Options{})
		if err != nil {
			return nil, err
		}
		raw, counted, slow := countedZones(takeoverLatency)
		refs, err := settle.NewRefIndex(store, "", locate)
		if err != nil {
			return nil, err
		}
		if _, err := layRaggedEpoch(ctx, m, refs, raw, committed, window, lag, uint64(i)); err != nil {
			return nil, err
		}
		zones := chain.MustZones(slow...)
		f, err := fence.New(m, zones, fence.Options{Identity: "successor"})
		if err != nil {
			return nil, err
		}
		st, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
		if err != nil {
			return nil, err
		}
		start := time.Now()
		reps, err := st.SettleAll(ctx, star)
		tTime += time.Since(start)
		if err != nil {
			return nil, err
		}
		if len(reps) != 1 || reps[0].Fence == nil || reps[0].Covered != lag+4 {
			return nil, fmt.Errorf("takeover: unexpected reports %+v", reps)
		}
		rounds += reps[0].Fence.Rounds
		c := count(counted)
		tReq.reads += c.reads
		tReq.creates += c.creates
		tReq.deletes += c.deletes
		tReq.lists += c.lists
	}
	n := cfg.takeovers
	tReq = requests{tReq.reads / n, tReq.creates / n, tReq.deletes / n, tReq.lists / n}

	rTime, rReq, err := plannedRolls(ctx, cfg.takeovers)
	if err != nil {
		return nil, err
	}
	lat := ms(takeoverLatency)
	return []Row{
		Row{ID: "takeover.time", Figure: "takeover (fence + settle) at 20 ms per request", Value: ms(tTime / time.Duration(n)), Unit: "ms"}.
			ref("one request", lat, "ms").
			note("ratio = sequential round trips; %.1f fence rounds; %d committed slots + a ragged window, %d uncovered; mean of %d", float64(rounds)/float64(n), committed, lag, n),
		Row{ID: "takeover.requests", Figure: "takeover: object requests", Value: float64(tReq.total()), Unit: "requests"}.note("%s", tReq),
		Row{ID: "roll.time", Figure: "planned roll, nothing in flight, at 20 ms per request", Value: ms(rTime), Unit: "ms"}.
			ref("one request", lat, "ms").note("ratio = sequential round trips; mean of %d", n),
		Row{ID: "roll.requests", Figure: "planned roll: object requests", Value: float64(rReq.total()), Unit: "requests"}.note("%s", rReq),
	}, nil
}

// roller is a host that writes a star through a settle.Roller: it covers
// every acknowledged append and advances the checkpoint.
type roller struct {
	r       *settle.Roller
	refs    *settle.RefIndex
	counted []*fault.Bucket
	meta    *countingStore
	next    uint64
}

func openRoller(ctx context.Context, lat time.Duration) (*roller, error) {
	meta := &countingStore{Store: metamem.New(metamem.Options{})}
	m, err := epoch.NewMinter(meta, epoch.Options{})
	if err != nil {
		return nil, err
	}
	raw, counted, slow := countedZones(lat)
	zones := chain.MustZones(slow...)
	f, err := fence.New(m, zones, fence.Options{Identity: "roller"})
	if err != nil {
		return nil, err
	}
	refs, err := settle.NewRefIndex(meta, "", locate)
	if err != nil {
		return nil, err
	}
	st, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	if err != nil {
		return nil, err
	}
	r, err := settle.OpenRoller(ctx, st, star, constants(raw, window),
		settle.RollerOptions{Backoff: clock.Backoff{Min: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		return nil, err
	}
	return &roller{r: r, refs: refs, counted: counted, meta: meta}, nil
}

// appendCovered appends n records, waits for them, covers them and
// advances the checkpoint past them.
func (h *roller) appendCovered(ctx context.Context, n int) error {
	futures := make([]*settle.Future, n)
	first := h.next
	for i := range futures {
		f, err := h.r.Submit(ctx, record(h.next))
		if err != nil {
			return err
		}
		h.next++
		futures[i] = f
	}
	top := map[uint64]uint64{}
	for i, f := range futures {
		pos, err := f.Wait(ctx)
		if err != nil {
			return err
		}
		if err := h.refs.Cover(ctx, star, chain.Flight{Position: pos, Payload: record(first + uint64(i))}); err != nil {
			return err
		}
		top[pos.Epoch] = max(top[pos.Epoch], pos.Slot+1)
	}
	for ep, slot := range top {
		if err := h.r.Checkpoint(ctx, chain.Position{Epoch: ep, Slot: slot}); err != nil && !errors.Is(err, epoch.ErrCursorRegression) {
			return err
		}
	}
	return nil
}

// plannedRolls rolls a Roller with every append acknowledged, covered and
// checkpointed, n times, each with a change of constants, and returns the
// mean time and requests of one roll.
func plannedRolls(ctx context.Context, n int) (time.Duration, requests, error) {
	h, err := openRoller(ctx, takeoverLatency)
	if err != nil {
		return 0, requests{}, err
	}
	defer func() { _ = h.r.Close(ctx) }()
	c := h.r.Epoch().Constants
	var total time.Duration
	var req requests
	for i := range n {
		if err := h.appendCovered(ctx, window); err != nil {
			return 0, requests{}, err
		}
		c.Window = window - i%2 - 1 // a change of constants every time
		resetCounts(h.counted)
		start := time.Now()
		if err := h.r.Roll(ctx, c); err != nil {
			return 0, requests{}, err
		}
		total += time.Since(start)
		rc := count(h.counted)
		req.reads += rc.reads
		req.creates += rc.creates
		req.deletes += rc.deletes
		req.lists += rc.lists
	}
	return total / time.Duration(n), requests{req.reads / n, req.creates / n, req.deletes / n, req.lists / n}, nil
}

// countingStore counts the requests made of a metastore.Store.
type countingStore struct {
	metastore.Store
	gets, lists, txns, others atomic.Int64 // others: watches and sessions
}

func (c *countingStore) Get(ctx context.Context, key string) (metastore.KV, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, prefix)
}

func (c *countingStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	c.txns.Add(1)
	return c.Store.Txn(ctx, t)
}

func (c *countingStore) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.Event, error] {
	c.others.Add(1)
	return c.Store.Watch(ctx, prefix, from)
}

func (c *countingStore) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	c.others.Add(1)
	return c.Store.NewSession(ctx, ttl)
}

func (c *countingStore) total() int64 {
	return c.gets.Load() + c.lists.Load() + c.txns.Load() + c.others.Load()
}

func (c *countingStore) reset() {
	c.gets.Store(0)
	c.lists.Store(0)
	c.txns.Store(0)
	c.others.Store(0)
}
