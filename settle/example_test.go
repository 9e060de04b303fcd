package settle_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// orderLocator reads the example's payloads, "<stream> <offset> <body>":
// one record per flight.
func orderLocator(p []byte) ([]settle.Span, error) {
	f := strings.SplitN(string(p), " ", 3)
	if len(f) != 3 {
		return nil, fmt.Errorf("not a record: %q", p)
	}
	off, err := strconv.ParseUint(f[1], 10, 64)
	return []settle.Span{{Stream: f[0], Offset: off, Count: 1, End: uint64(len(p))}}, err
}

// A takeover: broker-1 writes three records and dies before its index
// covers them; broker-2 fences and settles broker-1's chain, which covers
// every acknowledged record, and continues the stream where it ends.
func Example() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	minter, _ := epoch.NewMinter(store, epoch.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	zones := chain.MustZones(buckets...)
	refs, _ := settle.NewRefIndex(store, "", orderLocator)

	// broker-1 appends and dies.
	rec, _ := minter.Mint(ctx, "broker-1", epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 16})
	w, _ := chain.NewWriter(rec, chain.MustZones(buckets...), chain.WriterOptions{})
	for i, body := range []string{"apple", "pear", "plum"} {
		if _, err := w.Append(ctx, fmt.Appendf(nil, "orders %d %s", i, body)); err != nil {
			panic(err)
		}
	}
	w.Abort()

	// broker-2 takes over.
	fencer, _ := fence.New(minter, zones, fence.Options{Identity: "broker-2"})
	settler, _ := settle.New(minter, zones, refs, settle.Options{Fencer: fencer})
	reports, err := settler.SettleAll(ctx, "broker-1")
	if err != nil {
		panic(err)
	}
	for _, r := range reports {
		fmt.Printf("epoch %d: cut %d, covered %d\n", r.Epoch, r.Cut, r.Covered)
	}
	for ref, err := range refs.Refs(ctx, "orders") {
		if err != nil {
			panic(err)
		}
		fmt.Printf("orders@%d → %s/%v\n", ref.Offset, ref.Star, ref.Position())
	}
	next, _ := refs.Next(ctx, "orders")
	fmt.Println("broker-2 continues at offset", next)
	// Output:
	// epoch 1: cut 3, covered 3
	// orders@0 → broker-1/1/0
	// orders@1 → broker-1/1/1
	// orders@2 → broker-1/1/2
	// broker-2 continues at offset 3
}
