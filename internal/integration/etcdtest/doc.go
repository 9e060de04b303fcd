// Package etcdtest runs real etcd servers (internal/etcdlocal, on
// go.etcd.io/etcd/server/v3/embed) inside a test process: Start for one
// member and a client, StartCluster for a static n-member cluster whose
// members can be crashed (Member.Stop) and restarted on the same ports and
// data (Member.Restart), Cluster.Leader to find the current leader, Proxy to
// cut one client off a running server, PageHook and Compact to compact
// etcd's history in the middle of a paged read, and ClosedURL, SilentURL and
// NotEtcdURL for endpoints that refuse connections, accept them and never
// answer, or answer gRPC without being etcd. Servers bind 127.0.0.1 on free
// ports, keep their data in the test's temporary directory, log only
// warnings (printed if the test fails), and are stopped when the test ends.
//
// When a server cannot be started, the test fails if CI=true and is skipped
// otherwise.
package etcdtest
