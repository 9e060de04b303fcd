package roll_test

import (
	"context"
	"fmt"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// locateOrder reads the example's payloads, "orders <offset> <body>": one
// record of stream orders per flight.
func locateOrder(p []byte) ([]settle.Span, error) {
	var off uint64
	_, err := fmt.Sscanf(string(p), "orders %d", &off)
	return []settle.Span{{Stream: "orders", Offset: off, Count: 1, End: uint64(len(p))}}, err
}

// A Roller changes the chain's configuration in process: appends before
// the roll are acknowledged in the old epoch, later ones in the new.
func Example() {
	ctx := context.Background()
	// The Roller works through the host's settler, which brings the
	// minter, the zones, the index and the fencer.
	store := memstore.New(memstore.Options{})
	minter, _ := epoch.NewMinter(store, epoch.Options{})
	zones := chain.MustZones(memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c"))
	fencer, _ := fence.New(minter, zones, fence.Options{Identity: "broker-1"})
	refs, _ := settle.NewRefIndex(store, "", locateOrder)
	settler, _ := settle.New(minter, zones, refs, settle.Options{Fencer: fencer})

	c := epoch.Constants{Class: "standard", Buckets: []string{"zone-a", "zone-b", "zone-c"}, W: 2, Window: 16}
	r, err := roll.Open(ctx, settler, "broker-1", c, roll.Options{RollOnHalt: true})
	if err != nil {
		panic(err)
	}
	pos, _ := r.Append(ctx, []byte("orders 0 apple"))
	fmt.Println("apple at", pos)
	c.W = 3 // every zone must hold each flight from now on
	if err := r.Roll(ctx, c); err != nil {
		panic(err)
	}
	pos, _ = r.Append(ctx, []byte("orders 1 pear"))
	fmt.Println("pear at", pos)
	if err := r.Close(ctx); err != nil {
		panic(err)
	}
	old, _ := minter.Get(ctx, "broker-1", 1)
	fmt.Println("epoch 1 is", old.State, "with cut", old.Cut)
	// Output:
	// apple at 1/0
	// pear at 2/0
	// epoch 1 is settled with cut 1
}
