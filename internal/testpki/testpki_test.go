package testpki_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/internal/testpki"
)

func verify(ca *testpki.CA, cert tls.Certificate, host string, usage x509.ExtKeyUsage) error {
	_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// Each kind of certificate verifies for what it is for, and only under
// its own CA.
func TestCertificates(t *testing.T) {
	ca := testpki.New(t, "test CA")
	require.True(t, ca.Cert.IsCA)

	srv := ca.Server("ctl")
	require.NoError(t, verify(ca, srv, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	require.NoError(t, verify(ca, srv, "::1", x509.ExtKeyUsageServerAuth))
	require.Error(t, verify(ca, srv, "", x509.ExtKeyUsageClientAuth), "a server's certificate is no client's")

	cli := ca.Client("ops")
	require.NoError(t, verify(ca, cli, "", x509.ExtKeyUsageClientAuth))
	require.Error(t, verify(ca, cli, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	_, err := authhttp.NodeIdentity(cli.Leaf)
	require.ErrorIs(t, err, authhttp.ErrIdentity, "a client without a node identity")

	node := ca.Node("node-a")
	require.NoError(t, verify(ca, node, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	require.NoError(t, verify(ca, node, "", x509.ExtKeyUsageClientAuth))
	name, err := authhttp.NodeIdentity(node.Leaf)
	require.NoError(t, err)
	require.Equal(t, "node-a", name)
	name, err = authhttp.NodeIdentity(ca.Client("x", "cutline://node/node-b").Leaf)
	require.NoError(t, err)
	require.Equal(t, "node-b", name)

	other := testpki.New(t, "another CA")
	require.Error(t, verify(other, node, "", x509.ExtKeyUsageClientAuth))
}

// Files writes a pair a process loads, and the CA's certificate is in
// CAFile.
func TestFiles(t *testing.T) {
	ca := testpki.New(t, "test CA")
	node := ca.Node("node-a")
	certFile, keyFile := ca.Files("node-a", node)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	require.Equal(t, node.Certificate, pair.Certificate)
	for _, f := range []string{certFile, keyFile} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	raw, err := os.ReadFile(ca.CAFile())
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(raw))
	_, err = node.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
}
