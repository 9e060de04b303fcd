package batch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A host gathers records of two streams into one flight, acknowledges
// each, and reads them back through its index.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := memstore.New(memstore.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	zones := chain.MustZones(buckets...)

	// The star's parts, with a RefIndex that reads bundles.
	minter := must(epoch.NewMinter(store, epoch.Options{Identity: "broker-1"}))
	fencer := must(fence.New(minter, zones, fence.Options{Identity: "broker-1"}))
	refs := must(settle.NewRefIndex(store, "", batch.Locate))
	settler := must(settle.New(minter, zones, refs, settle.Options{Fencer: fencer}))
	sess := must(store.NewSession(ctx, 10*time.Second))
	star := must(lease.Start(ctx, lease.Config{
		Star: "broker-1", Store: store, Session: sess, Minter: minter, Settler: settler, Index: refs,
		Constants: epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 64},
	}, lease.Options{}))
	for _, s := range []string{"orders", "audit"} {
		must(star.Open(ctx, s, lease.OpenOptions{}))
	}

	// Records gather for up to 5 ms, or until 64 KiB or 100 records.
	p := must(batch.New(star, batch.Options{MaxBytes: 64 << 10, MaxRecords: 100, Linger: 5 * time.Millisecond}))
	var acks []*batch.Ack
	for i := range 3 {
		acks = append(acks, must(p.Add(ctx, "orders", fmt.Appendf(nil, "order %d", i))))
	}
	acks = append(acks, must(p.Add(ctx, "audit", []byte("checked"))))
	for _, a := range acks {
		pos, offset, err := a.Wait(ctx)
		if err != nil {
			panic(err) // a real host retries (see the package documentation)
		}
		fmt.Printf("%s offset %d acknowledged in epoch %d\n", a.Stream(), offset, pos.Epoch)
	}
	if err := p.Close(ctx); err != nil {
		panic(err)
	}
	if err := star.Close(ctx); err != nil {
		panic(err)
	}
	_ = sess.Close(ctx)

	// A reader serves a stream from its refs.
	reader := must(chain.NewReader(minter, zones, chain.ReaderOptions{}))
	for r, err := range refs.Refs(ctx, "orders") {
		if err != nil {
			panic(err)
		}
		payload := must(reader.Read(ctx, r.Star, r.Position()))
		for _, rec := range must(batch.SpanEntries(payload, r.Span())) {
			fmt.Printf("orders[%d] = %s\n", rec.Offset, rec.Data)
		}
	}
	// Output:
	// orders offset 0 acknowledged in epoch 1
	// orders offset 1 acknowledged in epoch 1
	// orders offset 2 acknowledged in epoch 1
	// audit offset 0 acknowledged in epoch 1
	// orders[0] = order 0
	// orders[1] = order 1
	// orders[2] = order 2
}

// A host answers the retry of an idempotent producer with its first
// receipt, and a new holder of the stream rebuilds the table from its
// encoding.
func ExampleDedup() {
	table := must(batch.NewDedup(batch.DedupOptions{Producers: 100, Window: 8}))
	produce := func(producer string, seq uint64) {
		switch r, v := table.Lookup(producer, seq); v {
		case batch.Duplicate:
			fmt.Printf("%s/%d: duplicate of offset %d\n", producer, seq, r.Offset)
		case batch.TooOld:
			fmt.Printf("%s/%d: refused, too old\n", producer, seq)
		default:
			// Append the record; once acknowledged, at the table's next
			// offset, apply it.
			off := table.Next()
			table.Apply(producer, seq, batch.Receipt{Offset: off, Position: chain.Position{Epoch: 1, Slot: off}})
			fmt.Printf("%s/%d: appended at offset %d\n", producer, seq, off)
		}
	}
	for seq := range uint64(10) {
		produce("p", seq)
	}
	produce("p", 9) // a retry
	produce("p", 1) // below the window of 8

	saved := must(table.MarshalBinary())
	successor := must(batch.NewDedup(batch.DedupOptions{Producers: 100, Window: 8}))
	if err := successor.UnmarshalBinary(saved); err != nil {
		panic(err)
	}
	table = successor
	produce("p", 9)
	produce("p", 10)
	// Output:
	// p/0: appended at offset 0
	// p/1: appended at offset 1
	// p/2: appended at offset 2
	// p/3: appended at offset 3
	// p/4: appended at offset 4
	// p/5: appended at offset 5
	// p/6: appended at offset 6
	// p/7: appended at offset 7
	// p/8: appended at offset 8
	// p/9: appended at offset 9
	// p/9: duplicate of offset 9
	// p/1: refused, too old
	// p/9: duplicate of offset 9
	// p/10: appended at offset 10
}
