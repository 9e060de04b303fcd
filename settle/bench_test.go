package settle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/settle"
)

// The benchmarks run on in-memory zones behind a fixed injected latency on
// every object request (real clock), K=3, W=2, window 64; the metastore
// has no latency. Run them with
//
//	go test -run '^$' -bench . -benchtime 5x ./settle
//
// They report wall time per operation and the object requests it made,
// which do not depend on the machine.

const benchLatency = 20 * time.Millisecond

// benchZones returns K in-memory zones, the fault wrappers that count the
// requests, and the views with latency a party uses.
func benchZones(k int) (raw []objstore.Bucket, counted []*fault.Bucket, slow []objstore.Bucket) {
	names := make([]string, k)
	for i := range names {
		names[i] = string(rune('a' + i))
	}
	return benchfix.Zones(benchLatency, names...)
}

// requestCounts are benchfix.Requests as the benchmarks report them.
type requestCounts struct{ reads, creates, deletes, lists int }

func countRequests(zones []*fault.Bucket) requestCounts {
	c := benchfix.Count(zones)
	return requestCounts{reads: c.Reads, creates: c.Creates, deletes: c.Deletes, lists: c.Lists}
}

func (c requestCounts) report(b *testing.B, n int) {
	b.ReportMetric(float64(c.reads)/float64(n), "reads/op")
	b.ReportMetric(float64(c.creates)/float64(n), "creates/op")
	b.ReportMetric(float64(c.deletes)/float64(n), "deletes/op")
}

func resetRequests(zones []*fault.Bucket) { benchfix.Reset(zones) }

// BenchmarkTakeover: a successor fences and settles a dead writer's epoch
// (256 committed slots and a ragged tail of a full window); lag is how many
// acknowledged slots the dead host had not covered yet. Settlement covers
// each of them once, and reads those the fence did not read (the fence
// walks from a window below the end), so the checkpoint's lag is what a
// host saves its successor by advancing it.
func BenchmarkTakeover(b *testing.B) {
	const window = 64
	for _, lag := range []int{0, 16, 64} {
		b.Run(fmt.Sprintf("lag=%d", lag), func(b *testing.B) {
			ctx := context.Background()
			keys := wire.Keys{Prefix: "chains"}
			var total requestCounts
			var rounds, cut int
			for i := range b.N {
				b.StopTimer()
				store := memstore.New(memstore.Options{})
				m, err := epoch.NewMinter(store, epoch.Options{})
				if err != nil {
					b.Fatal(err)
				}
				refs, err := settle.NewRefIndex(store, "", locate)
				if err != nil {
					b.Fatal(err)
				}
				raw, counted, slow := benchZones(3)
				ep, err := benchfix.LayRaggedEpoch(ctx, m, refs, raw, benchfix.RaggedEpoch{
					Star: starA, Prefix: keys.Prefix, Committed: 256, Window: window, Lag: lag, Seed: uint64(i),
					Record: func(slot uint64) []byte { return record(stream, slot, "x") },
				})
				if err != nil {
					b.Fatal(err)
				}
				zones := chain.MustZones(slow...)
				f, err := fence.New(m, zones, fence.Options{Identity: starB})
				if err != nil {
					b.Fatal(err)
				}
				s, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				reps, err := s.SettleAll(ctx, starA)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if len(reps) != 1 || reps[0].Epoch != ep || reps[0].Covered != lag+4 {
					b.Fatalf("unexpected reports %+v", reps)
				}
				c := countRequests(counted)
				total.reads += c.reads
				total.creates += c.creates
				total.deletes += c.deletes
				rounds += reps[0].Fence.Rounds
				cut = int(reps[0].Cut)
			}
			total.report(b, b.N)
			b.ReportMetric(float64(rounds)/float64(b.N), "fence-rounds/op")
			b.ReportMetric(float64(cut), "cut")
		})
	}
}
