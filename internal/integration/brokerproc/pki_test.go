package brokerproc_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/lease/authority/authhttp"
)

// pki is a CA made for one test, and the certificates it signs, written
// as PEM files (mode 0600) to a directory of the test.
type pki struct {
	t      testing.TB
	dir    string
	ca     *x509.Certificate
	key    *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64
}

func newPKI(t testing.TB) *pki {
	p := &pki{t: t, dir: t.TempDir(), pool: x509.NewCertPool()}
	p.ca, p.key, _ = p.issue("ca", &x509.Certificate{Subject: pkix.Name{CommonName: "brokerproc test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	p.pool.AddCert(p.ca)
	return p
}

// caFile is the CA's certificate, what every process verifies its peers
// with.
func (p *pki) caFile() string { return filepath.Join(p.dir, "ca.pem") }

// issue signs tmpl (self-signed while there is no CA yet), writes
// name.pem and name.key, and returns the certificate, its key and the
// pair for a tls.Config.
func (p *pki) issue(name string, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, tls.Certificate) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(p.t, err)
	p.serial++
	tmpl.SerialNumber = big.NewInt(p.serial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	parent, signer := tmpl, key
	if p.ca != nil {
		parent, signer = p.ca, p.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	require.NoError(p.t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(p.t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, name+".pem"), certPEM, 0o600))
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, name+".key"), keyPEM, 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(p.t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(p.t, err)
	return cert, key, pair
}

// node issues a broker's certificate: its identity (the single URI SAN
// cutline://node/<name>) for the controller and its peers' pings, and the
// server name 127.0.0.1 of its API. It returns the flags naming it.
func (p *pki) node(name string) []string {
	p.issue(name, &x509.Certificate{Subject: pkix.Name{CommonName: name},
		URIs:        []*url.URL{{Scheme: authhttp.IdentityScheme, Host: authhttp.IdentityHost, Path: "/" + name}},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	return p.flags(name)
}

// controller issues the controller's server certificate for 127.0.0.1
// and returns the flags naming it.
func (p *pki) controller(name string) []string {
	p.issue(name, &x509.Certificate{Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return p.flags(name)
}

// client issues a client certificate that names no node, as a producer's
// would be.
func (p *pki) client(name string) tls.Certificate {
	_, _, pair := p.issue(name, &x509.Certificate{Subject: pkix.Name{CommonName: name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return pair
}

func (p *pki) flags(name string) []string {
	return []string{"-tls-cert", filepath.Join(p.dir, name+".pem"), "-tls-key", filepath.Join(p.dir, name+".key"), "-tls-ca", p.caFile()}
}

// tokenFile writes a random bearer token to a file only the owner reads,
// and returns the file and the token.
func (p *pki) tokenFile() (string, string) {
	var raw [32]byte
	_, err := rand.Read(raw[:])
	require.NoError(p.t, err)
	token := hex.EncodeToString(raw[:])
	file := filepath.Join(p.dir, "token")
	require.NoError(p.t, os.WriteFile(file, []byte(token+"\n"), 0o600))
	return file, token
}
