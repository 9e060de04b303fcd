package epoch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore/memstore"
)

// An epoch's life: minted open, fenced at its cut by a successor, settled.
func Example() {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := epoch.NewMinter(memstore.New(memstore.Options{Clock: fc}), epoch.Options{Clock: fc, Identity: "broker-1"})
	if err != nil {
		panic(err)
	}
	c := epoch.Constants{Class: "standard", Buckets: []string{"zone-a", "zone-b", "zone-c"}, W: 2, Window: 16}

	first, err := m.Mint(ctx, "star-1", c)
	if err != nil {
		panic(err)
	}
	fmt.Println(first)

	// The writer restarts: nothing resumes an epoch, it mints the next.
	second, err := m.Mint(ctx, "star-1", c)
	if err != nil {
		panic(err)
	}
	fmt.Println(second)
	superseded, _ := m.Superseded(ctx, first)
	fmt.Println("first superseded:", superseded)

	// A fencer found slot 42 dead; it publishes the cut, then settles.
	if _, err := m.Publish(ctx, "star-1", first.Epoch, 42); err != nil {
		panic(err)
	}
	// A second fencer derived the same cut: a read, not an error.
	if _, err := m.Publish(ctx, "star-1", first.Epoch, 42); err != nil {
		panic(err)
	}
	settled, err := m.MarkSettled(ctx, "star-1", first.Epoch)
	if err != nil {
		panic(err)
	}
	fmt.Println(settled, "checkpoint", settled.Cursors.Checkpoint)

	for r, err := range m.Epochs(ctx, "star-1") {
		if err != nil {
			panic(err)
		}
		fmt.Println("epoch", r.Epoch, r.State)
	}
	// Output:
	// star-1/1 (standard, K=3 W=2 window=16) open
	// star-1/2 (standard, K=3 W=2 window=16) open
	// first superseded: true
	// star-1/1 (standard, K=3 W=2 window=16) settled cut=42 checkpoint 42
	// epoch 1 settled
	// epoch 2 open
}

// Heads are kept per storage class: an express roll does not supersede the
// standard epoch, and the other way round.
func ExampleMinter_Mint() {
	ctx := context.Background()
	m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	if err != nil {
		panic(err)
	}
	standard := epoch.Constants{Class: "standard", Buckets: []string{"zone-a", "zone-b", "zone-c"}, W: 2, Window: 16}
	express := epoch.Constants{Class: "express", Buckets: []string{"fast-a"}, W: 1, Window: 4}

	s, _ := m.Mint(ctx, "star-1", standard)
	x, _ := m.Mint(ctx, "star-1", express)
	x2, _ := m.Mint(ctx, "star-1", express)
	ch, _ := m.Chain(ctx, "star-1")
	fmt.Println("next:", ch.Next, "heads:", ch.Heads)
	for _, r := range []*epoch.Record{s, x, x2} {
		sup, _ := m.Superseded(ctx, r)
		fmt.Printf("%d %s superseded=%v\n", r.Epoch, r.Constants.Class, sup)
	}

	// Bad input is refused before anything is written.
	_, err = m.Mint(ctx, "star-1", epoch.Constants{Class: "standard", Buckets: []string{"zone-a"}, W: 2, Window: 16})
	var ce *cutline.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	// Output:
	// next: 4 heads: map[express:3 standard:1]
	// 1 standard superseded=false
	// 2 express superseded=true
	// 3 express superseded=false
	// true w
}

// A different cut than the published one is a programming error, reported
// with both values and never retried.
func ExampleMinter_Publish() {
	ctx := context.Background()
	m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	if err != nil {
		panic(err)
	}
	c := epoch.Constants{Class: "standard", Buckets: []string{"zone-a", "zone-b", "zone-c"}, W: 2, Window: 16}
	if _, err := m.Mint(ctx, "star-1", c); err != nil {
		panic(err)
	}
	r, _ := m.Publish(ctx, "star-1", 1, 7)
	fmt.Println(r)

	_, err = m.Publish(ctx, "star-1", 1, 8)
	var mismatch *epoch.CutMismatchError
	if errors.As(err, &mismatch) {
		fmt.Println("published", mismatch.Published, "offered", mismatch.Offered)
	}
	fmt.Println(errors.Is(err, epoch.ErrCutMismatch))
	// Output:
	// star-1/1 (standard, K=3 W=2 window=16) fenced cut=7
	// published 7 offered 8
	// true
}
