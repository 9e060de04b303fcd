package chain_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
)

// pipeline appends n payloads through w with Submits running ahead of the
// acknowledgements (as far as the window lets them), and waits for all.
func pipeline(b *testing.B, w *chain.Writer, n int, data []byte, each func(i int)) {
	futures := make(chan *chain.Future, w.Record().Constants.Window)
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for f := range futures {
			if _, err := f.Wait(context.Background()); err != nil {
				errc <- err
				for range futures {
				}
				return
			}
		}
	}()
	for i := range n {
		f, err := w.Submit(context.Background(), data)
		if err != nil {
			b.Fatal(err)
		}
		futures <- f
		if each != nil {
			each(i)
		}
	}
	close(futures)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

func benchWriter(b *testing.B, buckets []objstore.Bucket, w, window int) *chain.Writer {
	b.Helper()
	e := newEnv(b, len(buckets))
	rec, err := e.minter.Mint(context.Background(), star, epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: w, Window: window, Prefix: e.keys.Prefix})
	if err != nil {
		b.Fatal(err)
	}
	wr, err := chain.NewWriter(rec, chain.MustZones(buckets...), chain.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return wr
}

func memBuckets(k int) []objstore.Bucket {
	out := make([]objstore.Bucket, k)
	for i := range out {
		out[i] = memblob.New(fmt.Sprintf("zone-%c", 'a'+i))
	}
	return out
}

// BenchmarkAppendMem: pipelined appends of 1 KiB payloads on in-memory
// buckets, K=3, W=2.
func BenchmarkAppendMem(b *testing.B) {
	for _, window := range []int{64, 256} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			w := benchWriter(b, memBuckets(3), 2, window)
			data := make([]byte, 1024)
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			start := time.Now()
			pipeline(b, w, b.N, data, nil)
			elapsed := time.Since(start)
			b.StopTimer()
			if err := w.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
		})
	}
}

// BenchmarkRawMem is the storage cost underneath BenchmarkAppendMem: the same
// 1 KiB flights created in three memblob buckets by one goroutine, no writer.
// The ratio of the two rates, measured in one run, is the writer's overhead
// on this machine.
func BenchmarkRawMem(b *testing.B) {
	buckets := memBuckets(3)
	keys := wire.Keys{}
	payload := make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	for i := range uint64(b.N) {
		data := wire.EncodeFlight(star, 1, i, payload)
		key := keys.Slot(star, 1, i)
		for _, bk := range buckets {
			if err := bk.Create(context.Background(), key, data); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "slots/s")
}

// BenchmarkAppendLatency: with 20 ms per create and window 64, the
// pipelining limit is window ÷ latency = 3,200 slots/s. The benchmark
// reports the achieved rate and its ratio to that limit.
func BenchmarkAppendLatency(b *testing.B) {
	const createLatency = 20 * time.Millisecond
	const window = 64
	buckets := memBuckets(3)
	for i, bk := range buckets {
		buckets[i] = latency.Wrap(bk, latency.Options{Create: latency.Fixed(createLatency)})
	}
	w := benchWriter(b, buckets, 2, window)
	data := make([]byte, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	pipeline(b, w, b.N, data, nil)
	elapsed := time.Since(start)
	b.StopTimer()
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	rate := float64(b.N) / elapsed.Seconds()
	limit := float64(window) / createLatency.Seconds()
	b.ReportMetric(rate, "slots/s")
	b.ReportMetric(100*rate/limit, "%limit")
}

// BenchmarkAppendHeap appends 1,000,000 payloads per op (K=3, W=2, window
// 64) into discarding buckets (benchfix.Discard), sampling the heap every
// 10,000 appends (after a GC, so it is the live heap). It reports the
// largest heap growth over a baseline taken after 10,000 warm-up appends,
// in bytes and as a multiple of window × payload size (the target is below
// 2), the same over the baseline before the writer ran (cold, which
// includes the runtime's goroutine descriptors), and the largest goroutine
// stack use. At 1 KiB the window's payloads are 64 KiB, so the writer's
// fixed structures (futures, goroutines, channels) weigh as much as the
// payloads; 16 KiB shows the payload term.
func BenchmarkAppendHeap(b *testing.B) {
	for _, size := range []int{1024, 16384} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) { benchmarkAppendHeap(b, size) })
	}
}

func benchmarkAppendHeap(b *testing.B, size int) {
	const (
		n       = 1_000_000
		warm    = 10_000
		window  = 64
		samples = 10_000
	)
	data := make([]byte, size)
	var worst, cold, stack uint64
	for range b.N {
		buckets := benchfix.Discards("zone-a", "zone-b", "zone-c")
		w := benchWriter(b, buckets, 2, window)
		var ms runtime.MemStats
		sample := func() uint64 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			stack = max(stack, ms.StackInuse)
			return ms.HeapAlloc
		}
		// cold: before the writer ever ran; warm: after a first run has
		// made the runtime's goroutine descriptors, which the runtime keeps
		// for reuse and which do not grow with the appends.
		coldBase := sample()
		pipeline(b, w, warm, data, nil)
		base := sample()
		pipeline(b, w, n, data, func(i int) {
			if i%samples == samples-1 {
				h := sample()
				if h > base {
					worst = max(worst, h-base)
				}
				if h > coldBase {
					cold = max(cold, h-coldBase)
				}
			}
		})
		if err := w.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(worst), "max-heap-B")
	b.ReportMetric(float64(worst)/float64(window*size), "x-window-bytes")
	b.ReportMetric(float64(cold)/float64(window*size), "cold-x-window-bytes")
	b.ReportMetric(float64(stack), "max-stack-B")
}
