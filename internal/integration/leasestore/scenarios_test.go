package leasestore_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/lease/leasetest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// TestEtcdScenarios runs the lease scenarios on embedded etcd. Each
// scenario has its own root prefix on one server; a session's expiry is
// etcd's: the lease is revoked on the server and the holder's keep-alive
// learns it.
func TestEtcdScenarios(t *testing.T) {
	cli := etcdtest.Start(t)
	leasetest.Run(t, leasetest.Backend{
		NewStore: func(t *testing.T) (metastore.Store, string) {
			st, err := etcd.New(cli, etcd.Options{Root: "/lease/" + t.Name() + "/", RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return st, ""
		},
		Expire: func(t *testing.T, _ metastore.Store, sess metastore.Session) {
			if _, err := cli.Revoke(t.Context(), clientv3.LeaseID(sess.ID())); err != nil {
				t.Fatalf("revoke lease %x: %v", sess.ID(), err)
			}
		},
		TTL: 5 * time.Second,
	})
}
