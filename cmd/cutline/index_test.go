package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// index-migrate converts an index of the previous release (a key per
// span) into pages after a confirmation, and index-find reads it.
func TestIndexMigrate(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	for i := range 70 {
		v := fmt.Sprintf(`{"kind":"ref","format":1,"stream":"orders","offset":%d,"count":1,"star":"star-a","epoch":1,"slot":%d,"start":0,"end":1}`, i, i)
		_, err := metastore.Put(ctx, f.env.Store, fmt.Sprintf("refs/orders/%020d", i), []byte(v), 0)
		require.NoError(t, err)
	}
	_, err := metastore.Put(ctx, f.env.Store, "refheads/orders", []byte(`{"kind":"refhead","format":1,"stream":"orders","next":70}`), 0)
	require.NoError(t, err)

	r := f.run("", "index-find", "orders", "3")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "cutline index-migrate")

	before := f.snapshot()
	r = f.run("n\n", "index-migrate")
	require.Equal(t, 3, r.code, "not confirmed: %s", r.stderr)
	require.Equal(t, before, f.snapshot(), "nothing written without a confirmation")

	r = f.run("", "-json", "index-migrate", "-yes")
	require.Equal(t, 0, r.code, r.stderr)
	var v MigrateView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.Equal(t, []settle.MigrateReport{{Stream: "orders", Refs: 70, Pages: 2}}, v.Streams)

	r = f.run("", "index-find", "orders", "65")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.out, "star-a/1 slot 65")
	r = f.run("", "-json", "index-find", "orders", "3")
	require.Equal(t, 0, r.code, r.stderr)
	var fv FindView
	require.NoError(t, json.Unmarshal([]byte(r.out), &fv))
	require.Equal(t, chain.Position{Epoch: 1, Slot: 3}, fv.Ref.Position())
	require.Equal(t, uint64(70), fv.Next)

	r = f.run("", "index-migrate", "-yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.out, "nothing to migrate")

	r = f.run("", "index-find", "orders", "70")
	require.Equal(t, 1, r.code, "past the coverage")
	require.Contains(t, r.stderr, "covered up to 70")
	r = f.run("", "index-find", "orders", "x")
	require.Equal(t, 2, r.code, "a usage error")
}
