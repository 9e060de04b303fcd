package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// takeoverLatency is the latency of every object request in the takeover
// and roll figures; the metastore has none.
const takeoverLatency = 20 * time.Millisecond

// zoneNames are the names of the K zones.
func zoneNames() []string {
	out := make([]string, k)
	for i := range out {
		out[i] = zoneName(i)
	}
	return out
}

// countedZones returns K in-memory zones, the fault wrappers that count
// their requests, and the views with latency the parties use.
func countedZones(lat time.Duration) (raw []objstore.Bucket, counted []*fault.Bucket, slow []objstore.Bucket) {
	return benchfix.Zones(lat, zoneNames()...)
}

// raggedEpoch is the dead writer's epoch of the takeover figure, as
// settle's BenchmarkTakeover lays it.
func raggedEpoch(committed, lag int, seed uint64) benchfix.RaggedEpoch {
	return benchfix.RaggedEpoch{Star: star, Prefix: keys.Prefix, Committed: committed, Window: window, Lag: lag, Seed: seed, Record: record}
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
	var tReq benchfix.Requests
	var rounds int
	for i := range cfg.takeovers {
		store := memstore.New(memstore.Options{})
		m, err := epoch.NewMinter(store, epoch.Options{})
		if err != nil {
			return nil, err
		}
		raw, counted, slow := countedZones(takeoverLatency)
		refs, err := settle.NewRefIndex(store, "", locate)
		if err != nil {
			return nil, err
		}
		if _, err := benchfix.LayRaggedEpoch(ctx, m, refs, raw, raggedEpoch(committed, lag, uint64(i))); err != nil {
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
		tReq = tReq.Add(benchfix.Count(counted))
	}
	n := cfg.takeovers
	tReq = tReq.Div(n)

	rTime, rReq, err := plannedRolls(ctx, cfg.takeovers)
	if err != nil {
		return nil, err
	}
	lat := ms(takeoverLatency)
	return []Row{
		Row{ID: "takeover.time", Figure: "takeover (fence + settle) at 20 ms per request", Value: ms(tTime / time.Duration(n)), Unit: "ms"}.
			ref("one request", lat, "ms").
			note("ratio = sequential round trips; %.1f fence rounds; %d committed slots + a ragged window, %d uncovered; mean of %d", float64(rounds)/float64(n), committed, lag, n),
		Row{ID: "takeover.requests", Figure: "takeover: object requests", Value: float64(tReq.Total()), Unit: "requests"}.objects(tReq).note("%s", tReq),
		Row{ID: "roll.time", Figure: "planned roll, nothing in flight, at 20 ms per request", Value: ms(rTime), Unit: "ms"}.
			ref("one request", lat, "ms").note("ratio = sequential round trips; mean of %d", n),
		Row{ID: "roll.requests", Figure: "planned roll: object requests", Value: float64(rReq.Total()), Unit: "requests"}.objects(rReq).note("%s", rReq),
	}, nil
}

// roller is a host that writes a star through a roll.Roller: it covers
// every acknowledged append and advances the checkpoint.
type roller struct {
	r       *roll.Roller
	refs    *settle.RefIndex
	counted []*fault.Bucket
	meta    *countingStore
	next    uint64
}

func openRoller(ctx context.Context, lat time.Duration) (*roller, error) {
	meta := &countingStore{Store: memstore.New(memstore.Options{})}
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
	r, err := roll.Open(ctx, st, star, constants(raw, window),
		roll.Options{Backoff: clock.Backoff{Min: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		return nil, err
	}
	return &roller{r: r, refs: refs, counted: counted, meta: meta}, nil
}

// appendCovered appends n records, waits for them, covers them and
// advances the checkpoint past them.
func (h *roller) appendCovered(ctx context.Context, n int) error {
	futures := make([]*roll.Future, n)
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
func plannedRolls(ctx context.Context, n int) (time.Duration, benchfix.Requests, error) {
	h, err := openRoller(ctx, takeoverLatency)
	if err != nil {
		return 0, benchfix.Requests{}, err
	}
	defer func() { _ = h.r.Close(ctx) }()
	c := h.r.Epoch().Constants
	var total time.Duration
	var req benchfix.Requests
	for i := range n {
		if err := h.appendCovered(ctx, window); err != nil {
			return 0, benchfix.Requests{}, err
		}
		c.Window = window - i%2 - 1 // a change of constants every time
		// The writer's extra copies (the zone after W) of the last slots
		// are still in flight: let them land, so that the roll is
		// charged only its own requests.
		if err := quiesce(ctx, h.counted); err != nil {
			return 0, benchfix.Requests{}, err
		}
		benchfix.Reset(h.counted)
		start := time.Now()
		if err := h.r.Roll(ctx, c); err != nil {
			return 0, benchfix.Requests{}, err
		}
		total += time.Since(start)
		req = req.Add(benchfix.Count(h.counted))
	}
	return total / time.Duration(n), req.Div(n), nil
}

// quiesce waits until the zones have answered no request for 100 ms, at
// most 10 s.
func quiesce(ctx context.Context, zones []*fault.Bucket) error {
	last, since := benchfix.Count(zones).Total(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if n := benchfix.Count(zones).Total(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= 100*time.Millisecond {
			return nil
		}
	}
	return errors.New("the writer's requests never stopped")
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

func (c *countingStore) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
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
