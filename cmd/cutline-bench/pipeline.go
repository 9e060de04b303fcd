package main

import (
	"context"
	"fmt"
	"sync/atomic"
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

// createClock sums how long the creates through it took, as the writer
// saw them: the injected delay and the timer's lateness included.
type createClock struct {
	objstore.Bucket
	total, n *atomic.Int64
}

func (b createClock) Create(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := b.Bucket.Create(ctx, key, data)
	b.total.Add(int64(time.Since(start)))
	b.n.Add(1)
	return err
}

// figPipeline: with every create taking d, a window of 64 allows at most
// 64 ÷ d appends per second; the row is the share of that limit reached.
// A second row sets the rate beside window ÷ the creates' measured mean
// duration: a timer fires a little late, so a create of d takes a little
// more than d, which no writer can win back.
func figPipeline(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	var rows []Row
	for _, d := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond} {
		m, err := newMinter()
		if err != nil {
			return nil, err
		}
		var total, count atomic.Int64
		zones := slowZones(latency.Fixed(d), 1)
		for i, b := range zones {
			zones[i] = createClock{Bucket: b, total: &total, n: &count}
		}
		wr, err := newWriter(ctx, m, zones, window)
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
		if c := count.Load(); c > 0 {
			mean := time.Duration(total.Load() / c)
			rows = append(rows, Row{ID: fmt.Sprintf("pipeline.%dms.measured", d.Milliseconds()), Figure: fmt.Sprintf("pipelining at %v per create, against the creates' measured duration", d), Value: rate, Unit: "appends/s"}.
				ref(fmt.Sprintf("window ÷ mean create (%.2f ms)", float64(mean.Microseconds())/1000), float64(window)/mean.Seconds(), "slots/s").
				note("%s creates timed as the writer saw them", thousands(c)))
		}
	}
	return rows, nil
}
