package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/etcdlocal/etcdtlstest"
	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
)

const etcdTestPassword = "pa55-w0rd-of-the-operator"

// startTLSEtcd starts an etcd (etcdtlstest) that serves its clients
// over TLS only, wants a client certificate of its CA, and has
// authentication on, with the user "operator" allowed every key. It
// returns the server and the tool's flags that reach it. The client
// certificate's common name is no etcd user: etcd takes a certificate's
// as the user when no password is given.
func startTLSEtcd(t *testing.T) (*etcdtlstest.Server, etcdAuth) {
	t.Helper()
	s := etcdtlstest.Start(t, "operator", etcdTestPassword)
	return s, etcdAuth{ca: s.CAFile, cert: s.CertFile, key: s.KeyFile, user: s.User, password: s.Password}
}

// The tool reaches etcd over TLS with a client certificate and a
// password, from flags and CUTLINE_ variables; etcd refuses it without
// the certificate, with another CA or with a wrong password, and no
// error shows the password.
func TestEtcdOverTLS(t *testing.T) {
	srv, auth := startTLSEtcd(t)
	endpoint := srv.Endpoint
	env := map[string]string{"CUTLINE_ETCD": endpoint, "CUTLINE_ETCD_CA": auth.ca, "CUTLINE_ETCD_PASSWORD": etcdTestPassword}
	c := &cmd{env: Env{Getenv: func(k string) string { return env[k] }}, g: defaultGlobals()}
	top := c.flags("top")
	require.NoError(t, top.Parse([]string{"-etcd-cert", auth.cert, "-etcd-key", auth.key, "-etcd-user", "operator", "chain"}))
	require.NoError(t, c.fromEnv(top))
	require.Equal(t, auth, c.g.etcdAuth)

	store := func(a etcdAuth, endpoint string) (metastore.Store, error) {
		c := &cmd{g: defaultGlobals()}
		c.g.etcdAuth = a
		cli, err := c.etcdClient(t.Context(), []string{endpoint})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = cli.Close() })
		return etcdstore.New(cli, etcdstore.Options{})
	}
	st, err := store(c.g.etcdAuth, c.g.etcd)
	require.NoError(t, err)
	srv.Serves(t, st)

	for name, a := range map[string]etcdAuth{
		"wrong password":        {ca: auth.ca, cert: auth.cert, key: auth.key, user: "operator", password: "not-" + etcdTestPassword},
		"no password":           {ca: auth.ca, cert: auth.cert, key: auth.key},
		"no client certificate": {ca: auth.ca, user: "operator", password: etcdTestPassword},
		"another CA":            {ca: srv.OtherCAFile, cert: auth.cert, key: auth.key, user: "operator", password: etcdTestPassword},
	} {
		st, err := store(a, endpoint)
		srv.Refuses(t, name, st, err)
	}
	_, err = store(auth, "http://"+endpoint[len("https://"):])
	var ue *UsageError
	require.ErrorAs(t, err, &ue, "TLS asked for, plain text named")
	_, err = store(etcdAuth{cert: auth.cert}, endpoint)
	require.ErrorAs(t, err, &ue, "a certificate without its key")
	_, err = store(etcdAuth{user: "operator"}, endpoint)
	require.ErrorAs(t, err, &ue, "a user without a password")

	// The tool's own commands reach etcd through those flags, and fail as
	// unreachable without them.
	tool := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(t.Context(), args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
		return code, out.String() + errb.String()
	}
	code, out := tool("-etcd-cert", auth.cert, "-etcd-key", auth.key, "-etcd-user", "operator", "-timeout", "10s", "stream", "orders")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "never opened")
	require.NotContains(t, out, etcdTestPassword)
	delete(env, "CUTLINE_ETCD_CA")
	delete(env, "CUTLINE_ETCD_PASSWORD")
	code, out = tool("-timeout", "3s", "stream", "orders")
	require.NotEqual(t, 0, code, "without TLS and a password etcd refuses the tool: %s", out)
}
