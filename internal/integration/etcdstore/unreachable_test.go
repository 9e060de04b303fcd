package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// TestEtcdUnreachableEndpoints: a call that cannot reach etcd says why,
// in words an operator can act on, instead of "etcd: context canceled":
//
//	endpoint                        error
//	nothing listening               ErrUnavailable, "connection refused"
//	accepts, never answers          ErrUnavailable, "no connection … (CONNECTING)"
//	etcd, then cut off              ErrUnavailable, "connection refused"
//	a gRPC server that is not etcd  ErrNotEtcd (final, not ErrUnavailable), "Unimplemented"
func TestEtcdUnreachableEndpoints(t *testing.T) {
	const timeout = 500 * time.Millisecond
	storeAt := func(t *testing.T, url string) metastore.Store {
		st, err := etcd.New(etcdtest.NewClient(t, url), etcd.Options{Root: "/unreachable/", RequestTimeout: timeout})
		require.NoError(t, err)
		return st
	}
	get := func(t *testing.T, st metastore.Store) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := st.Get(ctx, "k")
		require.Error(t, err)
		t.Log(err)
		assert.NotContains(t, err.Error(), "context canceled")
		assert.NotErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, metastore.ErrNotFound)
		return err
	}

	t.Run("ConnectionRefused", func(t *testing.T) {
		err := get(t, storeAt(t, etcdtest.ClosedURL(t)))
		require.ErrorIs(t, err, metastore.ErrUnavailable)
		assert.ErrorContains(t, err, "request timeout after 500ms")
		assert.ErrorContains(t, err, "connection refused")
	})
	t.Run("NeverAnswers", func(t *testing.T) {
		err := get(t, storeAt(t, etcdtest.SilentURL(t)))
		require.ErrorIs(t, err, metastore.ErrUnavailable)
		assert.ErrorContains(t, err, "request timeout after 500ms")
		assert.ErrorContains(t, err, "no connection to")
		assert.ErrorContains(t, err, "CONNECTING")
	})
	t.Run("CutOff", func(t *testing.T) {
		cluster := etcdtest.StartCluster(t, 1)
		proxy := etcdtest.NewProxy(t, cluster.Endpoints()[0])
		st := storeAt(t, proxy.URL)
		_, err := metastore.Put(t.Context(), st, "k", []byte("v"), 0)
		require.NoError(t, err)
		proxy.Cut()
		err = get(t, st)
		require.ErrorIs(t, err, metastore.ErrUnavailable)
		assert.ErrorContains(t, err, "connection refused")
	})
	t.Run("NotEtcd", func(t *testing.T) {
		err := get(t, storeAt(t, etcdtest.NotEtcdURL(t)))
		require.ErrorIs(t, err, etcd.ErrNotEtcd)
		assert.NotErrorIs(t, err, metastore.ErrUnavailable)
		assert.ErrorContains(t, err, "Unimplemented")
	})
}
