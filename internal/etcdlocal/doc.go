// Package etcdlocal starts an etcd server embedded in the process
// (go.etcd.io/etcd/server/v3/embed) on this machine's loopback: the
// metastore of a host that runs alone (a broker given no etcd), of a
// benchmark, or of a test. It is its own module, so that the library's
// users never download etcd's server.
//
// Start takes a Config: the data directory (durable, so that a server
// started again on it goes on where it stopped, unless NoFsync), the
// client address, and, for a member of a cluster, its peer address and
// the initial cluster. A single member without a peer address listens
// for no peer. Optional settings bound the database (QuotaBytes, past
// which etcd refuses writes with its NOSPACE alarm), keep its history
// short (CompactionRetention), shrink its file at start-up
// (DefragThresholdMB) and take snapshots (SnapshotCount). LockFile makes
// a second server on the same directory fail at once (ErrInUse) rather
// than wait for etcd's own lock, silently.
//
// ClientTLS serves the clients over TLS only (the endpoint is then
// https://): the server's certificate and key, and, to refuse a client
// without a certificate of a CA, that CA's file. With ClientCertAuth,
// etcd's authentication takes the common name of a client's certificate
// as the user of a request that gives no password. A Config that cannot
// be served is refused with a *cutline.ConfigError naming the field.
// For tests, etcdtlstest starts one over TLS with client certificates and
// a user with a password.
//
// etcd logs with zap: Config.Log receives its warnings and errors as
// slog records (at debug level while the server stops, when its
// listeners' errors say only that they were closed), or Config.Zap takes
// its log whole. Without either, it logs nothing.
//
//	srv, err := etcdlocal.Start(ctx, etcdlocal.Config{Dir: dir, ClientAddr: "127.0.0.1:2479"})
//	...
//	defer srv.Stop()
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}})
package etcdlocal
