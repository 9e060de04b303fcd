package metastore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

type counter struct {
	metastore.RecordHeader
	Next int64 `json:"next"`
}

// The read-decide-CAS loop on a versioned record: increment a counter,
// re-reading after a lost compare.
func Example() {
	ctx := context.Background()
	var st metastore.Store = memstore.New(memstore.Options{})

	increment := func(key string) (int64, error) {
		for {
			c := counter{RecordHeader: metastore.RecordHeader{Kind: "counter", Format: 1}}
			kv, err := st.Get(ctx, key)
			switch {
			case errors.Is(err, metastore.ErrNotFound): // first use: create it
			case err != nil:
				return 0, err // ErrUnavailable: unknown, the caller decides
			default:
				if err := metastore.DecodeRecord(key, kv.Value, "counter", 1, &c); err != nil {
					return 0, err
				}
			}
			c.Next++
			data, err := metastore.EncodeRecord(c)
			if err != nil {
				return 0, err
			}
			_, err = metastore.Put(ctx, st, key, data, kv.Revision)
			if errors.Is(err, metastore.ErrConflict) {
				continue // someone else won: read again
			}
			return c.Next, err
		}
	}
	for range 3 {
		n, err := increment("chains/a")
		fmt.Println(n, err)
	}
	kv, _ := st.Get(ctx, "chains/a")
	fmt.Println(string(kv.Value))
	// Output:
	// 1 <nil>
	// 2 <nil>
	// 3 <nil>
	// {
	//   "kind": "counter",
	//   "format": 1,
	//   "next": 3
	// }
}

// A record of a newer major format is refused with a typed error.
func ExampleDecodeRecord() {
	var c counter
	err := metastore.DecodeRecord("chains/a", []byte(`{"kind":"counter","format":2}`), "counter", 1, &c)
	fmt.Println(errors.Is(err, metastore.ErrBadRecord))
	fmt.Println(err)
	// Output:
	// true
	// metastore: bad counter record at "chains/a": format 2 is not supported (this reader knows 1..1)
}
