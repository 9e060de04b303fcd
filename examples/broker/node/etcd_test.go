package node

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/etcdlocal/etcdtlstest"
	"github.com/cutline/cutline/internal/testlog"
	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
)

// tlsEtcd is an etcd (etcdtlstest) that serves its clients over TLS
// only, asks them for a certificate of its CA, and has authentication
// on: a user "broker" with a role that may read and write every key.
type tlsEtcd struct {
	*etcdtlstest.Server
	endpoint string
	// caFile, certFile and keyFile are a client's: the CA and a client
	// certificate of it.
	caFile, certFile, keyFile string
}

const etcdTestPassword = "pa55-w0rd-of-the-broker"

func startTLSEtcd(t *testing.T) *tlsEtcd {
	t.Helper()
	s := etcdtlstest.Start(t, "broker", etcdTestPassword)
	return &tlsEtcd{Server: s, endpoint: s.Endpoint, caFile: s.CAFile, certFile: s.CertFile, keyFile: s.KeyFile}
}

// The broker reaches etcd over TLS, with a client certificate and a
// password, given by flags and CUTLINE_ variables; the metastore works
// over that client. Without the client certificate, with another CA or
// with a wrong password, etcd refuses it. No error, log line or help
// text shows the password.
func TestEtcdOverTLS(t *testing.T) {
	te := startTLSEtcd(t)
	env := map[string]string{"CUTLINE_ETCD_PASSWORD": etcdTestPassword, "CUTLINE_ETCD_CA": te.caFile}
	getenv := func(k string) string { return env[k] }
	args := []string{"-role", "all", "-etcd", te.endpoint, "-etcd-cert", te.certFile, "-etcd-key", te.keyFile, "-etcd-user", "broker"}

	var help bytes.Buffer
	_, err := parseFlags(append(args, "-h"), getenv, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.NotContains(t, help.String(), etcdTestPassword)

	cfg, err := parseFlags(args, getenv, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, etcdstore.DialConfig{Endpoints: []string{te.endpoint}, CAFile: te.caFile, CertFile: te.certFile, KeyFile: te.keyFile, Username: "broker", Password: etcdTestPassword}, cfg.etcdDial)
	te.Serves(t, etcdStore(t, cfg))

	refused := func(name string, mutate func(c *Settings)) {
		t.Helper()
		c := *cfg
		mutate(&c)
		cli, err := etcdstore.Dial(t.Context(), c.etcdDial)
		var st metastore.Store
		if err == nil {
			defer cli.Close()
			st, err = etcdstore.New(cli, etcdstore.Options{Root: c.EtcdRoot})
			require.NoError(t, err)
		}
		te.Refuses(t, name, st, err)
	}
	refused("wrong password", func(c *Settings) { c.etcdDial.Password = "not-" + etcdTestPassword })
	refused("no password", func(c *Settings) { c.etcdDial.Username, c.etcdDial.Password = "", "" })
	refused("no client certificate", func(c *Settings) { c.etcdDial.CertFile, c.etcdDial.KeyFile = "", "" })
	refused("another CA", func(c *Settings) { c.etcdDial.CAFile = te.OtherCAFile })
	refused("plain text", func(c *Settings) {
		c.Etcd = "http://" + c.Etcd[len("https://"):]
		c.etcdDial = etcdstore.DialConfig{Endpoints: []string{c.Etcd}}
	})

	// Refused when the flags are parsed, naming the flag.
	for _, bad := range []struct {
		args []string
		flag string
	}{
		{[]string{"-etcd-ca", te.caFile}, "need -etcd"},
		{[]string{"-etcd", te.endpoint, "-etcd-cert", te.certFile}, "-etcd-key"},      // without the key
		{[]string{"-etcd", te.endpoint, "-etcd-user", "broker"}, "-etcd-password"},    // without the password
		{[]string{"-etcd", "http://127.0.0.1:2379", "-etcd-ca", te.caFile}, "-etcd:"}, // TLS asked for, plain text named
		{[]string{"-etcd", te.endpoint, "-etcd-ca", te.certFile + ".missing"}, "-etcd-ca"},
	} {
		_, err := parseFlags(append([]string{"-role", "all"}, bad.args...), func(string) string { return "" }, &bytes.Buffer{})
		require.ErrorContains(t, err, bad.flag, "%v", bad.args)
	}
}

// etcdStore is the metastore over the client the flags make.
func etcdStore(t *testing.T, cfg *Settings) metastore.Store {
	t.Helper()
	cli, err := etcdstore.Dial(t.Context(), cfg.etcdDial)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	st, err := etcdstore.New(cli, etcdstore.Options{Root: cfg.EtcdRoot})
	require.NoError(t, err)
	return st
}

// lockedBuffer is a buffer safe for concurrent writes.
type lockedBuffer = testlog.Buffer
