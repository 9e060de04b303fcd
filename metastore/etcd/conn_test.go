package etcd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/cutline/cutline/metastore"
)

// closedAddr returns a loopback address on which nothing listens: a dial
// is refused at once.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func storeOn(t *testing.T, endpoint string, timeout time.Duration) *Store {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	st, err := New(cli, Options{Root: "/conn/", RequestTimeout: timeout})
	require.NoError(t, err)
	return st
}

// calls are the store's calls that reach the server, each returning its
// error.
var calls = map[string]func(ctx context.Context, st *Store) error{
	"get": func(ctx context.Context, st *Store) error { _, err := st.Get(ctx, "k"); return err },
	"list": func(ctx context.Context, st *Store) error {
		_, _, err := st.List(ctx, "p/")
		return err
	},
	"txn": func(ctx context.Context, st *Store) error {
		_, err := metastore.Put(ctx, st, "k", []byte("v"), 0)
		return err
	},
	"new session": func(ctx context.Context, st *Store) error {
		sess, err := st.NewSession(ctx, time.Minute)
		if err == nil {
			_ = sess.Close(ctx)
		}
		return err
	},
	"watch from now": func(ctx context.Context, st *Store) error { return watchErr(ctx, st, 0) },
	"watch from 1":   func(ctx context.Context, st *Store) error { return watchErr(ctx, st, 1) },
}

func watchErr(ctx context.Context, st *Store, from int64) error {
	for _, err := range st.Watch(ctx, "p/", from) {
		if err != nil {
			return err
		}
	}
	return errors.New("the watch ended without an error")
}

// TestRefusedConnectionIsNamed: with nothing listening at the endpoint, a
// call that runs out of the store's timeout says that the connection was
// refused, not merely that a context was canceled; it is still
// ErrUnavailable. The caller's own deadline is named the same way.
func TestRefusedConnectionIsNamed(t *testing.T) {
	addr := closedAddr(t)
	st := storeOn(t, addr, 300*time.Millisecond)
	for name, call := range calls {
		if name == "watch from 1" {
			continue // a watch is not bounded by the store's timeout
		}
		err := call(t.Context(), st)
		t.Logf("%s: %v", name, err)
		require.ErrorIs(t, err, metastore.ErrUnavailable, name)
		assert.ErrorContains(t, err, "request timeout after 300ms", name)
		assert.ErrorContains(t, err, "connection refused", name)
		assert.ErrorContains(t, err, addr, name)
		assert.NotContains(t, err.Error(), "context canceled", name)
		assert.NotErrorIs(t, err, context.Canceled, name)
	}

	// The caller's deadline comes first: its error, with the reason.
	st = storeOn(t, addr, time.Minute)
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		err := call(ctx, st)
		cancel()
		t.Logf("%s: %v", name, err)
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
		assert.NotErrorIs(t, err, metastore.ErrUnavailable, name)
		assert.ErrorContains(t, err, "connection refused", name)
	}
}

// TestNotEtcdServer: a gRPC server without etcd's services answers every
// call with Unimplemented; the store reports ErrNotEtcd at once, which is
// final (not ErrUnavailable), for every call.
func TestNotEtcdServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	st := storeOn(t, "http://"+l.Addr().String(), 10*time.Second)
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := call(ctx, st)
		cancel()
		t.Logf("%s: %v", name, err)
		require.ErrorIs(t, err, ErrNotEtcd, name)
		assert.NotErrorIs(t, err, metastore.ErrUnavailable, name)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, name)
		assert.ErrorContains(t, err, "Unimplemented", name)
	}
}
