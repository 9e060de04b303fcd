package lease_test

import (
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
