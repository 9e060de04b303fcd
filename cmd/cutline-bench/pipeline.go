package main

import (
	"fmt"
	"time"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// slowZones returns in-memory zones whose creates take d.
func slowZones(create latency.Dist, seed uint64) []objstore.Bucket {
	out := memZones()
	for i, b := range out {
		out[i] = latency.Wrap(b, latency.Options{Create: create, Seed: seed + uint64(i)})
	}
	return out
}

// figPipeline: with every create taking d, a window of 64 allows at most
// 64 ÷ d appends per second; the row is the share of that limit reached.
func figPipeline(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	var rows []Row
	for _, d := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond} {
		m, err := newMinter()
		if err != nil {
			return nil, err
		}
		wr, err := newWriter(ctx, m, slowZones(latency.Fixed(d), 1), window)
		if err != nil {
			return nil, err
		}
		limit := float64(window) / d.Seconds()
		n, el, err := pipeline(ctx, wr, make([]byte, payload), pipe{n: int(limit * cfg.pipeline.Seconds())})
		if cerr := wr.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		rate := float64(n) / el.Seconds()
		rows = append(rows, Row{ID: fmt.Sprintf("pipeline.%dms", d.Milliseconds()), Figure: fmt.Sprintf("pipelining at %v per create (window 64)", d), Value: rate, Unit: "appends/s"}.
			ref("window ÷ latency", limit, "slots/s").
			note("%s appends; ratio × 100 = %% of the limit", thousands(int64(n))))
	}
	return rows, nil
}
