package etcdstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// TestEtcdListSurvivesCompaction lists 1,500 keys (two pages of the default
// 1,000) while etcd is compacted between the pages, past the revision of
// the first page. The second page fails in etcd; List starts over and
// returns all the keys at one revision, newer than the compaction.
func TestEtcdListSurvivesCompaction(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	admin := cluster.Client(t)
	cli := etcdtest.NewClient(t, cluster.Endpoints()...)
	pages := etcdtest.HookPages(cli)
	st, err := etcd.New(cli, etcd.Options{Root: "/listcompact/"})
	require.NoError(t, err)
	ctx := t.Context()
	const n = 1500
	for i := 0; i < n; {
		var txn metastore.Txn
		for ; i < n && len(txn.Then) < 100; i++ {
			txn.Then = append(txn.Then, metastore.Op{Key: fmt.Sprintf("refs/%05d", i), Value: []byte("v")})
		}
		_, err := st.Txn(ctx, txn)
		require.NoError(t, err)
	}
	var compactedAt int64
	pages.Once(func() {
		compactedAt, err = etcdtest.Compact(ctx, admin)
	})
	kvs, rev, lerr := st.List(ctx, "refs/")
	require.NoError(t, err, "compact")
	require.Equal(t, 1, pages.Fired(), "the compaction ran between two pages")
	require.NoError(t, lerr)
	require.Len(t, kvs, n)
	assert.GreaterOrEqual(t, rev, compactedAt, "the list started over after the compaction")
	for i, kv := range kvs {
		require.Equal(t, fmt.Sprintf("refs/%05d", i), kv.Key)
		require.LessOrEqual(t, kv.Revision, rev)
	}
}

// TestEtcdListGivesUpUnderCompactions: when etcd is compacted after every
// page, List stops after a few attempts with an error that is retryable
// (ErrUnavailable) and says what happened, and is not ErrCompacted; when
// the caller's context ends meanwhile, List returns its error.
func TestEtcdListGivesUpUnderCompactions(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	admin := cluster.Client(t)
	cli := etcdtest.NewClient(t, cluster.Endpoints()...)
	pages := etcdtest.HookPages(cli)
	st, err := etcd.New(cli, etcd.Options{Root: "/listgiveup/", ListPageSize: 2})
	require.NoError(t, err)
	ctx := t.Context()
	for i := range 5 {
		_, err := metastore.Put(ctx, st, fmt.Sprintf("k/%d", i), []byte("v"), 0)
		require.NoError(t, err)
	}

	var compactErr error
	stop := pages.Every(func() {
		if _, err := etcdtest.Compact(ctx, admin); err != nil {
			compactErr = err
		}
	})
	_, _, err = st.List(ctx, "k/")
	stop()
	require.NoError(t, compactErr)
	t.Log(err)
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	assert.NotErrorIs(t, err, metastore.ErrCompacted)
	assert.ErrorContains(t, err, "compacted during each of 5 attempts")
	attempts := pages.Fired()
	assert.Equal(t, 5, attempts, "one first page per attempt, each followed by a compaction")

	lctx, cancel := context.WithCancel(ctx)
	stop = pages.Every(func() {
		if _, err := etcdtest.Compact(ctx, admin); err != nil {
			compactErr = err
		}
		cancel()
	})
	_, _, err = st.List(lctx, "k/")
	stop()
	require.NoError(t, compactErr)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, metastore.ErrUnavailable)
	assert.Equal(t, attempts+1, pages.Fired(), "no attempt after the cancellation")

	kvs, _, err := st.List(ctx, "k/")
	require.NoError(t, err, "without compactions the list succeeds")
	assert.Len(t, kvs, 5)
}
