package cutlinetest_test

import (
	"context"
	"fmt"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// A host with a loop of its own records what its producer saw in a
// History, and Check judges the run on the storage it ran on: here a
// host that crashed before it covered anything, and a successor that
// settled its epoch. Then one violation is planted: an acknowledgement at
// the cut.
func ExampleCheck() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	zones := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	zoneSet := chain.MustZones(zones...)
	minter := must(epoch.NewMinter(store, epoch.Options{}))

	var hist cutlinetest.History
	rec := must(minter.Mint(ctx, "star-a", epoch.Constants{
		Class: "standard", Buckets: chain.Names(zones...), W: 2, Window: 8, Prefix: "chains"}))
	w := must(chain.NewWriter(rec, zoneSet, chain.WriterOptions{}))
	for i, id := range []string{"a", "b", "c"} {
		p := cutlinetest.Record("orders", uint64(i), id)
		of := hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Star: "star-a", ID: id, Payload: p})
		pos := must(w.Append(ctx, p))
		hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Star: "star-a", ID: id, Of: of, Pos: pos})
	}
	w.Abort() // the host crashes

	refs := must(settle.NewRefIndex(store, "", cutlinetest.Locate))
	fencer := must(fence.New(minter, zoneSet, fence.Options{}))
	settler := must(settle.New(minter, zoneSet, refs, settle.Options{Fencer: fencer}))
	must(settler.SettleAll(ctx, "star-a"))

	run := cutlinetest.Run{History: &hist, Store: store, Zones: zones}
	fmt.Println("violations:", len(cutlinetest.Check(ctx, run)))

	of := hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Star: "star-a", ID: "d", Payload: cutlinetest.Record("orders", 3, "d")})
	hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Star: "star-a", ID: "d", Of: of, Pos: chain.Position{Epoch: rec.Epoch, Slot: 3}})
	for _, v := range cutlinetest.Check(ctx, run) {
		fmt.Println(v)
	}
	// Output:
	// violations: 0
	// guarantee 2: record "d" acknowledged at star-a/1/3: at or past the cut 3
	// guarantee 5: record "d" acknowledged at star-a/1/3 is found 0 times in the index, not once
	// guarantee 5: record "d" acknowledged at star-a/1/3 is found 0 times in chain order, not once
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
