package settle_test

import (
	"context"
	"fmt"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// Compaction: broker-1's epoch of 130 records is settled, compacted into
// a segment, and trimmed; the stream still reads whole, from the segment.
func Example_compaction() {
	ctx := context.Background()
	x := deadBroker(ctx, 130) // broker-1 appended 130 records and died
	minter, zones, refs, rec := x.minter, x.zones, x.refs, x.rec
	fencer, _ := fence.New(minter, zones, fence.Options{Identity: "broker-2"})
	settler, _ := settle.New(minter, zones, refs, settle.Options{Fencer: fencer})
	if _, err := settler.SettleAll(ctx, "broker-1"); err != nil {
		panic(err)
	}

	compactor, _ := settle.NewCompactor(minter, zones, refs, "compactor-1", settle.CompactorOptions{})
	rep, err := compactor.Compact(ctx, "broker-1", rec.Epoch)
	if err != nil {
		panic(err)
	}
	fmt.Printf("rewritten %d of %d: %d pages into %d segment\n", rep.Rewritten, rep.Checkpoint, rep.Pages, rep.Segments)
	tr, _ := settler.TrimRewritten(ctx, "broker-1", rec.Epoch)
	fmt.Printf("trimmed below %d\n", tr.Trimmed)

	reader, _ := settle.NewStreamReader(minter, zones, refs, settle.StreamReaderOptions{})
	n, fromSegments := 0, 0
	var last string
	for c, err := range reader.Read(ctx, "orders", 0) {
		if err != nil {
			panic(err)
		}
		n++
		if c.InSegment() {
			fromSegments++
		}
		last = string(c.Data)
	}
	fmt.Printf("read %d records, %d from segments; last %q\n", n, fromSegments, last)
	// Output:
	// rewritten 130 of 130: 3 pages into 1 segment
	// trimmed below 130
	// read 130 records, 130 from segments; last "orders 129 item-129"
}

// deadWorld is where the lifecycle examples start: three zones in memory
// and a metastore, in which broker-1 appended records of stream "orders"
// to an epoch and died with it open.
type deadWorld struct {
	store  metastore.Store
	minter *epoch.Minter
	zones  chain.Zones
	refs   *settle.RefIndex
	rec    *epoch.Record
}

// deadBroker makes a deadWorld of n records, "orders <i> item-<i>".
func deadBroker(ctx context.Context, n int) deadWorld {
	store := memstore.New(memstore.Options{})
	minter, _ := epoch.NewMinter(store, epoch.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	zones := chain.MustZones(buckets...)
	refs, _ := settle.NewRefIndex(store, "", orderLocator)
	rec, _ := minter.Mint(ctx, "broker-1", epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 16})
	w, _ := chain.NewWriter(rec, zones, chain.WriterOptions{})
	for i := range n {
		if _, err := w.Append(ctx, fmt.Appendf(nil, "orders %d item-%d", i, i)); err != nil {
			panic(err)
		}
	}
	w.Abort()
	return deadWorld{store: store, minter: minter, zones: zones, refs: refs, rec: rec}
}

// Reading in pages: a host answers a read with a page of the stream,
// bounded by records and by the bytes of its answer, and tells its client
// where to go on before it has read a byte.
func ExampleRefIndex_Page() {
	ctx := context.Background()
	x := deadBroker(ctx, 10)
	fencer, _ := fence.New(x.minter, x.zones, fence.Options{Identity: "broker-2"})
	settler, _ := settle.New(x.minter, x.zones, x.refs, settle.Options{Fencer: fencer})
	if _, err := settler.SettleAll(ctx, "broker-1"); err != nil {
		panic(err)
	}
	reader, _ := settle.NewStreamReader(x.minter, x.zones, x.refs, settle.StreamReaderOptions{})
	// Each record costs its bytes and 8 of framing in the answer.
	lim := settle.PageLimits{MaxRecords: 4, MaxBytes: 70, Cost: func(e settle.Extent) int64 { return int64(e.End-e.Start) + 8 }}
	for from := uint64(0); ; {
		p, err := x.refs.Page(ctx, "orders", from, lim)
		if err != nil {
			panic(err)
		}
		if len(p.Extents) == 0 {
			fmt.Printf("at the end: %d\n", p.Next)
			break
		}
		var got []string
		for c, err := range reader.ReadPage(ctx, p) {
			if err != nil {
				panic(err)
			}
			got = append(got, string(c.Data))
		}
		fmt.Printf("%q, continue at %d\n", got, p.Continue)
		from = p.Continue
	}
	// Output:
	// ["orders 0 item-0" "orders 1 item-1" "orders 2 item-2"], continue at 3
	// ["orders 3 item-3" "orders 4 item-4" "orders 5 item-5"], continue at 6
	// ["orders 6 item-6" "orders 7 item-7" "orders 8 item-8"], continue at 9
	// ["orders 9 item-9"], continue at 10
	// at the end: 10
}
