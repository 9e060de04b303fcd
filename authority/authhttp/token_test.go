package authhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
)

// bigToken has decimal prefixes and low bits that are tokens too: a
// comparison by prefix (of the wire's decimal text, say) or of truncated
// integers would take one of its variants for it.
const bigToken = authority.Token(1<<32 | 12) // 4294967308

// variants are bigToken presented truncated or extended.
func variants(tok authority.Token) []authority.Token {
	return []authority.Token{tok / 10, tok*10 + 8, tok & 0xffffffff, tok | 1<<40}
}

// Over the wire, a truncated or extended form of the holder's token is
// not it: a stream claiming it does not resume the grant (an older one is
// revoked, a newer one refused as never issued), a Connect sent on the
// holder's stream claiming it is refused, and so is a heartbeat.
func TestStreamTokenTruncatedOrExtended(t *testing.T) {
	e := newEnvAt(t, authhttp.ServerOptions{}, authority.StateRecord{Phase: authority.Granted, Holder: "node-a", Token: bigToken})
	hc := e.client("node-a").hc
	var replaced []authority.Conn
	for _, v := range variants(bigToken) {
		conn, err := authhttp.Dial(e.ctx, e.ts.URL, "node-a", promotable, v, hc)
		if v > bigToken {
			require.ErrorIs(t, err, authority.ErrRefused, "a stream claiming %d, never issued", v)
			continue
		}
		require.NoError(t, err)
		replaced = append(replaced, conn)
		m := recvMsg(t, conn.Msgs(), func(m authority.Msg) bool {
			require.NotEqual(t, authority.MsgGrant, m.Kind(), "the grant of %d was resumed under %d", bigToken, v)
			return m.Kind() == authority.MsgRevoke
		})
		require.Equal(t, v, msgToken(m))
	}
	a := e.dial("node-a", promotable, bigToken)
	recvMsg(t, a.Msgs(), kind(authority.MsgGrant, bigToken))
	for _, c := range replaced {
		require.NoError(t, c.Close(), "the goodbye of a replaced stream closes nothing")
	}
	require.Equal(t, authority.Granted, e.d.State().Phase)

	require.NoError(t, a.Send(e.ctx, authority.Connect{Node: "node-a", Caps: promotable, Token: bigToken}))
	for _, v := range variants(bigToken) {
		require.ErrorIs(t, a.Send(e.ctx, authority.Connect{Node: "node-a", Caps: promotable, Token: v}), cutline.ErrInvalid, "the stream declared %d, not %d", bigToken, v)
		require.ErrorIs(t, a.Send(e.ctx, authority.Heartbeat{Node: "node-a", Token: v}), authority.ErrRefused, "a heartbeat under %d", v)
	}
	require.NoError(t, a.Send(e.ctx, authority.Heartbeat{Node: "node-a", Token: bigToken}))
}

// A health link answers only under its exact token.
func TestHealthTokenTruncatedOrExtended(t *testing.T) {
	e := newEnv(t, authhttp.ServerOptions{})
	h, err := authhttp.NewHealthHandler("node-b", func() authority.Token { return bigToken }, authhttp.HealthOptions{})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = authhttp.ServerTLS(e.ca.Pool, e.ca.Node("node-b"))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := &http.Transport{TLSClientConfig: authhttp.ClientTLS(e.ca.Pool, e.ca.Node("node-a"))}
	t.Cleanup(tr.CloseIdleConnections)
	ping := authhttp.Pinger(func(string) (string, bool) { return srv.URL, true }, &http.Client{Transport: tr})
	require.NoError(t, ping(e.ctx, "node-b", bigToken))
	for _, v := range variants(bigToken) {
		err := ping(e.ctx, "node-b", v)
		var se *authhttp.StatusError
		require.ErrorAs(t, err, &se, fmt.Sprint(v))
		require.Equal(t, http.StatusConflict, se.Code, "a ping under %d", v)
	}
}
