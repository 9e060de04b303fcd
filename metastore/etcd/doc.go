// Package etcd is the production metastore.Store, on an etcd v3 cluster
// through the host's *clientv3.Client (go.etcd.io/etcd/client/v3). The host
// builds the client (endpoints, TLS, authentication) and closes it after its
// last use of the store; the store never reads global configuration.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig})
//	...
//	st, err := etcd.New(cli, etcd.Options{Root: "/cutline/", Logger: logger})
//
// Dial builds the client most hosts need from a DialConfig: endpoints,
// TLS from PEM files (a CA of its own, a client certificate and key) and
// an etcd user and password:
//
//	cli, err := etcd.Dial(ctx, etcd.DialConfig{Endpoints: endpoints,
//		CAFile: "ca.pem", CertFile: "client.pem", KeyFile: "client-key.pem",
//		Username: "cutline", Password: password})
//
// It refuses pairs given half (CertFile without KeyFile, Username without
// Password), an http:// endpoint with TLS (the client would talk plain
// text to it) and files that hold no certificate with a *cutline.ConfigError
// naming the field; with a user it authenticates before it returns, so a
// wrong password is its error (rpctypes.ErrAuthFailed), and a connection
// that does not come up within DialTimeout matches
// metastore.ErrUnavailable. The client logs nothing, and no error holds
// the password. ClientConfig returns the clientv3.Config it dials with.
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
// are linearizable reads. Values are stored as the caller's bytes.
//
// List reads a prefix in pages of Options.ListPageSize keys (default
// 1,000), all at the revision of the first page, so that its result is one
// snapshot at the revision it returns. etcd compacts its history (on a
// schedule, with --auto-compaction-retention, or by an operator); a
// compaction that passes the first page's revision before the last page
// makes that page fail. List then drops what it read and starts over at
// the current revision, at most 5 times in all, logging each restart at
// info level; it never returns metastore.ErrCompacted. When every attempt
// is overtaken it returns an error matching metastore.ErrUnavailable.
//
// Sessions are etcd leases (TTL rounded up to whole seconds, and raised by
// etcd to its minimum if needed) that the store keeps alive itself, with a
// keep-alive every TTL/3. Each session has its own deadline on the store's
// clock: when no keep-alive has been answered for TTL − TTL/10, counted
// from the sending of the last answered one (or of the grant), Done is
// closed for good. etcd renews a lease only when a keep-alive reaches it,
// after it was sent, so the holder learns of the loss before etcd expires
// the lease and watchers see its keys deleted, even when the network goes
// silent rather than failing (the client's own keep-alive stream would
// wait out its dial timeout first). Done is also closed when etcd reports
// the lease gone and on Close. Watches
// require a leader, so a member cut off from the quorum ends the watch with
// metastore.ErrUnavailable instead of going silent; a compacted start
// revision yields metastore.ErrCompacted.
//
// # Configuration
//
// New checks the options and the endpoints the client has: each must be
// http://host:port, https://host:port, unix://path, unixs://path or a bare
// host:port, without credentials in it (the client takes those from
// clientv3.Config.Username and Password). A refused setting is a
// *cutline.ConfigError matching cutline.ErrInvalid that names the field (such as
// "ListPageSize" or "clientv3.Config.Endpoints[1]"); an endpoint is
// shown with any user information cut out. A client made by
// clientv3.NewCtxClient (in-process, without endpoints) is accepted.
//
// # Errors
//
// Every call is bounded by Options.RequestTimeout (default 5 s) on the
// store's clock. When it runs out, or the cluster has no leader, the leader
// changed, the request timed out in etcd, the connection broke, or the
// client was closed, the call returns an error matching
// metastore.ErrUnavailable: its outcome is unknown (see package metastore).
// When the caller's context ends first, its error is returned. A call that
// ran out of time because the client had no connection says why, with the
// connection's state and gRPC's last connection error:
//
//	metastore get "k": metastore: unavailable: etcd: request timeout after 5s:
//	no connection to 10.0.0.7:2379 (TRANSIENT_FAILURE): connection error: desc =
//	"transport: Error while dialing: dial tcp 10.0.0.7:2379: connect: connection refused"
//
// A server at an endpoint that answers gRPC but does not serve etcd's API
// (status Unimplemented: the endpoint names some other service) makes the
// call fail with ErrNotEtcd, which is final: it does not match
// metastore.ErrUnavailable, since retrying cannot help, and nothing was
// applied. Other refusals that retrying cannot fix (permission denied, too
// many ops in one txn) are returned as etcd's errors, wrapped with the
// operation and key.
package etcd
