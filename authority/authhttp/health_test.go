package authhttp_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/internal/testpki"
)

// A direct health link: a round trip completes only between the nodes
// named by the certificates on both ends and under one token.
func TestHealthLinks(t *testing.T) {
	ca := testpki.New(t, "cutline test CA")
	var tokenB atomic.Uint64
	tokenB.Store(3)
	hb, err := authhttp.NewHealthHandler("node-b", func() authority.Token { return authority.Token(tokenB.Load()) }, authhttp.HealthOptions{})
	require.NoError(t, err)
	serve := func(name string) *httptest.Server {
		srv := httptest.NewUnstartedServer(hb)
		srv.TLS = authhttp.ServerTLS(ca.Pool, ca.Server(name, "cutline://node/"+name))
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	b := serve("node-b")
	impostor := serve("node-x") // answers for node-x, at the address a believes is node-b's
	client := func(cert tls.Certificate) *http.Client {
		tr := &http.Transport{TLSClientConfig: authhttp.ClientTLS(ca.Pool, cert)}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	a := client(ca.Client("node-a", "cutline://node/node-a"))
	addr := map[string]string{"node-b": b.URL}
	ping := authhttp.Pinger(func(n string) (string, bool) { u, ok := addr[n]; return u, ok }, a)

	require.NoError(t, ping(t.Context(), "node-b", 3), "same token: the round trip completes")
	require.Error(t, ping(t.Context(), "node-b", 2), "another token: no round trip")
	require.Error(t, ping(t.Context(), "node-c", 3), "no address")
	addr["node-b"] = impostor.URL
	require.ErrorIs(t, ping(t.Context(), "node-b", 3), authhttp.ErrIdentity, "the answering certificate names another node")
	addr["node-b"] = b.URL
	tokenB.Store(4)
	require.Error(t, ping(t.Context(), "node-b", 3), "node-b moved to the next grant")
	// A peer without a node identity is refused.
	other := authhttp.Pinger(func(string) (string, bool) { return b.URL, true }, client(ca.Client("ops")))
	require.Error(t, other(t.Context(), "node-b", 4))
}

// The handler needs its node and its token, each named on its own when
// missing.
func TestHealthHandlerOptions(t *testing.T) {
	token := func() authority.Token { return 1 }
	for _, tc := range []struct {
		field, node string
		token       func() authority.Token
	}{
		{"node", "", token},
		{"token", "node-a", nil},
	} {
		_, err := authhttp.NewHealthHandler(tc.node, tc.token, authhttp.HealthOptions{})
		require.ErrorIs(t, err, cutline.ErrInvalid, tc.field)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, tc.field)
		require.Equal(t, tc.field, ce.Field)
	}
}
