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

// TestEtcdSessionStallEndsBeforeKeyDeletion: when the network goes silent
// (no error, no byte), the holder's Done closes no later than a watcher on
// a healthy connection sees the session's key deleted by etcd, whether the
// stall comes right after NewSession (before any keep-alive was answered:
// the etcd client alone would wait out its dial timeout, 5 s, there) or
// after keep-alives went through.
func TestEtcdSessionStallEndsBeforeKeyDeletion(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keepAlives bool // wait for an answered keep-alive before stalling
	}{
		{"right after NewSession", false},
		{"after keep-alives", true},
	} {
		t.Run(tc.name, func(t *testing.T) { testSessionStall(t, tc.keepAlives) })
	}
}

func testSessionStall(t *testing.T, keepAlives bool) {
	cluster := etcdtest.StartCluster(t, 1)
	admin, err := etcd.New(cluster.Client(t), etcd.Options{Root: "/stall/"})
	require.NoError(t, err)
	proxy := etcdtest.NewProxy(t, cluster.Endpoints()[0])
	st, err := etcd.New(etcdtest.NewClient(t, proxy.URL), etcd.Options{Root: "/stall/"})
	require.NoError(t, err)
	ctx := t.Context()

	sess, err := st.NewSession(ctx, 2*time.Second)
	require.NoError(t, err)
	defer sess.Close(ctx)
	if keepAlives {
		// A keep-alive goes out every TTL/3; half a TTL lets one through.
		select {
		case <-sess.Done():
			t.Fatal("session ended on a healthy connection")
		case <-time.After(sess.TTL() / 2):
		}
	}
	stalled := time.Now()
	proxy.Stall()
	// Bind the key through the healthy client, so that the stall is the
	// first thing the session's own connection sees after the grant.
	rev, err := metastore.PutBound(ctx, admin, sess, "writer", []byte("alive"), 0)
	require.NoError(t, err)

	guard := 4*sess.TTL() + 10*time.Second
	wctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	deleted := make(chan time.Time, 1)
	watchErr := make(chan error, 1)
	go func() {
		for ev, err := range admin.Watch(wctx, "writer", rev+1) {
			if err != nil {
				watchErr <- err
				return
			}
			if ev.Type == metastore.EventDelete {
				deleted <- time.Now()
				return
			}
		}
	}()

	timeout := time.After(guard)
	var doneAt, deletedAt time.Time
	select {
	case <-sess.Done():
		doneAt = time.Now()
	case err := <-watchErr:
		t.Fatalf("watch: %v", err)
	case <-timeout:
		t.Fatalf("session still alive %v after the stall", guard)
	}
	select {
	case deletedAt = <-deleted: // stamped by the watcher, even if before Done
	case err := <-watchErr:
		t.Fatalf("watch: %v", err)
	case <-timeout:
		t.Fatalf("key not deleted %v after the stall", guard)
	}
	t.Logf("TTL %v: Done after %v, key deleted after %v (since the stall)",
		sess.TTL(), doneAt.Sub(stalled), deletedAt.Sub(stalled))
	const tolerance = 100 * time.Millisecond
	require.False(t, doneAt.After(deletedAt.Add(tolerance)),
		"Done closed %v after the watcher saw the key deleted", doneAt.Sub(deletedAt))
	// The deadline runs from the last answered keep-alive (or the grant),
	// which was before the stall.
	require.Less(t, doneAt.Sub(stalled), sess.TTL()+time.Second)
}

// TestEtcdSessionHealthyOutlivesTTLs: on a healthy connection the session's
// own deadline never ends it: it stays alive across several TTLs, and its
// key stays.
func TestEtcdSessionHealthyOutlivesTTLs(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	proxy := etcdtest.NewProxy(t, cluster.Endpoints()[0])
	st, err := etcd.New(etcdtest.NewClient(t, proxy.URL), etcd.Options{Root: "/healthy/"})
	require.NoError(t, err)
	ctx := t.Context()

	sess, err := st.NewSession(ctx, 2*time.Second)
	require.NoError(t, err)
	_, err = metastore.PutBound(ctx, st, sess, "writer", []byte("alive"), 0)
	require.NoError(t, err)
	select {
	case <-sess.Done():
		t.Fatal("healthy session ended")
	case <-time.After(4 * sess.TTL()):
	}
	kv, err := st.Get(ctx, "writer")
	require.NoError(t, err)
	require.Equal(t, sess.ID(), kv.Session)
	require.NoError(t, sess.Close(ctx))
	select {
	case <-sess.Done():
	default:
		t.Fatal("Done open after Close")
	}
	_, err = st.Get(ctx, "writer")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}
