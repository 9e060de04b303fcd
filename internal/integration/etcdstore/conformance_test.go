package etcdstore_test

import (
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/metastore/metastoretest"
)

// TestEtcdConformance runs the metastore conformance suite on a real,
// embedded etcd server. Every subtest gets its own root prefix and its own
// client, connected through a proxy that the unavailability subtest cuts.
func TestEtcdConformance(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	admin := cluster.Client(t)
	var (
		mu      sync.Mutex
		proxies = map[metastore.Store]*etcdtest.Proxy{}
	)
	newStore := func(t *testing.T) metastore.Store {
		proxy := etcdtest.NewProxy(t, cluster.Endpoints()[0])
		cli := etcdtest.NewClient(t, proxy.URL)
		st, err := etcd.New(cli, etcd.Options{Root: "/conformance/" + t.Name() + "/", RequestTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		proxies[st] = proxy
		mu.Unlock()
		return st
	}
	metastoretest.Run(t, newStore,
		// Expiry as etcd does it: the lease disappears on the server; the
		// store's keep-alive learns it and ends the session.
		metastoretest.WithExpire(func(t *testing.T, _ metastore.Store, sess metastore.Session) {
			if _, err := admin.Revoke(t.Context(), clientv3.LeaseID(sess.ID())); err != nil {
				t.Fatalf("revoke lease %x: %v", sess.ID(), err)
			}
		}),
		metastoretest.WithDisconnect(func(t *testing.T, st metastore.Store) {
			mu.Lock()
			p := proxies[st]
			mu.Unlock()
			p.Cut()
		}),
	)
}
