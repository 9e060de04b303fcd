package authoritystore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A crashed embedded etcd member (Member.Stop) can leave a peer HTTP
// handler blocked on its closed backend until the process exits: etcd's,
// not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"))
}
