package authhttp_test

import (
	"crypto/x509"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/internal/testpki"
)

func TestNodeIdentity(t *testing.T) {
	ca := testpki.New(t, "identity CA")
	for _, tc := range []struct {
		uris []string
		want string // "" when refused
	}{
		{[]string{"cutline://node/node-a"}, "node-a"},
		{[]string{"cutline://node/Node_1.b"}, "Node_1.b"},
		{nil, ""},
		{[]string{"cutline://node/node-a", "cutline://node/node-a"}, ""},
		{[]string{"cutline://operator/node-a"}, ""},
		{[]string{"spiffe://node/node-a"}, ""},
		{[]string{"cutline://node:1/node-a"}, ""},
		{[]string{"cutline://user@node/node-a"}, ""},
		{[]string{"cutline://node/node-a?x=1"}, ""},
		{[]string{"cutline://node/node-a#x"}, ""},
		{[]string{"cutline://node/"}, ""},
		{[]string{"cutline://node"}, ""},
		{[]string{"cutline://node/a/b"}, ""},
		{[]string{"cutline://node/-a"}, ""},
		{[]string{"cutline://node/a%2Fb"}, ""},
	} {
		cert := ca.Client("n", tc.uris...).Leaf
		got, err := authhttp.NodeIdentity(cert)
		if tc.want == "" {
			require.ErrorIs(t, err, authhttp.ErrIdentity, "%v", tc.uris)
			var ie *authhttp.IdentityError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "CN=n", ie.Subject)
			continue
		}
		require.NoError(t, err, "%v", tc.uris)
		require.Equal(t, tc.want, got)
	}
	_, err := authhttp.NodeIdentity(nil)
	require.ErrorIs(t, err, authhttp.ErrIdentity)
}

// ServerOptions.Identity replaces the rule: here, operators are named by
// their certificate's common name.
func TestCustomIdentity(t *testing.T) {
	ident := func(c *x509.Certificate) (string, error) {
		if c.Subject.CommonName == "admin" {
			return "admin@ops", nil
		}
		if len(c.URIs) == 0 {
			return "", errors.New("no identity")
		}
		return authhttp.NodeIdentity(c)
	}
	e := newEnv(t, authhttp.ServerOptions{Identity: ident, Operators: []string{"admin@ops"}})
	a := e.dial("node-a", promotable, 0)
	b := e.dial("node-b", promotable, 0)
	e.grant(a, "node-a")
	admin := e.clientWith(authhttp.ClientTLS(e.ca.Pool, e.ca.Client("admin")))
	require.NoError(t, authhttp.Post(e.ctx, e.ts.URL, authority.HandoffRequest{Target: "node-b"}, admin.hc))
	recvMsg(t, a.Msgs(), kind(authority.MsgRelease, 1))
	require.NoError(t, a.Send(e.ctx, authority.Released{Node: "node-a", Token: 1}))
	recvMsg(t, b.Msgs(), kind(authority.MsgGrant, 2))
	// The operator's identity is no node name: no stream.
	_, err := authhttp.Dial(e.ctx, e.ts.URL, "admin", promotable, 0, admin.hc)
	require.ErrorIs(t, err, authhttp.ErrForbidden)
}
