package main

import (
	"runtime"
	"time"

	"github.com/cutline/cutline/internal/benchfix"
)

// figAllocs: time and heap allocations per append on mem (K=3, W=2,
// 1 KiB, window 64) beside the same per slot of the raw create loop, from
// runtime.MemStats around each run.
func figAllocs(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	data := make([]byte, payload)
	var ms runtime.MemStats
	measure := func(f func() (int, error)) (ns, allocs float64, err error) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		start := time.Now()
		n, err := f()
		el := time.Since(start)
		runtime.ReadMemStats(&ms)
		if n == 0 {
			n = 1
		}
		return float64(el.Nanoseconds()) / float64(n), float64(ms.Mallocs-before) / float64(n), err
	}
	m, err := newMinter()
	if err != nil {
		return nil, err
	}
	wr, err := newWriter(ctx, m, memZones(), window)
	if err != nil {
		return nil, err
	}
	// A warm-up: the runtime's goroutine descriptors, the buckets' maps.
	if _, _, err := pipeline(ctx, wr, data, pipe{n: 1000}); err != nil {
		return nil, err
	}
	ans, aal, err := measure(func() (int, error) {
		n, _, err := pipeline(ctx, wr, data, pipe{n: cfg.allocs})
		return n, err
	})
	if cerr := wr.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	zones := memZones()
	if _, _, err := rawLoop(ctx, zones, rawEpoch, data, 1000, time.Time{}); err != nil {
		return nil, err
	}
	rns, ral, err := measure(func() (int, error) {
		n, _, err := rawLoop(ctx, zones, rawEpoch+1, data, cfg.allocs, time.Time{})
		return n, err
	})
	if err != nil {
		return nil, err
	}
	return []Row{
		Row{ID: "allocs.ns", Figure: "time per append, mem (K=3, W=2, 1 KiB)", Value: ans, Unit: "ns"}.
			ref("raw create loop, per slot", rns, "ns").note("%s appends", thousands(int64(cfg.allocs))),
		Row{ID: "allocs.allocs", Figure: "allocations per append, mem", Value: aal, Unit: "allocs"}.
			ref("raw create loop, per slot", ral, "allocs").note("runtime.MemStats.Mallocs over %s appends", thousands(int64(cfg.allocs))),
	}, nil
}

// figHeap: the live heap (after a GC), sampled every 10,000 appends over
// the run into discarding buckets (benchfix.Discard), above a baseline
// taken after 10,000 warm-up appends, beside window × payload: the writer
// holds at most a window of flights.
func figHeap(s *scope, cfg config) ([]Row, error) {
	const (
		warm  = 10_000
		every = 10_000
	)
	ctx := s.Context()
	data := make([]byte, payload)
	buckets := benchfix.Discards(zoneNames()...)
	m, err := newMinter()
	if err != nil {
		return nil, err
	}
	wr, err := newWriter(ctx, m, buckets, window)
	if err != nil {
		return nil, err
	}
	defer func() { _ = wr.Close(ctx) }()
	var ms runtime.MemStats
	sample := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	if _, _, err := pipeline(ctx, wr, data, pipe{n: warm}); err != nil {
		return nil, err
	}
	base := sample()
	var worst uint64
	n, el, err := pipeline(ctx, wr, data, pipe{n: cfg.heapAppends, each: func(i int) {
		if i%every == every-1 {
			if h := sample(); h > base {
				worst = max(worst, h-base)
			}
		}
	}})
	if err != nil {
		return nil, err
	}
	if err := wr.Close(ctx); err != nil {
		return nil, err
	}
	return []Row{
		Row{ID: "heap.peak", Figure: "peak heap growth over appends (1 KiB, window 64)", Value: float64(worst) / 1024, Unit: "KiB", Zero: true}.
			ref("window × payload", float64(window*payload)/1024, "KiB").
			note("%s appends in %v; live heap after GC, every %s appends, above a warm baseline", thousands(int64(n)), el.Round(time.Millisecond), thousands(every)),
	}, nil
}
