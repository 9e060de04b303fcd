// Package testpki is a certificate authority for tests: a CA made for one
// test, the certificates it signs (a server's on the loopback addresses, a
// client's, a node's named by the identity URI of authority/authhttp)
// and PEM files of them for a process that reads its certificates from
// files. It is internal: it is test scaffolding, shared by the packages of
// this repository and its nested modules, not an API.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cutline/cutline/authority/authhttp"
)

// CA is a certificate authority made for one test. Its certificates are
// valid from an hour before it was made to an hour after. Its methods are
// safe for concurrent use; any failure fails the test.
type CA struct {
	// Cert is the CA's certificate, and Pool holds it: what a peer
	// verifies the CA's certificates with.
	Cert *x509.Certificate
	Pool *x509.CertPool
	// Dir is the test's directory of PEM files: ca.pem, the CA's
	// certificate, and those Files writes.
	Dir string

	t      testing.TB
	key    *ecdsa.PrivateKey
	mu     sync.Mutex
	serial int64
}

// New makes a CA whose certificate names name, and writes it to Dir/ca.pem.
func New(t testing.TB, name string) *CA {
	t.Helper()
	ca := &CA{t: t, Dir: t.TempDir(), Pool: x509.NewCertPool()}
	self := ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	ca.Cert, ca.key = self.Leaf, self.PrivateKey.(*ecdsa.PrivateKey)
	ca.Pool.AddCert(ca.Cert)
	ca.write("ca.pem", "CERTIFICATE", ca.Cert.Raw)
	return ca
}

// Server returns a certificate for a server on 127.0.0.1 and ::1, named
// cn, with the URI SANs uris.
func (ca *CA) Server(cn string, uris ...string) tls.Certificate {
	ca.t.Helper()
	return ca.leaf(cn, uris, x509.ExtKeyUsageServerAuth)
}

// Client returns a client certificate named cn, with the URI SANs uris.
func (ca *CA) Client(cn string, uris ...string) tls.Certificate {
	ca.t.Helper()
	return ca.leaf(cn, uris, x509.ExtKeyUsageClientAuth)
}

// Node returns the certificate of the node name: its identity, the single
// URI SAN cutline://node/<name> (authhttp.NodeIdentity), for the
// controller and its peers, and a server's on 127.0.0.1 and ::1 for its
// own listener.
func (ca *CA) Node(name string) tls.Certificate {
	ca.t.Helper()
	u := url.URL{Scheme: authhttp.IdentityScheme, Host: authhttp.IdentityHost, Path: "/" + name}
	return ca.leaf(name, []string{u.String()}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// Files writes cert's certificate and key as PEM files name.pem and
// name.key (mode 0600) in Dir, and returns their paths.
func (ca *CA) Files(name string, cert tls.Certificate) (certFile, keyFile string) {
	ca.t.Helper()
	kder, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		ca.t.Fatalf("testpki: the key of %s: %v", name, err)
	}
	return ca.write(name+".pem", "CERTIFICATE", cert.Certificate[0]), ca.write(name+".key", "EC PRIVATE KEY", kder)
}

// CAFile is the path of the CA's certificate, Dir/ca.pem.
func (ca *CA) CAFile() string { return filepath.Join(ca.Dir, "ca.pem") }

func (ca *CA) leaf(cn string, uris []string, usage ...x509.ExtKeyUsage) tls.Certificate {
	ca.t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage}
	for _, u := range usage {
		if u == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			ca.t.Fatalf("testpki: URI SAN %q: %v", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return ca.sign(tmpl)
}

// sign signs tmpl with the CA's key, or with its own while the CA has
// none (the CA's certificate itself), and returns it with its key.
func (ca *CA) sign(tmpl *x509.Certificate) tls.Certificate {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatalf("testpki: %v", err)
	}
	ca.mu.Lock()
	ca.serial++
	tmpl.SerialNumber = big.NewInt(ca.serial)
	ca.mu.Unlock()
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
	parent, signer := tmpl, key
	if ca.Cert != nil {
		parent, signer = ca.Cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		ca.t.Fatalf("testpki: sign %s: %v", tmpl.Subject.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		ca.t.Fatalf("testpki: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// write writes one PEM block to Dir/name (mode 0600) and returns its path.
func (ca *CA) write(name, typ string, der []byte) string {
	ca.t.Helper()
	path := filepath.Join(ca.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatalf("testpki: %v", err)
	}
	return path
}
