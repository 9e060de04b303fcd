package brokerproc_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testpki"
)

// pki is the test's CA (testpki) with the broker's flags that name the
// certificates it issues, written as PEM files, and the bearer token of
// the test's producer.
type pki struct {
	*testpki.CA
	t testing.TB
	// pool holds the CA's certificate: what every process verifies its
	// peers with.
	pool *x509.CertPool
}

func newPKI(t testing.TB) *pki {
	ca := testpki.New(t, "brokerproc test CA")
	return &pki{CA: ca, t: t, pool: ca.Pool}
}

// node issues a broker's certificate: its identity (the single URI SAN
// cutline://node/<name>) for the controller and its peers' pings, and the
// server name 127.0.0.1 of its API. It returns the flags naming it.
func (p *pki) node(name string) []string { return p.flags(name, p.Node(name)) }

// controller issues the controller's certificate: its identity, which
// the brokers check (-controller-identity), and the server name
// 127.0.0.1. It returns the flags naming it.
func (p *pki) controller(name string) []string { return p.flags(name, p.Node(name)) }

// client issues a client certificate that names no node, as a producer's
// would be.
func (p *pki) client(name string) tls.Certificate { return p.Client(name) }

func (p *pki) flags(name string, cert tls.Certificate) []string {
	certFile, keyFile := p.Files(name, cert)
	return []string{"-tls-cert", certFile, "-tls-key", keyFile, "-tls-ca", p.CAFile()}
}

// tokenFile writes a random bearer token to a file only the owner reads,
// and returns the file and the token.
func (p *pki) tokenFile() (string, string) {
	var raw [32]byte
	_, err := rand.Read(raw[:])
	require.NoError(p.t, err)
	token := hex.EncodeToString(raw[:])
	file := filepath.Join(p.Dir, "token")
	require.NoError(p.t, os.WriteFile(file, []byte(token+"\n"), 0o600))
	return file, token
}
