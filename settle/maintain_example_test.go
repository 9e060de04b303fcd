package settle_test

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/settle"
)

// Maintenance: broker-1 appends 130 records and dies with its epoch open.
// A first pass of broker-2's Maintainer settles the epoch (which covers
// the records), compacts them into a segment and trims every flight; the
// next applies the retention, the newest 60 records, and a read below the
// retention point is told where the stream now starts.
func ExampleMaintainer() {
	ctx := context.Background()
	x := deadBroker(ctx, 130) // broker-1 appended 130 records and died
	store, minter, zones, refs, rec := x.store, x.minter, x.zones, x.refs, x.rec

	fencer, _ := fence.New(minter, zones, fence.Options{Identity: "broker-2"})
	settler, _ := settle.New(minter, zones, refs, settle.Options{Fencer: fencer})
	compactor, _ := settle.NewCompactor(minter, zones, refs, "broker-2", settle.CompactorOptions{})
	m, err := settle.NewMaintainer(settle.MaintainerConfig{
		Store: store, Minter: minter, Settler: settler, Compactor: compactor, Refs: refs,
		Streams: func(context.Context) ([]string, error) { return []string{"orders"}, nil },
	}, settle.MaintainerOptions{
		Policy: settle.Policy{MaxRecords: 60},
		// broker-2's right to write began after every epoch it sees.
		SettleBefore: func() int64 { return math.MaxInt64 },
	})
	if err != nil {
		panic(err)
	}
	for range 2 {
		rep, err := m.Pass(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("settled %d, expired %d, segments written %d, backlog %d\n", len(rep.Settled), rep.Expired, rep.Segments, rep.Backlog)
	}
	after, _ := minter.Get(ctx, "broker-1", rec.Epoch)
	fmt.Printf("trimmed below %d\n", after.Cursors.Trimmed)

	reader, _ := settle.NewStreamReader(minter, zones, refs, settle.StreamReaderOptions{})
	for _, err := range reader.Read(ctx, "orders", 0) {
		if te, ok := errors.AsType[*settle.TrimmedError](err); ok {
			fmt.Println("orders now starts at", te.Start)
		}
		break
	}
	// Output:
	// settled 1, expired 0, segments written 1, backlog 0
	// settled 0, expired 70, segments written 0, backlog 0
	// trimmed below 130
	// orders now starts at 70
}
