package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// synthChain describes an epoch of n slots without storing it: every slot
// below n holds its flight in every bucket, except the ragged tail, whose
// rows say which buckets hold the flight ('F') and which are empty ('E').
// It is the synthetic epoch of fence's own benchmarks.
type synthChain struct {
	n       uint64
	tail    map[uint64]string
	payload []byte
}

// raggedTail is a pipelined writer's tail: committed, half written, a hole,
// and a straggler past the hole. The cut is n−2.
func raggedTail(n uint64) map[uint64]string {
	return map[uint64]string{n - 4: "F F E", n - 3: "F E E", n - 2: "E E E", n - 1: "F E E"}
}

// synthBucket is bucket idx of a synthChain: flights are encoded on the
// fly when read; whatever is created (poison, repaired copies) goes to an
// overlay. It counts requests.
type synthBucket struct {
	c    *synthChain
	idx  int
	name string

	mu      sync.Mutex
	overlay map[string][]byte

	reads, creates atomic.Int64
}

func (b *synthBucket) Name() string { return b.name }

// parse splits a slot key, <prefix>/<star>/<epoch>/<slot>.
func (b *synthBucket) parse(key string) (ep, slot uint64, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || parts[len(parts)-3] != star {
		return 0, 0, false
	}
	ep, err1 := strconv.ParseUint(parts[len(parts)-2], 10, 64)
	slot, err2 := strconv.ParseUint(parts[len(parts)-1], 10, 64)
	return ep, slot, err1 == nil && err2 == nil
}

func (b *synthBucket) object(key string) ([]byte, bool) {
	b.mu.Lock()
	d, ok := b.overlay[key]
	b.mu.Unlock()
	if ok {
		return d, true
	}
	ep, slot, ok := b.parse(key)
	if !ok || slot >= b.c.n {
		return nil, false
	}
	if row, ok := b.c.tail[slot]; ok && strings.Fields(row)[b.idx] != "F" {
		return nil, false
	}
	return wire.EncodeFlight(star, ep, slot, b.c.payload), true
}

func (b *synthBucket) opErr(op, key string, err error) error {
	return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
}

func (b *synthBucket) Create(ctx context.Context, key string, data []byte) error {
	b.creates.Add(1)
	if _, ok := b.object(key); ok {
		return b.opErr("create", key, objstore.ErrExists)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.overlay[key]; ok {
		return b.opErr("create", key, objstore.ErrExists)
	}
	b.overlay[key] = append([]byte(nil), data...)
	return nil
}

func (b *synthBucket) Get(ctx context.Context, key string) ([]byte, error) {
	b.reads.Add(1)
	d, ok := b.object(key)
	if !ok {
		return nil, b.opErr("get", key, objstore.ErrNotFound)
	}
	return append([]byte(nil), d...), nil
}

func (b *synthBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.reads.Add(1)
	d, ok := b.object(key)
	if !ok {
		return nil, b.opErr("getrange", key, objstore.ErrNotFound)
	}
	if off >= int64(len(d)) {
		return []byte{}, nil
	}
	return append([]byte(nil), d[off:off+min(n, int64(len(d))-off)]...), nil
}

func (b *synthBucket) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.overlay, key)
	return nil
}

// List is not used by the fencer; the synthetic chain lists nothing.
func (b *synthBucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	return nil, nil
}

type fenceResult struct {
	rounds   int
	requests int64
	time     time.Duration
}

// fenceSynth fences a fresh epoch of n synthetic slots (K=3, W=2, window
// 64), every request delayed by lat.
func fenceSynth(ctx context.Context, m *epoch.Minter, n uint64, lat time.Duration, opts fence.Options) (fenceResult, error) {
	c := &synthChain{n: n, tail: raggedTail(n), payload: []byte("a record of modest size")}
	var synth []*synthBucket
	var buckets []objstore.Bucket
	for i := range k {
		b := &synthBucket{c: c, idx: i, name: zoneName(i), overlay: map[string][]byte{}}
		synth = append(synth, b)
		buckets = append(buckets, latency.Wrap(b, latency.Options{Default: latency.Fixed(lat)}))
	}
	zones, err := chain.NewZones(buckets...)
	if err != nil {
		return fenceResult{}, err
	}
	rec, err := m.Mint(ctx, star, constants(buckets, window))
	if err != nil {
		return fenceResult{}, err
	}
	f, err := fence.New(m, zones, opts)
	if err != nil {
		return fenceResult{}, err
	}
	start := time.Now()
	rep, err := f.FenceReport(ctx, star, rec.Epoch)
	el := time.Since(start)
	if err != nil {
		return fenceResult{}, err
	}
	if rep.Cut != n-2 {
		return fenceResult{}, fmt.Errorf("fence of %d slots: cut %d, want %d", n, rep.Cut, n-2)
	}
	var req int64
	for _, b := range synth {
		req += b.reads.Load() + b.creates.Load()
	}
	return fenceResult{rounds: rep.Rounds, requests: req, time: el}, nil
}

// figFence fences synthetic epochs of 10, 10³ and 10⁶ slots with the
// default options and with the literal algorithm (doubling, binary search
// and a walk of one slot per round trip).
func figFence(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	m, err := newMinter()
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, n := range []uint64{10, 1_000, 1_000_000} {
		def, err := fenceSynth(ctx, m, n, cfg.fenceLatency, fence.Options{})
		if err != nil {
			return nil, err
		}
		lit, err := fenceSynth(ctx, m, n, cfg.fenceLatency, fence.Options{Fanout: 1, Span: 1})
		if err != nil {
			return nil, err
		}
		size := thousands(int64(n))
		rows = append(rows,
			Row{ID: fmt.Sprintf("fence.%d.rounds", n), Figure: fmt.Sprintf("fence of %s slots: sequential round trips", size), Value: float64(def.rounds), Unit: "rounds"}.
				ref("literal walk", float64(lit.rounds), "rounds"),
			Row{ID: fmt.Sprintf("fence.%d.requests", n), Figure: fmt.Sprintf("fence of %s slots: object requests", size), Value: float64(def.requests), Unit: "requests"}.
				ref("literal walk", float64(lit.requests), "requests"),
			Row{ID: fmt.Sprintf("fence.%d.time", n), Figure: fmt.Sprintf("fence of %s slots: time at %v per request", size, cfg.fenceLatency), Value: ms(def.time), Unit: "ms"}.
				ref("literal walk", ms(lit.time), "ms"),
		)
	}
	return rows, nil
}
