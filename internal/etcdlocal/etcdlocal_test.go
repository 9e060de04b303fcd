package etcdlocal_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/cutline/cutline/internal/etcdlocal"
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

// Start refuses what it cannot serve on this machine's loopback, and
// ends its wait with its context.
func TestRefuses(t *testing.T) {
	for name, c := range map[string]etcdlocal.Config{
		"no dir":          {ClientAddr: "127.0.0.1:2479"},
		"not loopback":    {Dir: t.TempDir(), ClientAddr: "0.0.0.0:2479"},
		"no port":         {Dir: t.TempDir(), ClientAddr: "127.0.0.1:0"},
		"peer not local":  {Dir: t.TempDir(), ClientAddr: "127.0.0.1:2479", PeerAddr: "192.0.2.1:2480"},
		"cluster no peer": {Dir: t.TempDir(), ClientAddr: "127.0.0.1:2479", InitialCluster: "a=http://127.0.0.1:1"},
	} {
		_, err := etcdlocal.Start(t.Context(), c)
		require.Error(t, err, name)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := etcdlocal.Start(ctx, etcdlocal.Config{Dir: t.TempDir(), ClientAddr: freeAddr(t)})
	require.ErrorIs(t, err, context.Canceled)
}
