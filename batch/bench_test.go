package batch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/lease"
)

// BenchmarkProducer: 100-byte records through a Producer into a star on
// in-memory zones and metastore (K=3, W=2, window 16), reported in
// records/s, with the records per flight.
//
//	go test -run '^$' -bench Producer ./batch/
func BenchmarkProducer(b *testing.B) {
	for _, tc := range []struct {
		name    string
		streams int
		opts    batch.Options
	}{
		{"linger=0", 1, batch.Options{}},
		{"linger=1ms", 1, batch.Options{Linger: time.Millisecond}},
		{"linger=0/streams=4", 4, batch.Options{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var names []string
			for i := range tc.streams {
				names = append(names, fmt.Sprint("s", i))
			}
			w := newWorld(b, names...)
			p, err := batch.New(w.star, tc.opts)
			if err != nil {
				b.Fatal(err)
			}
			rec := make([]byte, 100)
			ctx := context.Background()
			var last *batch.Ack
			b.ResetTimer()
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				if last, err = p.Add(ctx, names[i%len(names)], rec); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if _, _, err := last.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			st := p.Stats()
			b.ReportMetric(float64(st.Records)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(st.Records)/float64(max(st.Flights, 1)), "records/flight")
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkDedupAppender: 100-byte records of idempotent producers
// through a DedupAppender (one flight each) on the same star, from 16
// appenders at once over 4 streams, reported in appends/s; and the retry
// of a record the stream holds, which reads the record back to compare
// its bytes.
//
//	go test -run '^$' -bench DedupAppender -benchmem ./batch/
func BenchmarkDedupAppender(b *testing.B) {
	setup := func(b *testing.B) *batch.DedupAppender {
		w := newWorld(b)
		store, err := batch.NewDedupStore(w.star, w.env.Party("replayer").Streams, batch.DedupStoreOptions{Extract: extract})
		if err != nil {
			b.Fatal(err)
		}
		a, err := batch.NewDedupAppender(batch.DedupAppenderConfig{Star: w.star, Store: store, Encode: encodeSub},
			batch.DedupAppenderOptions{Wrap: wrapBundle})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { a.Close(); w.star.Abort(); a.Wait() })
		return a
	}
	data := make([]byte, 100)
	b.Run("fresh", func(b *testing.B) {
		a := setup(b)
		var next atomic.Uint64
		start := time.Now()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n := next.Add(1)
				s := batch.Submission{Stream: fmt.Sprint("s", n%4), Producer: fmt.Sprint("p", n%16), Seq: n / 16, Data: data}
				if _, err := a.Append(context.Background(), s); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
	})
	// The reference: the same flights submitted to the star directly,
	// with no producer table, no open through the appender and no save.
	b.Run("star", func(b *testing.B) {
		w := newWorld(b, "s0", "s1", "s2", "s3")
		b.Cleanup(w.star.Abort)
		var mu sync.Mutex // a stream's Next and Submit go together
		start := time.Now()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				stream := fmt.Sprint("s", i%4)
				mu.Lock()
				off, err := w.star.Next(stream)
				var f *lease.Future
				if err == nil {
					f, err = w.star.Submit(context.Background(), wrapBundle(stream, off, encodeSub(batch.Submission{Stream: stream, Data: data}, off)))
				}
				mu.Unlock()
				if err == nil {
					_, err = f.Wait(context.Background())
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
	})
	b.Run("retry", func(b *testing.B) {
		a := setup(b)
		s := batch.Submission{Stream: "s", Producer: "p", Data: data}
		if _, err := a.Append(context.Background(), s); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if got, err := a.Append(context.Background(), s); err != nil || !got.Duplicate {
				b.Fatal(got, err)
			}
		}
	})
}
