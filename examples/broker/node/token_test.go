package node

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/lease"
)

// The broker judges a producer's fencing token (the Cutline-Fencing-Token
// header) by exact equality with the one installed on the stream: a
// truncated or an extended form of it is refused with 409 Conflict, on a
// stream the node has open (a one-shot append's CheckToken) as on one it
// opens for the request (Open), and nothing of theirs is appended; the
// installed token passes.
func TestProducerTokenForms(t *testing.T) {
	const tok = "producer-7f3a9c"
	forms := []string{tok[:len(tok)-1], tok[:1], tok + "0", tok + tok}

	n := newCluster(t).join("node-1")
	waitHolding(t, n.Node)
	h, err := n.holder()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), produceTimeout)
	defer cancel()
	// "open" is open on the node before its token is installed; "fresh" is
	// opened by the first produce that passes.
	code, _, e := n.api.produce("open", []byte("before the token"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	for _, stream := range []string{"open", "fresh"} {
		_, err := h.Star.Fence(ctx, stream, lease.Fenced, tok)
		require.NoError(t, err, "install the token on %s", stream)
	}
	// The record the installed token appends lands right after the one
	// produced before the token: no stale one landed in between.
	for _, s := range []struct {
		stream string
		want   uint64
	}{{"open", 1}, {"fresh", 0}} {
		stream := s.stream
		for _, bad := range forms {
			code, _ := n.api.do(http.MethodPost, "/v1/streams/"+stream+"/records", []byte("stale"), map[string]string{headerToken: bad}, nil)
			require.Equal(t, http.StatusConflict, code, "stream %s, token %q for the installed %q", stream, bad, tok)
		}
		var a Ack
		code, _ := n.api.do(http.MethodPost, "/v1/streams/"+stream+"/records", []byte("current"), map[string]string{headerToken: tok}, &a)
		require.Equal(t, http.StatusOK, code, "stream %s, the installed token", stream)
		require.Equal(t, s.want, a.Offset, "stream %s: the offset of the installed token's record", stream)
	}
}
