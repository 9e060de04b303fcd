package main

import (
	"context"
	"os"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// Example_slots fences an epoch whose writer left slot 1 with one copy
// and slot 3 past a hole, then shows its slot map.
func Example_slots() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	minter, _ := epoch.NewMinter(store, epoch.Options{})
	rec, _ := minter.Mint(ctx, "star-a", epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 4})
	for slot, zones := range [][]int{{0, 1, 2}, {2}, {}, {0, 2}} {
		for _, z := range zones {
			_ = buckets[z].Create(ctx, wire.KeysOf(rec).Slot("star-a", 1, uint64(slot)), wire.EncodeFlight("star-a", 1, uint64(slot), []byte("payload")))
		}
	}
	env := Env{Stdout: os.Stdout, Store: store, Buckets: buckets}
	run(ctx, []string{"fence", "-yes", "-json=false", "star-a", "1"}, Env{Store: store, Buckets: buckets})
	run(ctx, []string{"slots", "star-a", "1"}, env)
	// Output:
	// star-a/1 (standard, K=3 W=2 window=4) fenced cut=2
	// slot  zone-a  zone-b  zone-c  verdict
	// 0     F       F       F       committed
	// 1     F       F       F       committed
	// 2     P       P       ·       cut
	// 3     F       ·       F       garbage
	// (read slots 0–6; slots 4–6 hold nothing in any zone)
	// F flight  P poison  · empty  ? unreachable  X foreign
}
