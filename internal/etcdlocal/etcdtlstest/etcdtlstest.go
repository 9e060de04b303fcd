package etcdtlstest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cutline/cutline/internal/etcdlocal"
	"github.com/cutline/cutline/internal/testlog"
	"github.com/cutline/cutline/internal/testpki"
	"github.com/cutline/cutline/metastore"
)

// Server is a running etcd and what a client needs to reach it.
type Server struct {
	// Endpoint is the client URL, https://127.0.0.1:port.
	Endpoint string
	// CA signed the server's certificate and the client's.
	CA *testpki.CA
	// CAFile is the CA's certificate; CertFile and KeyFile are a client
	// certificate of the CA and its key.
	CAFile, CertFile, KeyFile string
	// OtherCAFile is the certificate of another CA, which signed neither
	// the server's certificate nor the client's: a client that trusts
	// only it refuses the server.
	OtherCAFile string
	// User and Password are the etcd user Start added, whose role may
	// read and write every key.
	User, Password string
}

// readyTimeout bounds the wait for the server, and for its users.
const readyTimeout = 30 * time.Second

// Start starts the server, adds the user root (etcd's authentication
// needs it) and user with password, turns authentication on, and stops
// the server when the test ends. Any failure fails the test.
func Start(t testing.TB, user, password string) *Server {
	t.Helper()
	if user == "" || user == "root" || password == "" {
		t.Fatalf("etcdtlstest: user %q: a user other than root, with a password, is required", user)
	}
	ca := testpki.New(t, "etcd CA")
	// The server's certificate is a node's: good for client
	// authentication too, as etcd's gateway dials its own listener.
	srvCert, srvKey := ca.Files("etcd-server", ca.Node("etcd-server"))
	s := &Server{CA: ca, CAFile: ca.CAFile(), User: user, Password: password}
	s.CertFile, s.KeyFile = ca.Files(user+"-client", ca.Client(user+"-client"))
	s.OtherCAFile = testpki.New(t, "another CA").CAFile()

	logs := &testlog.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("etcd's warnings:\n%s", logs.String())
		}
	})
	srv, err := etcdlocal.Start(t.Context(), etcdlocal.Config{
		Name: "tls", Dir: t.TempDir(), ClientAddr: freeAddr(t), NoFsync: true, ReadyTimeout: readyTimeout,
		Log:       slog.New(slog.NewTextHandler(logs, nil)),
		ClientTLS: &etcdlocal.TLSFiles{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: s.CAFile, ClientCertAuth: true},
	})
	if err != nil {
		t.Fatalf("etcdtlstest: %v", err)
	}
	t.Cleanup(srv.Stop)
	s.Endpoint = srv.Endpoint()
	if err := s.addUsers(t.Context()); err != nil {
		t.Fatalf("etcdtlstest: authentication: %v", err)
	}
	return s
}

// probeKey is the key Serves writes and Refuses reads.
const probeKey = "probe"

// Serves checks that st, a metastore over a client of the server,
// writes a key and reads it back.
func (s *Server) Serves(t testing.TB, st metastore.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	want := "over TLS"
	if _, err := metastore.Put(ctx, st, probeKey, []byte(want), 0); err != nil {
		t.Fatalf("etcdtlstest: write: %v", err)
	}
	kv, err := st.Get(ctx, probeKey)
	if err != nil {
		t.Fatalf("etcdtlstest: read: %v", err)
	}
	if string(kv.Value) != want {
		t.Fatalf("etcdtlstest: read %q, want %q", kv.Value, want)
	}
}

// refuseWait bounds the read Refuses expects to fail.
const refuseWait = 2 * time.Second

// Refuses checks that the server refused a client, named name: err,
// the error of making the client or its metastore, is not nil, or else
// a read with st, the metastore over it, fails within refuseWait (an
// answer that the key is not there is served). The error must not show
// the password.
func (s *Server) Refuses(t testing.TB, name string, st metastore.Store, err error) {
	t.Helper()
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), refuseWait)
		defer cancel()
		_, err = st.Get(ctx, probeKey)
	}
	switch {
	case err == nil || errors.Is(err, metastore.ErrNotFound):
		t.Errorf("etcdtlstest: %s: served", name)
	case strings.Contains(err.Error(), s.Password):
		t.Errorf("etcdtlstest: %s: the error shows the password: %v", name, err)
	}
}

// addUsers adds root and the user, the latter with a role that may read
// and write every key, and turns authentication on.
func (s *Server) addUsers(ctx context.Context) error {
	tc, err := (&transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile, TrustedCAFile: s.CAFile}).ClientConfig()
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, TLS: tc, DialTimeout: readyTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	const role = "readwrite"
	if _, err := cli.UserAdd(ctx, "root", "root-"+s.Password); err != nil {
		return err
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return err
	}
	if _, err := cli.RoleAdd(ctx, role); err != nil {
		return err
	}
	// The range from "\x00" to "\x00" is every key.
	if _, err := cli.RoleGrantPermission(ctx, role, "\x00", "\x00", clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		return err
	}
	if _, err := cli.UserAdd(ctx, s.User, s.Password); err != nil {
		return err
	}
	if _, err := cli.UserGrantRole(ctx, s.User, role); err != nil {
		return err
	}
	_, err = cli.AuthEnable(ctx)
	return err
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtlstest: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}
