package settle_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cutline/cutline/metastore"
	memstore "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/settle"
)

// FuzzRefDecode stores arbitrary bytes where a ref lives: reading it back
// through the index never panics, and anything it accepts is exactly the
// ref its key names.
func FuzzRefDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":1,"star":"star-a","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"other","offset":7,"count":1,"star":"star-a","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":0,"star":"star-a","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":1,"star":"../x","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":2}`))
	f.Add([]byte(`{"kind":"epoch","format":1}`))
	f.Add([]byte("not json"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, value []byte) {
		ctx := context.Background()
		store := memstore.New(memstore.Options{})
		x, err := settle.NewRefIndex(store, "", locate)
		if err != nil {
			t.Fatal(err)
		}
		key := "refs/s/00000000000000000007"
		if _, err := metastore.Put(ctx, store, key, value, 0); err != nil {
			return // the store refuses the value itself
		}
		r, err := x.Lookup(ctx, "s", 7)
		if err != nil {
			if !errors.Is(err, metastore.ErrBadRecord) {
				t.Fatalf("a bad ref is not ErrBadRecord: %v", err)
			}
			return
		}
		if r.Stream != "s" || r.Offset != 7 || r.Count == 0 || r.Epoch == 0 || r.Star == "" {
			t.Fatalf("accepted a ref that is not the one its key names: %+v", r)
		}
		for got, err := range x.Refs(ctx, "s") {
			if err != nil || got != r {
				t.Fatalf("Refs disagrees with Lookup: %+v, %v", got, err)
			}
		}
	})
}
