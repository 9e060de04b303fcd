// Package etcd is the production metastore.Store, on an etcd v3 cluster
// through the host's *clientv3.Client (go.etcd.io/etcd/client/v3). The host
// builds the client (endpoints, TLS, authentication) and closes it after its
// last use of the store; the store never reads global configuration.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig})
//	...
//	st, err := etcd.New(cli, etcd.Options{Root: "/cutline/", Logger: logger})
//
// # Mapping
//
// Keys live under Options.Root (default "/cutline/"), which is stripped from
// every key the store returns, so several deployments can share a cluster
// and etcdctl get --prefix /cutline/ shows one deployment's records.
// KV.Revision is etcd's ModRevision, KV.CreateRevision its CreateRevision,
// KV.Session the lease ID. A Txn is one etcd transaction: a compare with
// revision r > 0 is ModRevision(key) == r, with 0 it is CreateRevision(key)
// == 0; bound puts carry the session's lease. When a compare fails, the same
// round trip reads the compared keys, so that the *metastore.ConflictError
// reports the current revision without a second request. Binding to a lease
// that etcd no longer has returns metastore.ErrSessionExpired. Get and List
// are linearizable reads; List pages through large prefixes at the revision
// of its first page. Values are stored as the caller's bytes.
//
// Sessions are etcd leases (TTL rounded up to whole seconds, and raised by
// etcd to its minimum if needed) kept alive by the client; Done is closed
// when the keep-alive stream ends: the lease expired or was revoked, the
// client was closed, or no keep-alive got through for a whole TTL. Watches
// require a leader, so a member cut off from the quorum ends the watch with
// metastore.ErrUnavailable instead of going silent; a compacted start
// revision yields metastore.ErrCompacted.
//
// # Errors
//
// Every call is bounded by Options.RequestTimeout (default 5 s) on the
// store's clock. When it runs out, or the cluster has no leader, the leader
// changed, the request timed out in etcd, the connection broke, or the
// client was closed, the call returns an error matching
// metastore.ErrUnavailable: its outcome is unknown (see package metastore).
// When the caller's context ends first, its error is returned. Refusals that
// retrying cannot fix (permission denied, too many ops in one txn) are
// returned as etcd's errors, wrapped with the operation and key.
package etcd
