package selfsigned_test

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/examples/internal/selfsigned"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The certificate verifies for the loopback names against the file a
// client trusts, names its node, and the files are the owner's alone;
// a second run replaces them.
func TestMake(t *testing.T) {
	dir := t.TempDir()
	// The last run's files, readable by all: the new ones replace them.
	for _, f := range []string{selfsigned.CAFile, selfsigned.TokenFile} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644))
	}
	cert, token, err := selfsigned.Make(dir, "broker-1")
	require.NoError(t, err)
	require.Len(t, token, 64)

	caPEM, err := os.ReadFile(filepath.Join(dir, selfsigned.CAFile))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		require.NoError(t, err, host)
	}
	_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"})
	require.Error(t, err)
	id, err := authhttp.NodeIdentity(cert.Leaf)
	require.NoError(t, err)
	require.Equal(t, "broker-1", id)

	got, err := os.ReadFile(filepath.Join(dir, selfsigned.TokenFile))
	require.NoError(t, err)
	require.Equal(t, token, got)
	for _, f := range []string{selfsigned.CAFile, selfsigned.TokenFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temporary file left behind")

	_, again, err := selfsigned.Make(dir, "broker-1")
	require.NoError(t, err)
	require.NotEqual(t, token, again, "a token per run")
}

// A file that cannot be written leaves nothing behind.
func TestReplaceFileFails(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "taken"), 0o700))
	require.Error(t, selfsigned.ReplaceFile(filepath.Join(dir, "taken"), []byte("x")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Error(t, selfsigned.ReplaceFile(filepath.Join(dir, "missing", "f"), []byte("x")))
}
