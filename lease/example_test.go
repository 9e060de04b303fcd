package lease_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// locate is the host's payload format, "<stream>|<offset>|<data>": one
// record per flight.
func locate(p []byte) ([]settle.Span, error) {
	parts := bytes.SplitN(p, []byte("|"), 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a record: %q", p)
	}
	off, err := strconv.ParseUint(string(parts[1]), 10, 64)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: string(parts[0]), Offset: off, Count: 1, Start: 0, End: uint64(len(p))}}, nil
}

// startStar builds a star's parts over shared stores, as a host process
// does at start-up.
func startStar(ctx context.Context, name string, store metastore.Store, zones chain.Zones, c epoch.Constants) (*lease.Star, metastore.Session, error) {
	minter, err := epoch.NewMinter(store, epoch.Options{Identity: name})
	if err != nil {
		return nil, nil, err
	}
	fencer, err := fence.New(minter, zones, fence.Options{Identity: name})
	if err != nil {
		return nil, nil, err
	}
	refs, err := settle.NewRefIndex(store, "", locate)
	if err != nil {
		return nil, nil, err
	}
	settler, err := settle.New(minter, zones, refs, settle.Options{Fencer: fencer})
	if err != nil {
		return nil, nil, err
	}
	sess, err := store.NewSession(ctx, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	star, err := lease.Start(ctx, lease.Config{
		Star: name, Store: store, Session: sess,
		Minter: minter, Settler: settler, Index: refs, Constants: c,
	}, lease.Options{})
	if err != nil {
		_ = sess.Close(ctx)
		return nil, nil, err
	}
	return star, sess, nil
}

// A host opens a stream, appends to it, and hands it to another star
// through Finish and the open gate.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := memstore.New(memstore.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	zones := chain.MustZones(buckets...)
	c := epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 64}

	a, sessA, err := startStar(ctx, "broker-1", store, zones, c)
	if err != nil {
		panic(err)
	}
	ten, err := a.Open(ctx, "orders", lease.OpenOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("broker-1 opened orders:", ten.Decision, "at offset", ten.Next)
	for i := range 3 {
		next, _ := a.Next("orders")
		f, err := a.Submit(ctx, fmt.Appendf(nil, "orders|%d|order %d", next, i))
		if err != nil {
			panic(err)
		}
		if _, err := f.Wait(ctx); err != nil {
			panic(err)
		}
	}
	// The handoff: broker-1 leaves through Finish; broker-2's open
	// consumes the clean-release mark.
	if err := a.Finish(ctx, "orders", lease.ReasonHandoff); err != nil {
		panic(err)
	}
	b, sessB, err := startStar(ctx, "broker-2", store, zones, c)
	if err != nil {
		panic(err)
	}
	ten, err = b.Open(ctx, "orders", lease.OpenOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("broker-2 opened orders:", ten.Decision, "at offset", ten.Next, "tenure", ten.Tenure)

	for _, s := range []*lease.Star{a, b} {
		if err := s.Close(ctx); err != nil {
			panic(err)
		}
	}
	_ = sessA.Close(ctx)
	_ = sessB.Close(ctx)
	// Output:
	// broker-1 opened orders: fresh at offset 0
	// broker-2 opened orders: mark consumed at offset 3 tenure 2
}
