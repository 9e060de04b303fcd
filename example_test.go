package cutline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
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

// The packages composed by hand: mint an epoch, append through a writer,
// fence and settle the epoch as a successor does, and watch the old writer
// fail to acknowledge anything more. This is the composition shown in the
// README.
func Example_compose() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{}) // etcd in production: metastore/etcd
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	zones := must(chain.NewZones(buckets...)) // every party resolves an epoch's buckets here
	minter := must(epoch.NewMinter(store, epoch.Options{}))

	// Star A mints an epoch (K=3 zones, W=2 copies) and appends.
	rec := must(minter.Mint(ctx, "star-a", epoch.Constants{
		Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 64, Prefix: "chains"}))
	w := must(chain.NewWriter(rec, zones, chain.WriterOptions{}))
	for _, offset := range []string{"0", "1", "2"} {
		fmt.Println("acknowledged at", must(w.Append(ctx, []byte(offset))))
	}

	// A successor fences A's epoch and settles it: the refs now cover
	// every acknowledged flight. Here each payload is its stream offset.
	refs := must(settle.NewRefIndex(store, "", func(p []byte) ([]settle.Span, error) {
		off, err := strconv.ParseUint(string(p), 10, 64)
		return []settle.Span{{Stream: "orders", Offset: off, Count: 1, End: uint64(len(p))}}, err
	}))
	fencer := must(fence.New(minter, zones, fence.Options{}))
	settler := must(settle.New(minter, zones, refs, settle.Options{Fencer: fencer}))
	for _, r := range must(settler.SettleAll(ctx, "star-a")) {
		fmt.Println("cut", r.Cut, "covered", r.Covered) // cut 3 covered 3
	}
	fmt.Println("stream continues at", must(refs.Next(ctx, "orders"))) // 3

	// A's writer, still running, can never acknowledge again.
	_, err := w.Append(ctx, []byte("3"))
	fmt.Println("old writer fenced:", errors.Is(err, chain.ErrFenced)) // true
	w.Abort()
	// Output:
	// acknowledged at 1/0
	// acknowledged at 1/1
	// acknowledged at 1/2
	// cut 3 covered 3
	// stream continues at 3
	// old writer fenced: true
}
