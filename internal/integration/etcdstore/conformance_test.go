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
// Lists read pages of conformancePage keys, so that most Lists of the
// suite span pages, and a PageHook in the client's KV lets the suite
// change keys and compact etcd between two pages.
func TestEtcdConformance(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	admin := cluster.Client(t)
	type harness struct {
		proxy *etcdtest.Proxy
		pages *etcdtest.PageHook
	}
	var (
		mu        sync.Mutex
		harnesses = map[metastore.Store]harness{}
	)
	of := func(st metastore.Store) harness {
		mu.Lock()
		defer mu.Unlock()
		return harnesses[st]
	}
	newStore := func(t *testing.T) metastore.Store {
		proxy := etcdtest.NewProxy(t, cluster.Endpoints()[0])
		cli := etcdtest.NewClient(t, proxy.URL)
		pages := etcdtest.HookPages(cli)
		st, err := etcd.New(cli, etcd.Options{
			Root:           "/conformance/" + t.Name() + "/",
			RequestTimeout: 2 * time.Second,
			ListPageSize:   conformancePage,
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		harnesses[st] = harness{proxy: proxy, pages: pages}
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
			of(st).proxy.Cut()
		}),
		metastoretest.WithCompact(func(t *testing.T, _ metastore.Store) {
			if _, err := etcdtest.Compact(t.Context(), admin); err != nil {
				t.Fatal(err)
			}
		}),
		metastoretest.WithBetweenListPages(conformancePage, func(t *testing.T, st metastore.Store, f func()) {
			of(st).pages.Once(f)
		}),
	)
}

// conformancePage is the list page size of the conformance run.
const conformancePage = 3
