package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/testpki"
	"github.com/cutline/cutline/metastore"
)

const dialPassword = "s3cret-of-the-operator"

// authServer is as much of etcd as a dial needs: Authenticate, which
// knows one user, and Range, which answers a token Authenticate handed
// out and refuses any other.
type authServer struct {
	pb.UnimplementedAuthServer
	pb.UnimplementedKVServer
}

func (authServer) Authenticate(_ context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	if r.Name != "operator" || r.Password != dialPassword {
		return nil, rpctypes.ErrGRPCAuthFailed
	}
	return &pb.AuthenticateResponse{Header: &pb.ResponseHeader{Revision: 1}, Token: "token-1"}, nil
}

func (authServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(rpctypes.TokenFieldNameGRPC)) == 0 || md.Get(rpctypes.TokenFieldNameGRPC)[0] != "token-1" {
		return nil, rpctypes.ErrGRPCUserEmpty
	}
	return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 1}, Count: 1,
		Kvs: []*mvccpb.KeyValue{{Key: r.Key, Value: []byte("over TLS"), ModRevision: 1, CreateRevision: 1, Version: 1}}}, nil
}

// startTLSAuth serves authServer over TLS with a certificate of a fresh
// CA, requiring a client certificate of the same CA. It returns the
// endpoint and a DialConfig that reaches it.
func startTLSAuth(t *testing.T) DialConfig {
	t.Helper()
	ca := testpki.New(t, "etcd CA")
	pool := x509.NewCertPool()
	raw, err := os.ReadFile(ca.CAFile())
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(raw))
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{ca.Server("127.0.0.1")}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})))
	pb.RegisterAuthServer(srv, authServer{})
	pb.RegisterKVServer(srv, authServer{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	certFile, keyFile := ca.Files("operator", ca.Client("operator"))
	return DialConfig{Endpoints: []string{"https://" + l.Addr().String()}, CAFile: ca.CAFile(), CertFile: certFile, KeyFile: keyFile,
		Username: "operator", Password: dialPassword, DialTimeout: 2 * time.Second}
}

// Dial reaches etcd over TLS with a client certificate and a password;
// it is refused with a wrong password, without the certificate, or with
// another CA, and no error shows the password.
func TestDialTLSAndPassword(t *testing.T) {
	good := startTLSAuth(t)
	cli, err := Dial(t.Context(), good)
	require.NoError(t, err)
	st, err := New(cli, Options{Root: "/dial/"})
	require.NoError(t, err)
	kv, err := st.Get(t.Context(), "probe")
	require.NoError(t, err)
	require.Equal(t, "over TLS", string(kv.Value))
	require.NoError(t, cli.Close())

	other := testpki.New(t, "another CA")
	wrong := good
	wrong.Password = "not-" + dialPassword
	noCert := good
	noCert.CertFile, noCert.KeyFile = "", ""
	otherCA := good
	otherCA.CAFile = other.CAFile()
	for name, c := range map[string]DialConfig{"wrong password": wrong, "no client certificate": noCert, "another CA": otherCA} {
		cli, err := Dial(t.Context(), c)
		if err == nil {
			_ = cli.Close()
		}
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), dialPassword, name)
		require.NotErrorIs(t, err, cutline.ErrInvalid, name)
		if name == "wrong password" {
			require.ErrorIs(t, err, rpctypes.ErrAuthFailed, name)
		} else {
			require.ErrorIs(t, err, metastore.ErrUnavailable, "%s: the handshake never completes", name)
		}
	}

	// The caller's context bounds the dial.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = Dial(ctx, good)
	require.ErrorIs(t, err, context.Canceled)
}

// A configuration that cannot work is a *cutline.ConfigError naming the field,
// before anything is dialled; none shows the password.
func TestDialRefuses(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	ca := testpki.New(t, "a CA")
	cert, key := ca.Files("c", ca.Client("c"))
	base := DialConfig{Endpoints: []string{"127.0.0.1:2379"}}
	for _, tc := range []struct {
		field string
		c     DialConfig
	}{
		{"Endpoints", DialConfig{}},
		{"Endpoints[0]", DialConfig{Endpoints: []string{"ftp://x:1"}}},
		{"Endpoints[1]", DialConfig{Endpoints: []string{"127.0.0.1:1", "https://user:" + dialPassword + "@x:1"}}},
		{"Endpoints[0]", DialConfig{Endpoints: []string{"http://127.0.0.1:1"}, CAFile: ca.CAFile()}},
		{"KeyFile", DialConfig{Endpoints: base.Endpoints, CertFile: cert}},
		{"KeyFile", DialConfig{Endpoints: base.Endpoints, KeyFile: key}},
		{"Password", DialConfig{Endpoints: base.Endpoints, Username: "operator"}},
		{"Password", DialConfig{Endpoints: base.Endpoints, Password: dialPassword}},
		{"DialTimeout", DialConfig{Endpoints: base.Endpoints, DialTimeout: -time.Second}},
		{"CAFile", DialConfig{Endpoints: base.Endpoints, CAFile: filepath.Join(dir, "missing.pem")}},
		{"CAFile", DialConfig{Endpoints: base.Endpoints, CAFile: notPEM}},
		{"CertFile", DialConfig{Endpoints: base.Endpoints, CertFile: cert, KeyFile: notPEM, Password: dialPassword, Username: "u"}},
	} {
		_, err := Dial(t.Context(), tc.c)
		require.ErrorIs(t, err, cutline.ErrInvalid, tc.field)
		ce, ok := errors.AsType[*cutline.ConfigError](err)
		require.True(t, ok, tc.field)
		require.Equal(t, tc.field, ce.Field, err.Error())
		require.NotContains(t, err.Error(), dialPassword, tc.field)
	}
}

// ClientConfig sets TLS only when asked, with the CA and the client
// certificate given, and the default dial timeout.
func TestDialClientConfig(t *testing.T) {
	cfg, err := DialConfig{Endpoints: []string{"127.0.0.1:2379"}, Username: "u", Password: "p"}.ClientConfig()
	require.NoError(t, err)
	require.Nil(t, cfg.TLS)
	require.Equal(t, DefaultDialTimeout, cfg.DialTimeout)
	require.Equal(t, "u", cfg.Username)
	require.Equal(t, "p", cfg.Password)

	ca := testpki.New(t, "a CA")
	cert, key := ca.Files("c", ca.Client("c"))
	cfg, err = DialConfig{Endpoints: []string{"https://127.0.0.1:2379"}, CAFile: ca.CAFile(), CertFile: cert, KeyFile: key, DialTimeout: time.Second}.ClientConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg.TLS)
	require.NotNil(t, cfg.TLS.RootCAs)
	require.Len(t, cfg.TLS.Certificates, 1)
	require.Equal(t, time.Second, cfg.DialTimeout)
	cfg, err = DialConfig{Endpoints: []string{"127.0.0.1:2379"}, CAFile: ca.CAFile()}.ClientConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg.TLS, "a CA alone makes the connections TLS")
	require.Empty(t, cfg.TLS.Certificates)
}
