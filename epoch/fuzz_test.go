package epoch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// FuzzRecordDecode stores arbitrary bytes where an epoch record and a
// star's counter live: reading them never panics, a bad one is
// ErrBadRecord, and a record accepted keeps the rules of a record.
func FuzzRecordDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"epoch","format":1,"star":"s1","epoch":1,"constants":{"class":"standard","buckets":["a","b","c"],"w":2,"window":8},"state":"open","cut":0,"cursors":{"checkpoint":0,"trimmed":0,"rewritten":0}}`),
		[]byte(`{"kind":"chain","format":1,"star":"s1","next":2,"heads":{"standard":1}}`))
	f.Add([]byte(`{"kind":"epoch","format":1,"star":"s1","epoch":1,"constants":{"class":"standard","buckets":["a"],"w":1,"window":70000},"state":"fenced","cut":3,"cursors":{"checkpoint":4}}`),
		[]byte(`{"kind":"chain","format":1,"star":"s1","next":1,"heads":{"standard":5}}`))
	f.Add([]byte(`{"kind":"epoch","format":9}`), []byte(`{"kind":"chain","format":9}`))
	f.Add([]byte("not json"), []byte{})
	f.Fuzz(func(t *testing.T, rec, counter []byte) {
		ctx := context.Background()
		store := memstore.New(memstore.Options{})
		m, err := epoch.NewMinter(store, epoch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := metastore.Put(ctx, store, m.RecordKey("s1", 1), rec, 0); err != nil {
			return // the store refuses the value itself
		}
		if _, err := metastore.Put(ctx, store, m.ChainKey("s1"), counter, 0); err != nil {
			return // the store refuses the value itself
		}
		r, err := m.Get(ctx, "s1", 1)
		switch {
		case err != nil && !errors.Is(err, metastore.ErrBadRecord):
			t.Fatalf("a bad record is not ErrBadRecord: %v", err)
		case err == nil:
			if r.Star != "s1" || r.Epoch != 1 || r.Constants.Validate() != nil ||
				r.Cursors.Trimmed > r.Cursors.Checkpoint || (r.Fenced() && r.Cursors.Checkpoint > r.Cut) {
				t.Fatalf("accepted a record that breaks the rules: %+v", r)
			}
			if _, err := r.Claim(); !errors.Is(err, epoch.ErrNotMinted) {
				t.Fatalf("a decoded record carries a claim: %v", err)
			}
		}
		ch, err := m.Chain(ctx, "s1")
		switch {
		case err != nil && !errors.Is(err, metastore.ErrBadRecord):
			t.Fatalf("a bad counter is not ErrBadRecord: %v", err)
		case err == nil:
			for class, head := range ch.Heads {
				if head >= ch.Next {
					t.Fatalf("accepted head %d of %q at or past next %d", head, class, ch.Next)
				}
			}
		}
		// Minting over whatever is stored never panics and never reuses
		// a number a record holds.
		if nr, err := m.Mint(ctx, "s1", epoch.Constants{Class: "standard", Buckets: []string{"a"}, W: 1, Window: 1}); err == nil && nr.Epoch == 1 {
			t.Fatalf("minted epoch 1 over a stored record")
		}
	})
}
