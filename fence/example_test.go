package fence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// A writer appends three records and dies (Abort); a successor fences its
// epoch. The cut is the first slot the writer never filled: the successor
// poisons it in B = K−W+1 = 2 of the 3 zones.
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
	for _, r := range []string{"alpha", "beta", "gamma"} {
		if _, err := w.Append(ctx, []byte(r)); err != nil {
			panic(err)
		}
	}
	w.Abort() // the writer dies

	f, err := fence.New(minter, chain.MustZones(zones...), fence.Options{Identity: "broker-2"})
	if err != nil {
		panic(err)
	}
	rep, err := f.FenceReport(ctx, "broker-1", rec.Epoch)
	if err != nil {
		panic(err)
	}
	fmt.Println("cut:", rep.Cut)
	fmt.Println("poison created:", rep.Poisoned)

	after, _ := minter.Get(ctx, "broker-1", rec.Epoch)
	fmt.Println("record:", after.State, "at", after.Cut)

	// A later fence, by anyone, is a read of the published cut.
	rep, _ = f.FenceReport(ctx, "broker-1", rec.Epoch)
	fmt.Println("again:", rep.Cut, "already fenced:", rep.AlreadyFenced)
	// Output:
	// cut: 3
	// poison created: 2
	// record: fenced at 3
	// again: 3 already fenced: true
}

// A writer that is still alive halts when it reaches the cut: its next
// append fails with chain.ErrFenced and nothing at or past the cut is
// acknowledged.
func Example_liveWriter() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	minter, _ := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	zones := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	rec, _ := minter.Mint(ctx, "broker-1", epoch.Constants{Class: "standard", Buckets: chain.Names(zones...), W: 2, Window: 16})
	w, _ := chain.NewWriter(rec, chain.MustZones(zones...), chain.WriterOptions{})
	defer w.Abort()
	for _, r := range []string{"alpha", "beta"} {
		pos, _ := w.Append(ctx, []byte(r))
		fmt.Println("acknowledged", r, "at slot", pos.Slot)
	}

	f, _ := fence.New(minter, chain.MustZones(zones...), fence.Options{})
	cut, _ := f.Fence(ctx, "broker-1", rec.Epoch)
	fmt.Println("cut:", cut)

	_, err := w.Append(ctx, []byte("gamma"))
	var fe *chain.FencedError
	fmt.Println("fenced:", errors.Is(err, chain.ErrFenced), errors.As(err, &fe) && fe.Slot == cut)
	// Output:
	// acknowledged alpha at slot 0
	// acknowledged beta at slot 1
	// cut: 2
	// fenced: true true
}

// Fence blocks while an unreachable zone holds the deciding vote on a slot.
// A host watches Undecided (alerting on the age of its entries) and bounds
// the fence with a context. The fake clock here only makes the example
// deterministic: it drives the fencer's retries (and failfast.BlockUntil
// is its BlockUntil, bounded by a context).
func ExampleFencer_Undecided() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	minter, _ := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	a, b, c := memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")
	rec, _ := minter.Mint(ctx, "broker-1", epoch.Constants{Class: "standard", Buckets: []string{"zone-a", "zone-b", "zone-c"}, W: 2, Window: 16})
	// Slot 0: a flight in zone-a, poison in zone-b; zone-c cannot be reached.
	key := wire.Keys{}.Slot("broker-1", rec.Epoch, 0)
	_ = a.Create(ctx, key, wire.EncodeFlight("broker-1", rec.Epoch, 0, []byte("alpha")))
	_ = b.Create(ctx, key, wire.EncodePoison("broker-1", rec.Epoch, 0, "an earlier fencer"))
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f, _ := fence.New(minter, chain.MustZones(a, b, unreachable{c}), fence.Options{Clock: clk})

	fctx, giveUp := context.WithCancel(ctx)
	wait, stopWaiting := context.WithTimeout(ctx, 10*time.Second)
	defer stopWaiting()
	done := make(chan error, 1)
	go func() {
		_, err := f.Fence(fctx, "broker-1", rec.Epoch)
		stopWaiting() // an ended fence waits on nothing more
		done <- err
	}()
	err := failfast.BlockUntil(wait, clk, 1) // the fence waits to retry
	if err == nil {
		clk.Advance(time.Minute)
		err = failfast.BlockUntil(wait, clk, 1) // and waits again: still undecided
	}
	if err != nil {
		fmt.Println("the fence did not wait:", err)
	}
	for _, u := range f.Undecided() {
		fmt.Println("slot", u.Slot, "of epoch", u.Epoch, "undecided for", clk.Now().Sub(u.Since), "waiting for", u.Waiting)
	}
	giveUp() // the host gives up for now
	select {
	case err := <-done:
		var ue *fence.UndecidedError
		fmt.Println(errors.Is(err, fence.ErrUndecided), errors.As(err, &ue) && ue.Slot == 0)
	case <-ctx.Done():
		fmt.Println("the fence did not end when its context did:", ctx.Err())
	}
	// Output:
	// slot 0 of epoch 1 undecided for 1m0s waiting for [zone-c]
	// true true
}

// unreachable is a zone that answers nothing.
type unreachable struct{ objstore.Bucket }

func (u unreachable) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return nil, objstore.Unavailable(errors.New("zone down"))
}

func (u unreachable) Get(ctx context.Context, key string) ([]byte, error) {
	return nil, objstore.Unavailable(errors.New("zone down"))
}

func (u unreachable) Create(ctx context.Context, key string, data []byte) error {
	return objstore.Unavailable(errors.New("zone down"))
}
