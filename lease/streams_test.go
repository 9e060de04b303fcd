package lease_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// Streams names every stream with a record under the root once, in name
// order, after the given name; keys of other roots and keys that are no
// stream's record are not streams.
func TestStreams(t *testing.T) {
	store := memstore.New(memstore.Options{})
	var ops []metastore.Op
	for _, key := range []string{
		"r/streams/b/writer", "r/streams/b/lease", "r/streams/a.1/snapshot", "r/streams/a/writer",
		"r/streams/c/", "r/streams/d", "other/streams/e/writer", "r/stars/f",
	} {
		ops = append(ops, metastore.Op{Key: key, Value: []byte("x")})
	}
	_, err := store.Txn(t.Context(), metastore.Txn{Then: ops})
	require.NoError(t, err)
	got, err := lease.Streams(t.Context(), store, "r/", "")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "a.1", "b"}, got)
	got, err = lease.Streams(t.Context(), store, "r/", "a.1")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, got)
	_, err = lease.Streams(t.Context(), store, "r", "")
	require.ErrorIs(t, err, cutline.ErrInvalid)
}

// BenchmarkStreams: listing 1,000 streams, each with a writer record and
// a 64 KiB snapshot, in memory: Streams reads the keys alone; a List of
// the same prefix (what it did before metastore.ListKeys) copies every
// snapshot. Compare their B/op.
//
//	go test -run '^$' -bench Streams -benchmem ./lease/
func BenchmarkStreams(b *testing.B) {
	store := memstore.New(memstore.Options{})
	snapshot := make([]byte, 64<<10)
	for i := range 1000 {
		id := fmt.Sprintf("s%04d", i)
		_, err := store.Txn(b.Context(), metastore.Txn{Then: []metastore.Op{
			{Key: "streams/" + id + "/writer", Value: []byte("w")}, {Key: "streams/" + id + "/snapshot", Value: snapshot}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Streams", func(b *testing.B) {
		for b.Loop() {
			if ids, err := lease.Streams(b.Context(), store, "", ""); err != nil || len(ids) != 1000 {
				b.Fatal(len(ids), err)
			}
		}
	})
	b.Run("List", func(b *testing.B) {
		for b.Loop() {
			if kvs, _, err := store.List(b.Context(), "streams/"); err != nil || len(kvs) != 2000 {
				b.Fatal(len(kvs), err)
			}
		}
	})
}
