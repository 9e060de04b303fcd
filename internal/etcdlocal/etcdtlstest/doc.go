// Package etcdtlstest starts, for one test, an embedded etcd
// (etcdlocal) that a client reaches the way an operator's etcd is
// reached in production: over TLS only, with a client certificate of
// the server's CA (internal/testpki), and with authentication on, as a
// user with a password whose role may read and write every key.
//
//	srv := etcdtlstest.Start(t, "operator", password)
//	// srv.Endpoint, srv.CAFile, srv.CertFile, srv.KeyFile, srv.User, srv.Password
//	srv.Serves(t, store)                  // a metastore over the client the flags made
//	srv.Refuses(t, "no password", st, err) // one the server must refuse
//
// OtherCAFile is the certificate of a CA that signed nothing the server
// knows, for a client that must not trust the server. Refuses also checks
// that the error does not show the password.
//
// The client certificate's common name is no etcd user: etcd takes it
// as the user of a request that gives no password, so such a request is
// refused. The server is stopped when the test ends, and its warnings are
// in the test's log if the test failed.
package etcdtlstest
