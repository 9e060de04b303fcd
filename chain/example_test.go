package chain_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// Write a few records to an epoch on three in-memory zones and read them
// back.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	minter, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	if err != nil {
		panic(err)
	}
	zones := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	rec, err := minter.Mint(ctx, "broker-1", epoch.Constants{
		Class: "standard", Buckets: chain.Names(zones...), W: 2, Window: 16,
	})
	if err != nil {
		panic(err)
	}

	w, err := chain.NewWriter(rec, chain.MustZones(zones...), chain.WriterOptions{})
	if err != nil {
		panic(err)
	}
	for _, rec := range []string{"alpha", "beta", "gamma"} {
		pos, err := w.Append(ctx, []byte(rec))
		if err != nil {
			panic(err)
		}
		fmt.Println("appended", rec, "at", pos)
	}
	if err := w.Close(ctx); err != nil {
		panic(err)
	}

	r, err := chain.NewReader(minter, chain.MustZones(zones...), chain.ReaderOptions{})
	if err != nil {
		panic(err)
	}
	for f, err := range r.Flights(ctx, "broker-1", chain.Position{}) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("read %s at %v\n", f.Payload, f.Position)
	}
	// Output:
	// appended alpha at 1/0
	// appended beta at 1/1
	// appended gamma at 1/2
	// read alpha at 1/0
	// read beta at 1/1
	// read gamma at 1/2
}

// Pipelined appends: Submit returns at once, the futures resolve in slot
// order.
func ExampleWriter_Submit() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	minter, _ := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	zones := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	rec, _ := minter.Mint(ctx, "broker-1", epoch.Constants{Class: "standard", Buckets: chain.Names(zones...), W: 2, Window: 64})
	w, _ := chain.NewWriter(rec, chain.MustZones(zones...), chain.WriterOptions{})
	defer w.Abort()

	var futures []*chain.Future
	for i := range 100 {
		f, err := w.Submit(ctx, fmt.Appendf(nil, "record %d", i))
		if err != nil {
			panic(err)
		}
		futures = append(futures, f)
	}
	last, err := futures[len(futures)-1].Wait(ctx)
	fmt.Println("last acknowledged:", last, err)
	fmt.Println("release point:", w.Released())
	// Output:
	// last acknowledged: 1/99 <nil>
	// release point: 100
}

// A fencer poisons a slot the writer has not filled yet: the writer halts
// there and acknowledges nothing from that slot on.
func ExampleFencedError() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	minter, _ := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	a, b, c := memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")
	rec, _ := minter.Mint(ctx, "broker-1", epoch.Constants{Class: "standard", Buckets: chain.Names(a, b, c), W: 2, Window: 4})

	// The fencer takes slot 2 in B = K−W+1 = 2 buckets.
	key := wire.Keys{}.Slot("broker-1", rec.Epoch, 2)
	poison := wire.EncodePoison("broker-1", rec.Epoch, 2, "broker-2")
	_ = a.Create(ctx, key, poison)
	_ = c.Create(ctx, key, poison)

	w, _ := chain.NewWriter(rec, chain.MustZones(a, b, c), chain.WriterOptions{})
	for i := range 4 {
		pos, err := w.Append(ctx, fmt.Appendf(nil, "record %d", i))
		var fe *chain.FencedError
		switch {
		case errors.As(err, &fe):
			fmt.Println("record", i, "fenced: dead slot", fe.Slot)
		case err != nil:
			panic(err)
		default:
			fmt.Println("record", i, "at", pos)
		}
	}
	_ = w.Close(ctx) // every slot decided: the halt, if any, came before
	select {
	case <-w.Halted():
		fmt.Println("writer error:", w.Err())
	default:
		fmt.Println("the writer did not halt")
	}
	// Output:
	// record 0 at 1/0
	// record 1 at 1/1
	// record 2 fenced: dead slot 2
	// record 3 fenced: dead slot 2
	// writer error: chain broker-1/1: slot 2 is dead (epoch fenced): nothing at or past it is acknowledged
}
