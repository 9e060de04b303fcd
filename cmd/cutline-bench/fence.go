package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/synth"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// fenceResult is one fence of a synthetic epoch: its sequential round
// trips, its requests and its wall time.
type fenceResult struct {
	rounds   int
	requests int64
	time     time.Duration
}

// fenceSynth fences a fresh epoch of n synthetic slots (K=3, W=2, window
// 64), every request delayed by lat.
func fenceSynth(ctx context.Context, m *epoch.Minter, n uint64, lat time.Duration, opts fence.Options) (fenceResult, error) {
	c := &synth.Chain{Star: star, N: n, Tail: synth.RaggedTail(n), Payload: []byte("a record of modest size")}
	zs := synth.NewZones(c, k)
	var buckets []objstore.Bucket
	for _, b := range zs {
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
	for _, b := range zs {
		req += b.Reads() + b.Creates()
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
