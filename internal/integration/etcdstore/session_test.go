package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// TestEtcdSessionEndsWhenCutOff: a host that loses its connection learns
// that its session is gone (Done) once no keep-alive got through for a TTL,
// and the server deletes the bound keys when the lease runs out.
func TestEtcdSessionEndsWhenCutOff(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	admin, err := etcd.New(cluster.Client(t), etcd.Options{Root: "/cutoff/"})
	require.NoError(t, err)
	proxy := etcdtest.NewProxy(t, cluster.Endpoints()[0])
	st, err := etcd.New(etcdtest.NewClient(t, proxy.URL), etcd.Options{Root: "/cutoff/"})
	require.NoError(t, err)
	ctx := t.Context()

	sess, err := st.NewSession(ctx, time.Second) // etcd raises it to its minimum
	require.NoError(t, err)
	defer sess.Close(ctx)
	_, err = metastore.PutBound(ctx, st, sess, "stars/a", []byte("alive"), 0)
	require.NoError(t, err)
	rev, err := metastore.Put(ctx, admin, "marker", []byte("x"), 0)
	require.NoError(t, err)

	proxy.Cut()
	guard := 4*sess.TTL() + 10*time.Second
	select {
	case <-sess.Done():
	case <-time.After(guard):
		t.Fatalf("session still alive %v after the cut", guard)
	}
	// The server side: the bound key is deleted when the lease expires,
	// seen by a watch through the uncut client.
	wctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	for ev, err := range admin.Watch(wctx, "stars/", rev) {
		require.NoError(t, err)
		require.Equal(t, metastore.EventDelete, ev.Type)
		require.Equal(t, "stars/a", ev.KV.Key)
		break
	}
	_, err = admin.Get(ctx, "stars/a")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}
