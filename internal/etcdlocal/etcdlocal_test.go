package etcdlocal_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/etcdlocal"
	"github.com/cutline/cutline/internal/testpki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func client(t *testing.T, s *etcdlocal.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// A server keeps its data in its directory: started again on it, after
// a stop or a crash, it serves what it held. While it runs, a second
// server on the same lock file is refused at once.
func TestDurable(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	cfg := etcdlocal.Config{Dir: filepath.Join(dir, "etcd"), ClientAddr: freeAddr(t), LockFile: filepath.Join(dir, "etcd.lock"),
		QuotaBytes: 1 << 26, CompactionRetention: time.Minute, DefragThresholdMB: 1, SnapshotCount: 100,
		Log: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := etcdlocal.Start(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, "http://"+cfg.ClientAddr, s.Endpoint())
	_, err = client(t, s).Put(t.Context(), "k", "v1")
	require.NoError(t, err)

	other := cfg
	other.ClientAddr, other.Dir = freeAddr(t), filepath.Join(dir, "other")
	_, err = etcdlocal.Start(t.Context(), other)
	require.ErrorIs(t, err, etcdlocal.ErrInUse)

	n, err := s.DisarmAlarms(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)

	for _, stop := range []func(*etcdlocal.Server){(*etcdlocal.Server).Stop, (*etcdlocal.Server).Crash} {
		stop(s)
		stop(s) // only the first does anything
		s, err = etcdlocal.Start(t.Context(), cfg)
		require.NoError(t, err)
		resp, err := client(t, s).Get(t.Context(), "k")
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		require.Equal(t, "v1", string(resp.Kvs[0].Value))
	}
	s.Stop()
	require.NotContains(t, logs.String(), "single port", "quiet notices stay quiet")
}

// Three members on their peer addresses form a cluster; one that
// crashed joins it again.
func TestCluster(t *testing.T) {
	names := []string{"m0", "m1", "m2"}
	var cfgs []etcdlocal.Config
	initial := ""
	for i, n := range names {
		c := etcdlocal.Config{Name: n, Dir: t.TempDir(), ClientAddr: freeAddr(t), PeerAddr: freeAddr(t), NoFsync: true, ClusterToken: "t"}
		if i > 0 {
			initial += ","
		}
		initial += n + "=http://" + c.PeerAddr
		cfgs = append(cfgs, c)
	}
	servers := make([]*etcdlocal.Server, len(cfgs))
	errs := make(chan error, len(cfgs))
	for i := range cfgs {
		cfgs[i].InitialCluster = initial
		go func() {
			var err error
			servers[i], err = etcdlocal.Start(t.Context(), cfgs[i])
			errs <- err
		}()
	}
	for range cfgs {
		require.NoError(t, <-errs)
	}
	defer func() {
		var wg sync.WaitGroup
		for _, s := range servers {
			wg.Go(s.Stop)
		}
		wg.Wait()
	}()
	_, err := client(t, servers[0]).Put(t.Context(), "k", "v")
	require.NoError(t, err)
	servers[2].Crash()
	rejoin := cfgs[2]
	rejoin.Join = true
	servers[2], err = etcdlocal.Start(t.Context(), rejoin)
	require.NoError(t, err)
	resp, err := client(t, servers[2]).Get(t.Context(), "k")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
}

// With ClientTLS the server serves its clients over TLS only, at an
// https endpoint, and with a TrustedCAFile only those with a certificate
// of that CA: a client without one, with one of another CA or in plain
// text is refused. With ClientCertAuth, once authentication is on, the
// common name of a client's certificate is its user.
func TestClientTLS(t *testing.T) {
	ca := testpki.New(t, "etcd CA")
	srvCert, srvKey := ca.Files("server", ca.Node("server"))
	cert, key := ca.Files("client", ca.Client("client"))
	rootCert, rootKey := ca.Files("root", ca.Client("root"))
	other := testpki.New(t, "another CA")
	otherCert, otherKey := other.Files("client", other.Client("client"))

	start := func(tf etcdlocal.TLSFiles) *etcdlocal.Server {
		t.Helper()
		cfg := etcdlocal.Config{Dir: t.TempDir(), ClientAddr: freeAddr(t), NoFsync: true, ClientTLS: &tf}
		s, err := etcdlocal.Start(t.Context(), cfg)
		require.NoError(t, err)
		t.Cleanup(s.Stop)
		require.Equal(t, "https://"+cfg.ClientAddr, s.Endpoint())
		return s
	}
	dial := func(endpoint string, tlsInfo *transport.TLSInfo) *clientv3.Client {
		t.Helper()
		var tc *tls.Config
		if tlsInfo != nil {
			var err error
			tc, err = tlsInfo.ClientConfig()
			require.NoError(t, err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	// wait is long for a request to be served, short for one refused.
	put := func(wait time.Duration, cli *clientv3.Client) error {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		_, err := cli.Put(ctx, "k", "v")
		return err
	}

	t.Run("server certificate only", func(t *testing.T) {
		s := start(etcdlocal.TLSFiles{CertFile: srvCert, KeyFile: srvKey})
		require.NoError(t, put(30*time.Second, dial(s.Endpoint(), &transport.TLSInfo{TrustedCAFile: ca.CAFile()})), "no client certificate asked for")
		require.Error(t, put(2*time.Second, dial("http://"+s.Endpoint()[len("https://"):], nil)), "plain text")
	})
	t.Run("client certificates", func(t *testing.T) {
		s := start(etcdlocal.TLSFiles{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: ca.CAFile(), ClientCertAuth: true})
		cli := dial(s.Endpoint(), &transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: ca.CAFile()})
		require.NoError(t, put(30*time.Second, cli))
		require.Error(t, put(2*time.Second, dial(s.Endpoint(), &transport.TLSInfo{TrustedCAFile: ca.CAFile()})), "no client certificate")
		require.Error(t, put(2*time.Second, dial(s.Endpoint(), &transport.TLSInfo{CertFile: otherCert, KeyFile: otherKey, TrustedCAFile: ca.CAFile()})), "a client certificate of another CA")
		require.Error(t, put(2*time.Second, dial("http://"+s.Endpoint()[len("https://"):], nil)), "plain text")

		// Authentication on, with the user root alone: the certificate
		// named root is that user, the one named client is nobody.
		_, err := cli.UserAdd(t.Context(), "root", "root-password")
		require.NoError(t, err)
		_, err = cli.UserGrantRole(t.Context(), "root", "root")
		require.NoError(t, err)
		_, err = cli.AuthEnable(t.Context())
		require.NoError(t, err)
		require.NoError(t, put(30*time.Second, dial(s.Endpoint(), &transport.TLSInfo{CertFile: rootCert, KeyFile: rootKey, TrustedCAFile: ca.CAFile()})), "the certificate's name is the user")
		require.Error(t, put(2*time.Second, dial(s.Endpoint(), &transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: ca.CAFile()})), "a certificate naming no user")
	})
}

// Start refuses what it cannot serve on this machine's loopback, naming
// the field, and ends its wait with its context.
func TestRefuses(t *testing.T) {
	ca := testpki.New(t, "etcd CA")
	cert, key := ca.Files("server", ca.Node("server"))
	tlsCfg := func(tf etcdlocal.TLSFiles) etcdlocal.Config {
		return etcdlocal.Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:2479", ClientTLS: &tf}
	}
	for _, c := range []struct {
		name, field string
		cfg         etcdlocal.Config
	}{
		{"no dir", "Dir", etcdlocal.Config{ClientAddr: "127.0.0.1:2479"}},
		{"not loopback", "ClientAddr", etcdlocal.Config{Dir: t.TempDir(), ClientAddr: "0.0.0.0:2479"}},
		{"no port", "ClientAddr", etcdlocal.Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:0"}},
		{"peer not local", "PeerAddr", etcdlocal.Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:2479", PeerAddr: "192.0.2.1:2480"}},
		{"cluster no peer", "InitialCluster", etcdlocal.Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:2479", InitialCluster: "a=http://127.0.0.1:1"}},
		{"TLS not loopback", "ClientAddr", etcdlocal.Config{Dir: t.TempDir(), ClientAddr: "192.0.2.1:2479", ClientTLS: &etcdlocal.TLSFiles{CertFile: cert, KeyFile: key}}},
		{"TLS no cert", "ClientTLS.CertFile", tlsCfg(etcdlocal.TLSFiles{KeyFile: key})},
		{"TLS no key", "ClientTLS.KeyFile", tlsCfg(etcdlocal.TLSFiles{CertFile: cert})},
		{"client auth no CA", "ClientTLS.TrustedCAFile", tlsCfg(etcdlocal.TLSFiles{CertFile: cert, KeyFile: key, ClientCertAuth: true})},
		{"missing cert", "ClientTLS.CertFile", tlsCfg(etcdlocal.TLSFiles{CertFile: cert + ".missing", KeyFile: key})},
		{"missing key", "ClientTLS.KeyFile", tlsCfg(etcdlocal.TLSFiles{CertFile: cert, KeyFile: key + ".missing"})},
		{"missing CA", "ClientTLS.TrustedCAFile", tlsCfg(etcdlocal.TLSFiles{CertFile: cert, KeyFile: key, TrustedCAFile: ca.CAFile() + ".missing", ClientCertAuth: true})},
	} {
		_, err := etcdlocal.Start(t.Context(), c.cfg)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, c.name)
		require.Equal(t, c.field, ce.Field, c.name)
		require.ErrorIs(t, err, cutline.ErrInvalid, c.name)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := etcdlocal.Start(ctx, etcdlocal.Config{Dir: t.TempDir(), ClientAddr: freeAddr(t)})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, cutline.ErrInvalid), "a cancelled start is no configuration error")
}

// A server whose database filled up (etcd's NOSPACE alarm) is started
// again with its alarm disarmed, and says so in its log.
func TestStartDisarmsAFullDatabase(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	cfg := etcdlocal.Config{Dir: filepath.Join(dir, "etcd"), ClientAddr: freeAddr(t), QuotaBytes: 1 << 20, NoFsync: true,
		Log: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := etcdlocal.Start(t.Context(), cfg)
	require.NoError(t, err)
	cli := client(t, s)
	value := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "no NOSPACE alarm after 64 MiB of writes")
		if _, err := cli.Put(t.Context(), fmt.Sprintf("k%d", i), value); err != nil {
			require.ErrorContains(t, err, "database space exceeded")
			break
		}
	}
	s.Stop()
	require.NotContains(t, logs.String(), "NOSPACE")
	s, err = etcdlocal.Start(t.Context(), cfg)
	require.NoError(t, err)
	defer s.Stop()
	require.Contains(t, logs.String(), "NOSPACE alarm): disarmed")
	n, err := s.DisarmAlarms(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "Start disarmed it")
}
