package metastoretest

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

func (s *suite) listPrefix(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	var last int64
	for _, k := range []string{"p/b/c", "q", "p/a", "p", "p/b", "o/p/x"} {
		last = put(t, ctx, st, k, "v:"+k, 0)
	}
	kvs, rev, err := st.List(ctx, "p/")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rev, last)
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
		assert.Equal(t, "v:"+kv.Key, string(kv.Value))
		assert.Positive(t, kv.Revision)
		assert.LessOrEqual(t, kv.Revision, rev)
	}
	assert.Equal(t, []string{"p/a", "p/b", "p/b/c"}, keys)

	kvs, _, err = st.List(ctx, "")
	require.NoError(t, err)
	keys = keys[:0]
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	assert.Equal(t, []string{"o/p/x", "p", "p/a", "p/b", "p/b/c", "q"}, keys)

	kvs, rev, err = st.List(ctx, "none/")
	require.NoError(t, err)
	assert.Empty(t, kvs)
	assert.GreaterOrEqual(t, rev, last)
}

// listAcrossPages writes more than two pages of keys under lc/ and, between
// the first and the second page of a List, changes them in one txn (a
// value, a delete, a new key) and, with compact, discards the store's
// history up to then. The List must succeed (never ErrCompacted) with one
// snapshot that matches its revision: every key and value from before the
// txn when the revision is below the txn's, every one from after it
// otherwise, never a mix.
func (s *suite) listAcrossPages(t *testing.T, compact bool) {
	if s.c.betweenPages == nil {
		t.Skip("no WithBetweenListPages hook")
	}
	if compact && s.c.compact == nil {
		t.Skip("no WithCompact hook")
	}
	ctx := s.ctx(t)
	st := s.newStore(t)
	n := 2*s.c.pageSize + 2
	key := func(i int) string { return fmt.Sprintf("lc/%04d", i) }
	before := map[string]string{}
	var r0 int64
	for i := range n {
		rev := put(t, ctx, st, key(i), fmt.Sprintf("v%d", i), 0)
		if i == 0 {
			r0 = rev
		}
		before[key(i)] = fmt.Sprintf("v%d", i)
	}
	put(t, ctx, st, "lc-outside", "x", 0)
	after := maps.Clone(before)
	after[key(0)] = "new"
	delete(after, key(1))
	after["lc/9999"] = "new"

	var (
		fired   int
		changed int64
		ferr    error
	)
	s.c.betweenPages(t, st, func() {
		fired++
		changed, ferr = st.Txn(ctx, metastore.Txn{
			If: []metastore.Compare{{Key: key(0), Revision: r0}},
			Then: []metastore.Op{
				{Key: key(0), Value: []byte("new")},
				{Key: key(1), Delete: true},
				{Key: "lc/9999", Value: []byte("new")},
			},
		})
		if ferr == nil && compact {
			s.c.compact(t, st)
		}
	})
	kvs, rev, err := st.List(ctx, "lc/")
	require.NoError(t, ferr, "the txn between the pages")
	require.Equal(t, 1, fired, "the hook runs once, inside the List")
	require.NoError(t, err, "a List across a change (compact=%v) must succeed", compact)
	want := before
	if rev >= changed {
		want = after
	}
	got := map[string]string{}
	var keys []string
	for _, kv := range kvs {
		got[kv.Key] = string(kv.Value)
		keys = append(keys, kv.Key)
		assert.LessOrEqual(t, kv.Revision, rev, "%s was written after the revision of the List", kv.Key)
	}
	assert.True(t, slices.IsSorted(keys), "keys in order: %v", keys)
	assert.Equal(t, want, got, "one snapshot at revision %d (the txn is at %d)", rev, changed)

	// The store's state now is the changed one, whatever the List saw.
	kvs, rev, err = st.List(ctx, "lc/")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rev, changed)
	assert.Len(t, kvs, len(after))
}
