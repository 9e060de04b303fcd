package authhttp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/cutline/cutline/epoch"
)

// A node's certificate carries exactly one URI SAN,
// cutline://node/<name>.
const (
	// IdentityScheme is the identity URI's scheme.
	IdentityScheme = "cutline"
	// IdentityHost is the identity URI's host.
	IdentityHost = "node"
)

// NodeIdentity is ServerOptions.Identity's default: the name in the
// certificate's single URI SAN of the form cutline://node/<name>, where
// <name> passes epoch.ValidateName. Anything else (no URI SAN, several,
// another scheme or host, a user, port, query or fragment, a nested path,
// an invalid name) is a *IdentityError.
func NodeIdentity(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", &IdentityError{Reason: "no certificate"}
	}
	refuse := func(format string, args ...any) (string, error) {
		return "", &IdentityError{Subject: cert.Subject.String(), Reason: fmt.Sprintf(format, args...)}
	}
	if n := len(cert.URIs); n != 1 {
		return refuse("has %d URI SANs, want exactly one %s://%s/<name>", n, IdentityScheme, IdentityHost)
	}
	u := cert.URIs[0]
	switch {
	case u.Scheme != IdentityScheme || u.Host != IdentityHost:
		return refuse("URI SAN %q is not %s://%s/<name>", u.Redacted(), IdentityScheme, IdentityHost)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" || u.RawPath != "":
		return refuse("URI SAN %q has more than a name", u.Redacted())
	case !strings.HasPrefix(u.Path, "/"):
		return refuse("URI SAN %q names no node", u.Redacted())
	}
	name := u.Path[1:]
	if err := epoch.ValidateName("node", name); err != nil {
		return refuse("URI SAN %q: %v", u.Redacted(), err)
	}
	return name, nil
}

// ServerTLS returns the server side of the mutual TLS the transport
// requires: TLS 1.3 at least, cert as the server's certificate, and every
// client certificate required and verified against ca (for client
// authentication). A nil ca trusts nothing: every client is refused,
// never checked against the system's roots.
func ServerTLS(ca *x509.CertPool, cert tls.Certificate) *tls.Config {
	if ca == nil {
		ca = x509.NewCertPool()
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    ca,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}

// ClientTLS returns the client side: TLS 1.3 at least, the server
// verified against ca, cert presented as the client's identity (an empty
// cert presents none: the server refuses the handshake). A nil ca
// trusts nothing, never the system's roots. Put it in the
// http.Transport's TLSClientConfig of the client given to Dial and Post.
func ClientTLS(ca *x509.CertPool, cert tls.Certificate) *tls.Config {
	if ca == nil {
		ca = x509.NewCertPool()
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca}
	if len(cert.Certificate) > 0 {
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}
