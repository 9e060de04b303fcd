package roll_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// The benchmarks run on in-memory zones behind a fixed injected latency on
// every object request (real clock), K=3, W=2; the metastore has no
// latency. Run them with
//
//	go test -run '^$' -bench . -benchtime 5x ./roll
//
// They report wall time per operation and the object requests it made,
// which do not depend on the machine.

const benchLatency = 20 * time.Millisecond

// requestCounts are benchfix.Requests as the benchmarks report them, with
// the sequential round trips.
type requestCounts struct{ reads, creates, deletes, rounds int }

func countRequests(zones []*fault.Bucket) requestCounts {
	c := benchfix.Count(zones)
	return requestCounts{reads: c.Reads, creates: c.Creates, deletes: c.Deletes}
}

func (c requestCounts) report(b *testing.B, n int) {
	b.ReportMetric(float64(c.reads)/float64(n), "reads/op")
	b.ReportMetric(float64(c.creates)/float64(n), "creates/op")
	b.ReportMetric(float64(c.deletes)/float64(n), "deletes/op")
	if c.rounds > 0 {
		b.ReportMetric(float64(c.rounds)/float64(n), "rounds/op")
	}
}

// benchRoller opens a roller over slow zones. The host covers on
// acknowledgement and advances the checkpoint (cover).
type benchHost struct {
	r       *roll.Roller
	m       *epoch.Minter
	refs    *settle.RefIndex
	raw     []objstore.Bucket
	counted []*fault.Bucket
	rounds  *roundCounter // sequential round trips, over the slow views
	keys    wire.Keys
	next    uint64 // next stream offset
	// slots counts the slots used in the current epoch, to place poison
	// ahead of the writer.
	slots map[uint64]uint64
}

func openBenchRoller(b *testing.B, window int, rollOnHalt bool) *benchHost {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		b.Fatal(err)
	}
	raw, counted, slow := benchfix.Zones(benchLatency, "a", "b", "c")
	keys := wire.Keys{Prefix: "chains"}
	rounds := &roundCounter{}
	for i, z := range slow {
		slow[i] = rounds.wrap(z)
	}
	zones := chain.MustZones(slow...)
	f, err := fence.New(m, zones, fence.Options{Identity: starA})
	if err != nil {
		b.Fatal(err)
	}
	refs, err := settle.NewRefIndex(store, "", locate)
	if err != nil {
		b.Fatal(err)
	}
	s, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	if err != nil {
		b.Fatal(err)
	}
	r, err := roll.Open(ctx, s, starA, epoch.Constants{Class: "standard", Buckets: chain.Names(raw...), W: 2, Window: window, Prefix: keys.Prefix},
		roll.Options{RollOnHalt: rollOnHalt, Backoff: clock.Backoff{Min: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(ctx) })
	return &benchHost{r: r, m: m, refs: refs, raw: raw, counted: counted, rounds: rounds, keys: keys, slots: map[uint64]uint64{}}
}

func (h *benchHost) submit(b *testing.B, n int) []*roll.Future {
	ctx := context.Background()
	out := make([]*roll.Future, n)
	for i := range out {
		a, err := h.r.Submit(ctx, record(stream, h.next, "x"))
		if err != nil {
			b.Fatal(err)
		}
		h.next++
		out[i] = a
	}
	return out
}

// absorb waits for the appends, covers them and advances the checkpoint of
// the epoch they landed in (the host's duties).
func (h *benchHost) absorb(b *testing.B, apps []*roll.Future, offset uint64) {
	ctx := context.Background()
	top := map[uint64]uint64{}
	for i, a := range apps {
		pos, err := a.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.refs.Cover(ctx, starA, chain.Flight{Position: pos, Payload: record(stream, offset+uint64(i), "x")}); err != nil {
			b.Fatal(err)
		}
		top[pos.Epoch] = max(top[pos.Epoch], pos.Slot+1)
	}
	for ep, slot := range top {
		h.slots[ep] = max(h.slots[ep], slot)
		err := h.r.Checkpoint(ctx, chain.Position{Epoch: ep, Slot: slot})
		if err != nil && !errors.Is(err, epoch.ErrCursorRegression) {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoll measures in-process rolls with 20 ms object latency:
//
//   - planned/inflight=0: Roll with every append acknowledged and
//     covered; the time is the roll alone (drain, mint, fence, settle).
//     The writer closes cleanly, so the roll fences at its release point
//     (fence.Fencer.FenceAt): one round of B poison creates, no walk;
//   - planned/inflight=64: Roll with a full window of appends in flight,
//     which the old epoch acknowledges while draining and the settlement
//     covers (one read each);
//   - halt: a batch of 64 appends meets a slot poisoned 8 ahead of the
//     writer; the time is the whole batch (halt, roll, republication of
//     the tail), against the same batch without a halt (nohalt).
//
// rounds/op counts sequential round trips to object storage (see
// roundCounter), which do not depend on the machine either.
func BenchmarkRoll(b *testing.B) {
	ctx := context.Background()
	const window = 64
	for _, inflight := range []int{0, 64} {
		b.Run(fmt.Sprintf("planned/inflight=%d", inflight), func(b *testing.B) {
			h := openBenchRoller(b, window, false)
			c := h.r.Epoch().Constants
			var total requestCounts
			for i := range b.N {
				b.StopTimer()
				off := h.next
				apps := h.submit(b, 64)
				if inflight == 0 {
					h.absorb(b, apps, off)
				}
				c.Window = window - i%2 // a change of constants every time
				if inflight == 0 {
					h.rounds.quiesce(b) // the writer's background creates
				}
				benchfix.Reset(h.counted)
				h.rounds.reset()
				b.StartTimer()
				if err := h.r.Roll(ctx, c); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				rounds, _ := h.rounds.get()
				total.rounds += rounds
				rc := countRequests(h.counted)
				total.reads += rc.reads
				total.creates += rc.creates
				total.deletes += rc.deletes
				if inflight > 0 {
					h.absorb(b, apps, off)
				}
			}
			total.report(b, b.N)
		})
	}
	for _, halt := range []bool{false, true} {
		name := "nohalt"
		if halt {
			name = "halt"
		}
		b.Run(name, func(b *testing.B) {
			h := openBenchRoller(b, window, true)
			var total requestCounts
			for range b.N {
				b.StopTimer()
				ep := h.r.Epoch().Epoch
				if halt {
					slot := h.slots[ep] + 8
					for _, z := range h.raw[:2] {
						if err := z.Create(ctx, h.keys.Slot(starA, ep, slot), wire.EncodePoison(starA, ep, slot, "bench")); err != nil {
							b.Fatal(err)
						}
					}
				}
				benchfix.Reset(h.counted)
				h.rounds.reset()
				off := h.next
				b.StartTimer()
				apps := h.submit(b, 64)
				for _, a := range apps {
					if _, err := a.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				rounds, _ := h.rounds.get()
				total.rounds += rounds
				rc := countRequests(h.counted)
				total.reads += rc.reads
				total.creates += rc.creates
				total.deletes += rc.deletes
				h.absorb(b, apps, off)
				if halt && h.r.Epoch().Epoch != ep+1 {
					b.Fatalf("no roll: epoch %d", h.r.Epoch().Epoch)
				}
			}
			total.report(b, b.N)
		})
	}
}
