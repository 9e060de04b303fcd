package etcdtlstest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/cutline/cutline/internal/etcdlocal/etcdtlstest"
	"github.com/cutline/cutline/internal/testpki"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/metastore/memstore"
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
	require.NotEqual(t, s.CAFile, s.OtherCAFile)

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
		"server of another CA":  put(2*time.Second, s.Endpoint, &transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile, TrustedCAFile: s.OtherCAFile}, s.User, s.Password),
		"no password":           put(2*time.Second, s.Endpoint, files, "", ""),
		"wrong password":        put(2*time.Second, s.Endpoint, files, s.User, "not-"+s.Password),
		"no client certificate": put(2*time.Second, s.Endpoint, &transport.TLSInfo{TrustedCAFile: s.CAFile}, s.User, s.Password),
		"another CA":            put(2*time.Second, s.Endpoint, &transport.TLSInfo{CertFile: otherCert, KeyFile: otherKey, TrustedCAFile: s.CAFile}, s.User, s.Password),
		"plain text":            put(2*time.Second, "http://"+strings.TrimPrefix(s.Endpoint, "https://"), nil, s.User, s.Password),
	} {
		require.Error(t, err, name)
	}
}

// Serves passes for a metastore over a client the server serves, and
// fails for one that cannot read back what it wrote; Refuses passes for
// an error or a metastore the server refuses, and fails for one it
// serves or an error that shows the password.
func TestServesAndRefuses(t *testing.T) {
	s := etcdtlstest.Start(t, "someone", "a-password")
	tc, err := (&transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile, TrustedCAFile: s.CAFile}).ClientConfig()
	require.NoError(t, err)
	store := func(user, password string) *etcdstore.Store {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, TLS: tc, Username: user, Password: password,
			DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cli.Close() })
		st, err := etcdstore.New(cli, etcdstore.Options{})
		require.NoError(t, err)
		return st
	}
	served := store(s.User, s.Password)
	require.Empty(t, failures(t, func(tb testing.TB) { s.Serves(tb, served) }))
	require.Empty(t, failures(t, func(tb testing.TB) { s.Refuses(tb, "no user", store("", ""), nil) }))
	require.Empty(t, failures(t, func(tb testing.TB) { s.Refuses(tb, "an error", nil, errors.New("refused")) }))

	require.NotEmpty(t, failures(t, func(tb testing.TB) { s.Serves(tb, store("", "")) }), "a store the server refuses")
	require.NotEmpty(t, failures(t, func(tb testing.TB) { s.Refuses(tb, "served", served, nil) }), "a store the server serves")
	require.NotEmpty(t, failures(t, func(tb testing.TB) { s.Refuses(tb, "in memory", memstore.New(memstore.Options{}), nil) }), "a store that serves")
	require.NotEmpty(t, failures(t, func(tb testing.TB) {
		s.Refuses(tb, "shown", nil, fmt.Errorf("user %s password %s", s.User, s.Password))
	}), "an error that shows the password")
}

// failures runs f with a testing.TB that records its failures instead
// of failing the test, and returns them.
func failures(t *testing.T, f func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
