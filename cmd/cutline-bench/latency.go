package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// timedBucket records how long each Create took, per key, as the writer
// saw it.
type timedBucket struct {
	objstore.Bucket
	mu    *sync.Mutex
	times map[string][]time.Duration
}

func (b timedBucket) Create(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := b.Bucket.Create(ctx, key, data)
	d := time.Since(start)
	b.mu.Lock()
	b.times[key] = append(b.times[key], d)
	b.mu.Unlock()
	return err
}

// figLatency: appends submitted at a steady rate (well below the window's
// limit) to zones whose creates take a drawn latency; each append's
// latency, from Submit to its acknowledgement, beside the W-th fastest
// of the K creates of the same slots: what a quorum write costs with
// nothing else on the path.
func figLatency(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	var rows []Row
	for _, c := range []struct {
		id, name string
		dist     latency.Dist
	}{
		{"fixed20", "fixed 20 ms", latency.Fixed(20 * time.Millisecond)},
		{"lognormal", "lognormal p50 8 ms, p99 40 ms per zone", latency.LogNormal(8*time.Millisecond, 40*time.Millisecond)},
	} {
		var mu sync.Mutex
		times := map[string][]time.Duration{}
		zones := slowZones(c.dist, 7)
		for i, b := range zones {
			zones[i] = timedBucket{Bucket: b, mu: &mu, times: times}
		}
		m, err := newMinter()
		if err != nil {
			return nil, err
		}
		wr, err := newWriter(ctx, m, zones, window)
		if err != nil {
			return nil, err
		}
		var lat []time.Duration
		var lmu sync.Mutex
		n, _, err := pipeline(ctx, wr, make([]byte, payload), pipe{
			n:     int(cfg.latencyRate * cfg.latency.Seconds()),
			every: time.Duration(float64(time.Second) / cfg.latencyRate),
			acked: func(_ int, sub, ack time.Time) {
				lmu.Lock()
				lat = append(lat, ack.Sub(sub))
				lmu.Unlock()
			},
		})
		// Close waits for the creates a committed slot no longer needed,
		// so that every slot has its K times.
		if cerr := wr.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		var wth []time.Duration
		for _, ts := range times {
			if len(ts) < w {
				continue
			}
			// A create the writer never sent (the slot was decided first)
			// counts as slower than every other.
			slices.Sort(ts)
			wth = append(wth, ts[w-1])
		}
		if len(wth) == 0 {
			return nil, fmt.Errorf("%s: no slot has all %d create times", c.name, k)
		}
		note := fmt.Sprintf("%s appends at %.0f/s", thousands(int64(n)), cfg.latencyRate)
		for _, q := range []struct {
			name string
			q    float64
		}{{"p50", 0.5}, {"p99", 0.99}} {
			rows = append(rows, Row{ID: "latency." + c.id + "." + q.name, Figure: fmt.Sprintf("append latency %s, %s", q.name, c.name), Value: ms(quantile(lat, q.q)), Unit: "ms"}.
				ref(fmt.Sprintf("%s of the W-th fastest of K creates", q.name), ms(quantile(wth, q.q)), "ms").note("%s", note))
		}
	}
	return rows, nil
}
