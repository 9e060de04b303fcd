package main

import (
	"net"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cutline/cutline/internal/etcdlocal"
)

// startEtcd starts an embedded etcd member for s on a free loopback
// port, its data in a temporary directory (not synced: figures, not
// data), stopped when s closes, and returns its client endpoint. A
// member that cannot start skips the figure, or fails it with CI=true.
func startEtcd(s *scope) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		etcdUnavailable(s, err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	srv, err := etcdlocal.Start(s.Context(), etcdlocal.Config{Name: "bench", Dir: s.TempDir(), ClientAddr: addr, NoFsync: true})
	if err != nil {
		etcdUnavailable(s, err)
	}
	s.Cleanup(srv.Stop)
	return srv.Endpoint()
}

func etcdUnavailable(s *scope, err error) {
	if os.Getenv("CI") == "true" {
		s.Fatalf("start etcd: %v", err)
	}
	s.Skipf("start etcd: %v", err)
}

// etcdClient is a quiet client of a member startEtcd started, closed
// when s closes.
func etcdClient(s *scope) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{startEtcd(s)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		s.Fatalf("etcd client: %v", err)
	}
	s.Cleanup(func() { _ = cli.Close() })
	return cli
}
