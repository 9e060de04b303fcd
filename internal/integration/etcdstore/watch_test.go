package etcdstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// TestEtcdWatchStopsCleanly stops watches early (break out of the range
// loop) while the client stays open: no goroutine may outlive them.
func TestEtcdWatchStopsCleanly(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	cli := cluster.Client(t)
	st, err := etcd.New(cli, etcd.Options{Root: "/watchstop/"})
	require.NoError(t, err)
	ctx := t.Context()
	rev, err := metastore.Put(ctx, st, "w/a", []byte("1"), 0)
	require.NoError(t, err)
	_, err = metastore.Put(ctx, st, "w/b", []byte("1"), 0)
	require.NoError(t, err)

	firstEvent := func() {
		for ev, err := range st.Watch(ctx, "w/", rev) {
			require.NoError(t, err)
			require.Equal(t, "w/a", ev.KV.Key)
			break
		}
	}
	firstEvent() // the client's connection and its goroutines exist from here on
	before := goleak.IgnoreCurrent()
	for range 20 {
		firstEvent()
	}
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, err := range st.Watch(wctx, "w/", rev) {
		require.ErrorIs(t, err, context.Canceled)
	}
	require.NoError(t, goleak.Find(before))
}
