package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

const (
	star    = "bench-star"
	stream  = "s"
	window  = 64
	payload = 1024
	k, w    = 3, 2
)

var keys = wire.Keys{Prefix: "bench"}

// rawEpoch numbers the raw loops' epochs far above any minted epoch, so
// that their keys never meet a writer's.
const rawEpoch = 1 << 40

func zoneName(i int) string { return fmt.Sprintf("zone-%c", 'a'+i) }

func memZones() []objstore.Bucket {
	out := make([]objstore.Bucket, k)
	for i := range out {
		out[i] = memblob.New(zoneName(i))
	}
	return out
}

func newMinter() (*epoch.Minter, error) {
	return epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
}

func constants(buckets []objstore.Bucket, win int) epoch.Constants {
	return epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: w, Window: win, Prefix: keys.Prefix}
}

// newWriter mints a fresh epoch over buckets and opens its writer.
func newWriter(ctx context.Context, m *epoch.Minter, buckets []objstore.Bucket, win int) (*chain.Writer, error) {
	rec, err := m.Mint(ctx, star, constants(buckets, win))
	if err != nil {
		return nil, err
	}
	zones, err := chain.NewZones(buckets...)
	if err != nil {
		return nil, err
	}
	return chain.NewWriter(rec, zones, chain.WriterOptions{})
}

// pipe configures pipeline.
type pipe struct {
	n        int           // most appends; 0: until the deadline
	deadline time.Time     // no submission after it; zero: none
	every    time.Duration // pace the submissions; 0: as fast as the window lets
	each     func(i int)   // after each submission
	acked    func(i int, submitted, acked time.Time)
}

// pipeline appends payloads through wr with the submissions running ahead
// of the acknowledgements (as far as the window lets them), waits for all,
// and returns how many it appended and the time from the first submission
// to the last acknowledgement.
func pipeline(ctx context.Context, wr *chain.Writer, data []byte, p pipe) (int, time.Duration, error) {
	type sub struct {
		f  *chain.Future
		at time.Time
	}
	futures := make(chan sub, window)
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		i := 0
		for s := range futures {
			if _, err := s.f.Wait(ctx); err != nil {
				errc <- err
				for range futures {
				}
				return
			}
			if p.acked != nil {
				p.acked(i, s.at, time.Now())
			}
			i++
		}
	}()
	start := time.Now()
	n := 0
	var err error
	for p.n == 0 || n < p.n {
		if p.every > 0 {
			if d := time.Until(start.Add(time.Duration(n) * p.every)); d > 0 {
				time.Sleep(d)
			}
		}
		if !p.deadline.IsZero() && !time.Now().Before(p.deadline) {
			break
		}
		at := time.Now()
		var f *chain.Future
		if f, err = wr.Submit(ctx, data); err != nil {
			break
		}
		futures <- sub{f, at}
		if p.each != nil {
			p.each(n)
		}
		n++
	}
	close(futures)
	if werr := <-errc; werr != nil && err == nil {
		err = werr
	}
	return n, time.Since(start), err
}

// rawLoop creates the flights of slots in every bucket, one create at a
// time, from one goroutine: the storage's cost under the writer, without
// the writer. It stops after n slots or at the deadline.
func rawLoop(ctx context.Context, buckets []objstore.Bucket, ep uint64, data []byte, n int, deadline time.Time) (int, time.Duration, error) {
	start := time.Now()
	i := 0
	for ; n == 0 || i < n; i++ {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			break
		}
		flight := wire.EncodeFlight(star, ep, uint64(i), data)
		key := keys.Slot(star, ep, uint64(i))
		for _, b := range buckets {
			if err := b.Create(ctx, key, flight); err != nil {
				return i, time.Since(start), err
			}
		}
	}
	return i, time.Since(start), nil
}

// rawConcurrent creates the flights of slots with conc goroutines per
// bucket, each bucket on its own, until the deadline, and returns the slots
// every bucket got (the total creates ÷ the buckets).
func rawConcurrent(ctx context.Context, buckets []objstore.Bucket, ep uint64, data []byte, conc int, deadline time.Time) (float64, time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	var creates atomic.Int64
	var firstErr error
	var once sync.Once
	for _, b := range buckets {
		var next atomic.Uint64
		for range conc {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					slot := next.Add(1) - 1
					if err := b.Create(ctx, keys.Slot(star, ep, slot), wire.EncodeFlight(star, ep, slot, data)); err != nil {
						once.Do(func() { firstErr = err })
						return
					}
					creates.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return float64(creates.Load()) / float64(len(buckets)), time.Since(start), firstErr
}

// quantile returns the q-quantile (0 ≤ q ≤ 1) of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q * float64(len(ds)-1))
	return ds[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// record is one producer record in the reference host's format,
// "<stream>|<offset>|<id>"; locate is its settle.Locator: one span over
// the whole payload.
func record(offset uint64) []byte { return fmt.Appendf(nil, "%s|%d|bench", stream, offset) }

func locate(p []byte) ([]settle.Span, error) {
	f := strings.Split(string(p), "|")
	if len(f) != 3 || f[0] != stream {
		return nil, fmt.Errorf("not a record of stream %q: %q", stream, p)
	}
	off, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("not a record: %q: %w", p, err)
	}
	return []settle.Span{{Stream: stream, Offset: off, Count: 1, Start: 0, End: uint64(len(p))}}, nil
}
