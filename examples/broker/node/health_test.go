package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/epoch"
)

// Brokers given -peers vote and keep direct health links with each other
// on their APIs' TLS listeners: the holder pings the other voter, the
// other voter pings the holder, each ping authenticated by the node
// certificates on both ends and bound to the holder's token. The same
// listener serves the API to a client without a certificate, which the
// health route refuses.
func TestHealthLinks(t *testing.T) {
	c := newCluster(t)
	ca := newPKI(t)
	peers := map[string]string{} // filled before any node starts: read-only after
	type member struct {
		n   *Node
		api *apiClient
	}
	var members []member
	for _, name := range []string{"broker-1", "broker-2"} {
		cfg := testSettings(t, append([]string{"-insecure", "-node", name}, ca.node(name)...)...)
		sec, err := loadSecurity(cfg, "", c.log)
		require.NoError(t, err)
		pinger, closeIdle := healthPinger(peers, sec)
		t.Cleanup(closeIdle)
		n, err := NewNode(NodeConfig{
			Name: name, Domain: c.cfg.domain, Store: c.be.Store, Buckets: c.be.Zones,
			Constants: epoch.Constants{Class: "standard", W: c.cfg.W, Window: c.cfg.Window, Prefix: "streams"},
			Dial:      c.dial, SessionTTL: c.cfg.sessionTTL, HeartbeatEvery: c.cfg.heartbeat, DecisionDelay: c.cfg.decisionDelay,
			Poll: c.cfg.poll, Pinger: pinger, Logger: c.log.With("test_node", name),
		})
		require.NoError(t, err)
		require.True(t, n.caps.Vote, "a node with health links votes")
		srv := httptest.NewUnstartedServer(NewServer(n, ServerOptions{Logger: c.log}))
		srv.TLS = sec.APITLS()
		srv.StartTLS()
		t.Cleanup(srv.Close)
		peers[name] = srv.URL
		members = append(members, member{n: n, api: &apiClient{t: t, base: srv.URL, hc: clientWithoutCert(t, ca)}})
	}
	for _, m := range members {
		m.n.Start()
		t.Cleanup(func() { require.NoError(t, m.n.Shutdown(shutdownCtx(t))) })
	}
	var holder, other member
	require.Eventually(t, func() bool {
		for i, m := range members {
			if _, err := m.n.holder(); err == nil {
				holder, other = m, members[1-i]
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "nobody holds the grant")

	// Both links come up: the holder's to the other voter, the other's
	// to the holder, under the same token.
	for _, m := range []member{holder, other} {
		require.Eventually(t, func() bool {
			return m.api.metric("cutline_broker_health_links_up") == 1
		}, 10*time.Second, 20*time.Millisecond, "%s's health link never came up", m.n.Config.Name)
		require.Positive(t, m.api.metric(`cutline_broker_health_pings_total{result="ok"}`))
	}
	_, token := holder.n.link.Agent().HealthPeers()
	require.Equal(t, holder.n.link.Agent().Grant().Token, token, "the links are bound to the holder's grant")
	require.Equal(t, token, other.n.HealthToken())

	// The API on the same listener, to a client without a certificate.
	code, _, e := holder.api.produce("orders", []byte("x"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	code, _ = holder.api.do(http.MethodPost, "/v1/health?token=1", nil, nil, nil)
	require.Equal(t, http.StatusForbidden, code, "a ping needs a node certificate")

	// A broker whose certificate names another node does not start: its
	// peers' pings would never complete.
	cfg := testSettings(t, append([]string{"-insecure", "-node", "broker-3", "-peers", "broker-1=" + peers["broker-1"]}, ca.node("broker-4")...)...)
	_, err := loadSecurity(cfg, "", c.log)
	require.ErrorContains(t, err, "cutline://node/broker-3")
}

// dial connects a node to the cluster's controller in process.
func (c *cluster) dial(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
	return c.ctl.Local.Dial(node, caps, token)
}

// clientWithoutCert trusts the test CA and presents no certificate, as a
// producer does.
func clientWithoutCert(t *testing.T, ca *pki) *http.Client {
	raw, err := os.ReadFile(filepath.Join(ca.dir, "ca.pem"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(raw))
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
