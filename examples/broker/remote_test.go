package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	stdlog "log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease/authority"
	"github.com/cutline/cutline/lease/authority/authhttp"
)

// pki makes a CA and certificates it signs, as PEM files in a directory.
type pki struct {
	t    *testing.T
	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func newPKI(t *testing.T) *pki {
	p := &pki{t: t, dir: t.TempDir()}
	p.ca, p.key = p.issue("ca.pem", "ca.key", &x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	return p
}

// issue signs tmpl (self-signed when there is no CA yet) and writes the
// certificate and its key.
func (p *pki) issue(certFile, keyFile string, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(p.t, err)
	p.next++
	tmpl.SerialNumber = big.NewInt(p.next)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	parent, signer := tmpl, key
	if p.ca != nil {
		parent, signer = p.ca, p.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	require.NoError(p.t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(p.t, err)
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(p.t, err)
	return cert, key
}

// node issues the certificate of a node (its identity URI SAN) that also
// serves on 127.0.0.1, and returns the flags naming it.
func (p *pki) node(name string) []string {
	p.issue(name+".pem", name+".key", &x509.Certificate{Subject: pkix.Name{CommonName: name},
		URIs:        []*url.URL{{Scheme: authhttp.IdentityScheme, Host: authhttp.IdentityHost, Path: "/" + name}},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	return []string{"-tls-cert", filepath.Join(p.dir, name+".pem"), "-tls-key", filepath.Join(p.dir, name+".key"), "-tls-ca", filepath.Join(p.dir, "ca.pem")}
}

// A broker of another process joins the embedded controller over mutual
// TLS (-controller-listen; authhttp.Dial, as -role broker does), takes the
// grant over in a handoff, and serves the stream.
func TestRemoteBroker(t *testing.T) {
	ca := newPKI(t)
	log := slog.New(slog.DiscardHandler)
	cfg := testSettings(t, append([]string{"-insecure", "-controller-listen", "127.0.0.1:0"}, ca.node("broker-1")...)...)
	p, err := start(t.Context(), cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.shutdown(shutdownCtx(t))) })
	require.NotNil(t, p.ctl.srv)
	ctlSrv := httptest.NewUnstartedServer(p.ctl.srv)
	ctlSrv.TLS = authhttp.ServerTLS(p.sec.ca, p.sec.cert)
	ctlSrv.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the refused handshake below
	ctlSrv.StartTLS()
	t.Cleanup(ctlSrv.Close)
	t.Cleanup(p.ctl.srv.Close)
	waitHolding(t, p.node)

	// The remote broker's process: its own certificate, the same
	// metastore and zones (as etcd and S3 would be).
	rcfg := testSettings(t, append([]string{"-insecure"}, ca.node("broker-2")...)...)
	sec, err := loadSecurity(rcfg, "", log)
	require.NoError(t, err)
	dial, closeIdle := remoteDialer(ctlSrv.URL, sec)
	t.Cleanup(closeIdle)
	n, err := newNode(nodeConfig{
		Name: "broker-2", Domain: cfg.domain, Store: p.be.store, Buckets: p.be.zones,
		Constants: epoch.Constants{Class: "standard", W: cfg.w, Window: cfg.window, Prefix: "streams"},
		Dial:      dial, SessionTTL: cfg.sessionTTL, HeartbeatEvery: cfg.heartbeat, DecisionDelay: cfg.decisionDelay,
		OpenWait: cfg.openWait, Poll: cfg.poll, Logger: log,
	})
	require.NoError(t, err)
	n.start()
	t.Cleanup(func() { require.NoError(t, n.shutdown(shutdownCtx(t))) })
	require.Eventually(t, func() bool { return n.agent.Load() != nil }, 10*time.Second, 10*time.Millisecond)
	api := httptest.NewServer(newServer(n, serverOptions{Logger: log}))
	t.Cleanup(api.Close)
	c := &apiClient{t: t, base: api.URL, hc: api.Client()}
	code, _, e := c.produce("orders", []byte("not yet"), "", 0)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "broker-1", e.Holder)

	// An operator's handoff: broker-1 drains in process, broker-2 gets
	// its grant over the network.
	require.Eventually(t, func() bool {
		return p.ctl.driver().Step(t.Context(), authority.HandoffRequest{Target: "broker-2"}) == nil
	}, 10*time.Second, 20*time.Millisecond, "broker-2 is connected and promotable")
	waitHolding(t, n)
	code, a, e := c.produce("orders", []byte("over mutual TLS"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(0), a.Offset)
	require.Equal(t, []consumed{{Offset: 0, Data: []byte("over mutual TLS")}}, c.consume("orders"))

	// A certificate of another CA gets nowhere.
	other := newPKI(t)
	bad, err := loadSecurity(testSettings(t, append([]string{"-insecure"}, other.node("broker-2")...)...), "", log)
	require.NoError(t, err)
	bad.ca = sec.ca // it trusts the server, the server does not trust it
	badDial, badClose := remoteDialer(ctlSrv.URL, bad)
	t.Cleanup(badClose)
	_, err = badDial(t.Context(), "broker-2", authority.Capabilities{Promotable: true}, 0)
	require.Error(t, err)
}
