package node

import (
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/testpki"
)

// pki is the test's CA (testpki) with the broker's flags that name the
// certificates it issues, written as PEM files.
type pki struct {
	*testpki.CA
	dir string // where the PEM files are, the CA's ca.pem among them
}

func newPKI(t *testing.T) *pki {
	ca := testpki.New(t, "test CA")
	return &pki{CA: ca, dir: ca.Dir}
}

// node issues the certificate of a node (its identity URI SAN) that also
// serves on 127.0.0.1, and returns the flags naming it.
func (p *pki) node(name string) []string {
	certFile, keyFile := p.Files(name, p.Node(name))
	return []string{"-tls-cert", certFile, "-tls-key", keyFile, "-tls-ca", p.CAFile()}
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
	ctlSrv.TLS = authhttp.ServerTLS(p.sec.ca, p.sec.Cert)
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
	// In role all the controller serves broker-1's certificate.
	dial, closeIdle := remoteDialer(ctlSrv.URL, "broker-1", sec)
	t.Cleanup(closeIdle)
	n, err := NewNode(NodeConfig{
		Name: "broker-2", Domain: cfg.domain, Store: p.be.Store, Buckets: p.be.Zones,
		Constants: epoch.Constants{Class: "standard", W: cfg.W, Window: cfg.Window, Prefix: "streams"},
		Dial:      dial, SessionTTL: cfg.sessionTTL, HeartbeatEvery: cfg.heartbeat, DecisionDelay: cfg.decisionDelay,
		Poll: cfg.poll, Logger: log,
	})
	require.NoError(t, err)
	n.Start()
	t.Cleanup(func() { require.NoError(t, n.Shutdown(shutdownCtx(t))) })
	require.Eventually(t, func() bool { return n.link.Agent() != nil }, 10*time.Second, 10*time.Millisecond)
	api := httptest.NewServer(NewServer(n, ServerOptions{Logger: log}))
	t.Cleanup(api.Close)
	c := &apiClient{t: t, base: api.URL, hc: api.Client()}
	code, _, e := c.produce("orders", []byte("not yet"), "", 0)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "broker-1", e.Holder)

	// An operator's handoff: broker-1 drains in process, broker-2 gets
	// its grant over the network.
	require.Eventually(t, func() bool {
		return p.ctl.Driver().Step(t.Context(), authority.HandoffRequest{Target: "broker-2"}) == nil
	}, 10*time.Second, 20*time.Millisecond, "broker-2 is connected and promotable")
	waitHolding(t, n)
	code, a, e := c.produce("orders", []byte("over mutual TLS"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(0), a.Offset)
	require.Equal(t, []Consumed{{Offset: 0, Data: []byte("over mutual TLS")}}, c.consume("orders"))

	// A certificate of another CA gets nowhere.
	other := newPKI(t)
	bad, err := loadSecurity(testSettings(t, append([]string{"-insecure"}, other.node("broker-2")...)...), "", log)
	require.NoError(t, err)
	bad.ca = sec.ca // it trusts the server, the server does not trust it
	badDial, badClose := remoteDialer(ctlSrv.URL, "broker-1", bad)
	t.Cleanup(badClose)
	_, err = badDial(t.Context(), "broker-2", authority.Capabilities{Promotable: true}, 0)
	require.Error(t, err)

	// A controller that is not the one named: broker-1's certificate is
	// refused when the broker expects "ctl".
	posing, posingClose := remoteDialer(ctlSrv.URL, "ctl", sec)
	t.Cleanup(posingClose)
	_, err = posing(t.Context(), "broker-2", authority.Capabilities{Promotable: true}, 0)
	var ie *authhttp.IdentityError
	require.ErrorAs(t, err, &ie, "a node's certificate is not the controller's")
}
