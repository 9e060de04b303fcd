package node

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cutline/cutline/internal/testpki"
	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
)

// tlsEtcd is an embedded etcd that serves its clients over TLS only, asks
// them for a certificate of its CA, and has authentication on: a user
// "broker" with a role that may read and write every key.
type tlsEtcd struct {
	endpoint string
	ca       *testpki.CA
	// caFile, certFile and keyFile are a client's: the CA and a client
	// certificate of it.
	caFile, certFile, keyFile string
}

const etcdTestPassword = "pa55-w0rd-of-the-broker"

func startTLSEtcd(t *testing.T) *tlsEtcd {
	t.Helper()
	ca := testpki.New(t, "etcd CA")
	srvCert, srvKey := ca.Files("etcd-server", ca.Node("etcd-server"))
	certFile, keyFile := ca.Files("broker-client", ca.Client("broker-client"))
	cfg := embed.NewConfig()
	cfg.Name = "tls"
	cfg.Dir = t.TempDir()
	// Its warnings go to the test's log if it fails.
	var logs lockedBuffer
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&logs), zapcore.WarnLevel)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("etcd's warnings:\n%s", logs.String())
		}
	})
	client, peer := freeURL(t, "https"), freeURL(t, "http")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = srvCert, srvKey
	cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = ca.CAFile(), true
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready after 30s")
	}
	te := &tlsEtcd{endpoint: client.String(), ca: ca, caFile: ca.CAFile(), certFile: certFile, keyFile: keyFile}

	// Authentication on: the root user, and the broker's.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cli, err := etcdstore.Dial(ctx, etcdAuth{CA: te.caFile, Cert: certFile, Key: keyFile}.dialConfig(te.endpoint))
	require.NoError(t, err)
	defer cli.Close()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "cutline"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "cutline", "\x00", "\x00", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "broker", etcdTestPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "broker", "cutline"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		require.NoError(t, step())
	}
	return te
}

// freeURL is a URL of scheme on a loopback port that was free a moment
// ago.
func freeURL(t *testing.T, scheme string) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return url.URL{Scheme: scheme, Host: l.Addr().String()}
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
	require.Equal(t, etcdAuth{CA: te.caFile, Cert: te.certFile, Key: te.keyFile, User: "broker", Password: etcdTestPassword}, cfg.etcdAuth)
	st := etcdStore(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = metastore.Put(ctx, st, "probe", []byte("over TLS"), 0)
	require.NoError(t, err)
	kv, err := st.Get(ctx, "probe")
	require.NoError(t, err)
	require.Equal(t, "over TLS", string(kv.Value))

	refused := func(name string, mutate func(c *Settings)) {
		t.Helper()
		c := *cfg
		mutate(&c)
		cli, err := etcdstore.Dial(t.Context(), c.etcdAuth.dialConfig(c.Etcd))
		if err == nil {
			defer cli.Close()
			s, serr := etcdstore.New(cli, etcdstore.Options{Root: c.EtcdRoot})
			require.NoError(t, serr)
			rctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err = s.Get(rctx, "probe")
		}
		require.Error(t, err, name)
		require.NotContains(t, fmt.Sprint(err), etcdTestPassword, name)
	}
	refused("wrong password", func(c *Settings) { c.etcdAuth.Password = "not-" + etcdTestPassword })
	refused("no password", func(c *Settings) { c.etcdAuth.User, c.etcdAuth.Password = "", "" })
	refused("no client certificate", func(c *Settings) { c.etcdAuth.Cert, c.etcdAuth.Key = "", "" })
	other := testpki.New(t, "another CA")
	refused("another CA", func(c *Settings) { c.etcdAuth.CA = other.CAFile() })
	refused("plain text", func(c *Settings) { c.etcdAuth = etcdAuth{}; c.Etcd = "http://" + c.Etcd[len("https://"):] })

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
	cli, err := etcdstore.Dial(t.Context(), cfg.etcdAuth.dialConfig(cfg.Etcd))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	st, err := etcdstore.New(cli, etcdstore.Options{Root: cfg.EtcdRoot})
	require.NoError(t, err)
	return st
}

// lockedBuffer is a buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
