package observe_test

import (
	"context"
	"fmt"

	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/observe"
)

// Counting a zone's requests by operation and outcome, as a metric would.
func Example() {
	ctx := context.Background()
	counts := map[string]int{}
	zone, err := observe.Wrap(memblob.New("zone-a"), func(bucket string, op observe.Op, err error) {
		counts[fmt.Sprintf("%s %s %s", bucket, op, observe.Outcome(err))]++
	})
	if err != nil {
		panic(err)
	}
	_ = zone.Create(ctx, "flight-1", []byte("data"))
	_ = zone.Create(ctx, "flight-1", []byte("data"))
	_, _ = zone.Get(ctx, "flight-2")
	fmt.Println(counts)
	// Output:
	// map[zone-a create exists:1 zone-a create ok:1 zone-a get not_found:1]
}
