// Package selfsigned makes the credentials of a process that runs on its
// own for a try: a self-signed certificate for the loopback names, which
// names its node the way authority/authhttp reads it, and a random bearer
// token, written to files readable by their owner only.
package selfsigned

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
	"time"

	"github.com/cutline/cutline/authority/authhttp"
)

// Files under the directory Make writes to.
const (
	CAFile    = "ca.pem" // the certificate, what a client trusts
	TokenFile = "token"  // the bearer token
)

// Validity is how long a certificate Make makes is valid, from an hour
// before now.
const Validity = 7 * 24 * time.Hour

// Make makes a self-signed certificate for localhost, 127.0.0.1 and ::1
// that names node (the URI SAN cutline://node/<node>, as
// authhttp.NodeIdentity reads it), and a random 256-bit token in hex; it
// writes the certificate to dir/CAFile and the token to dir/TokenFile,
// both readable by the owner only, in place of what was there.
func Make(dir, node string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "cutline " + node + " (this run)"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		URIs:        []*url.URL{{Scheme: authhttp.IdentityScheme, Host: authhttp.IdentityHost, Path: "/" + node}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return tls.Certificate{}, nil, err
	}
	token := []byte(hex.EncodeToString(raw[:]))
	if err := ReplaceFile(filepath.Join(dir, CAFile), certPEM); err != nil {
		return tls.Certificate{}, nil, err
	}
	if err := ReplaceFile(filepath.Join(dir, TokenFile), token); err != nil {
		return tls.Certificate{}, nil, err
	}
	return cert, token, nil
}

// ReplaceFile writes data to path, readable by the owner only, in place
// of what was there: a reader never sees half of it, and the file's mode
// is the new one, whatever the old one's.
func ReplaceFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
