package batch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline/batch"
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
