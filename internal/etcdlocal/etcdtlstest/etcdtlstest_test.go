package etcdtlstest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/cutline/cutline/internal/etcdlocal/etcdtlstest"
	"github.com/cutline/cutline/internal/testpki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The server serves the user, with its password and a client
// certificate of the CA, every key; it refuses a request without the
// password (the certificate's name is no user), with a wrong one, without
// a client certificate, with one of another CA, or in plain text.
func TestStart(t *testing.T) {
	const password = "a-password"
	s := etcdtlstest.Start(t, "someone", password)
	require.True(t, strings.HasPrefix(s.Endpoint, "https://127.0.0.1:"), s.Endpoint)
	require.Equal(t, "someone", s.User)
	require.Equal(t, password, s.Password)
	require.Equal(t, s.CA.CAFile(), s.CAFile)

	// wait is long for a request to be served (the password's hash is
	// slow to check), short for one to be refused.
	put := func(wait time.Duration, endpoint string, tlsInfo *transport.TLSInfo, user, password string) error {
		cfg := clientv3.Config{Endpoints: []string{endpoint}, Username: user, Password: password, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
		if tlsInfo != nil {
			tc, err := tlsInfo.ClientConfig()
			require.NoError(t, err)
			cfg.TLS = tc
		}
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		cfg.Context = ctx
		cli, err := clientv3.New(cfg)
		if err != nil {
			return err
		}
		defer cli.Close()
		_, err = cli.Put(ctx, "\x01any/key", "v")
		return err
	}
	files := &transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile, TrustedCAFile: s.CAFile}
	require.NoError(t, put(30*time.Second, s.Endpoint, files, s.User, s.Password))

	other := testpki.New(t, "another CA")
	otherCert, otherKey := other.Files("client", other.Client("client"))
	for name, err := range map[string]error{
		"no password":           put(2*time.Second, s.Endpoint, files, "", ""),
		"wrong password":        put(2*time.Second, s.Endpoint, files, s.User, "not-"+s.Password),
		"no client certificate": put(2*time.Second, s.Endpoint, &transport.TLSInfo{TrustedCAFile: s.CAFile}, s.User, s.Password),
		"another CA":            put(2*time.Second, s.Endpoint, &transport.TLSInfo{CertFile: otherCert, KeyFile: otherKey, TrustedCAFile: s.CAFile}, s.User, s.Password),
		"plain text":            put(2*time.Second, "http://"+strings.TrimPrefix(s.Endpoint, "https://"), nil, s.User, s.Password),
	} {
		require.Error(t, err, name)
	}
}
