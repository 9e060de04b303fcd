package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
)

// tokenAnswer is the answer of PUT /v1/streams/{stream}/token: the
// stream's installed producer fencing token and its mode.
type tokenAnswer struct {
	Stream string     `json:"stream"`
	Mode   lease.Mode `json:"mode"`
	Token  string     `json:"token"`
}

// installToken: PUT /v1/streams/{stream}/token?mode=fenced|any installs
// the body as the stream's producer fencing token (lease.Star.Fence), so
// that from its answer on a produce passes only with that token in
// Cutline-Fencing-Token (in mode any, also without one). The body is the
// token itself, one trailing newline aside; an empty one with mode any
// removes the token. Only the holder installs; another broker answers
// 503 naming it, as a produce does.
func (s *server) installToken(w http.ResponseWriter, r *http.Request) {
	name, ok := stream(w, r)
	if !ok {
		return
	}
	mode := lease.Mode(cmp.Or(r.URL.Query().Get("mode"), string(lease.Fenced)))
	if mode != lease.Fenced && mode != lease.Any {
		writeError(w, http.StatusBadRequest, "mode: fenced (the default: every produce presents the token) or any (a produce without a token passes too)")
		return
	}
	// The longest token, and a CRLF.
	raw, ok := body(w, r, lease.MaxTokenLen+2, http.StatusBadRequest, fmt.Sprintf("a fencing token is at most %d bytes", lease.MaxTokenLen))
	if !ok {
		return
	}
	token := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if !validToken(w, "the body", token) {
		return
	}
	if mode == lease.Fenced && token == "" {
		writeError(w, http.StatusBadRequest, "a fenced stream needs a token: send it as the body (or ?mode=any with an empty body removes the token)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), produceTimeout)
	defer cancel()
	installed, err := s.n.installToken(ctx, name, mode, token)
	switch {
	case errors.Is(err, metastore.ErrConflict):
		writeError(w, http.StatusConflict, "the stream's token changed while this one was installed; read the answer of that install, or retry")
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, tokenAnswer{Stream: name, Mode: installed.Mode, Token: installed.Token})
	}
}

// validToken answers 400 and reports false when token (from where) is not
// one lease accepts (lease.ValidateToken): at most lease.MaxTokenLen bytes
// of UTF-8 without control characters. The error never shows it.
func validToken(w http.ResponseWriter, where, token string) bool {
	if err := lease.ValidateToken(token); err != nil {
		writeError(w, http.StatusBadRequest, "%s: not a fencing token: %v", where, err)
		return false
	}
	return true
}

// installToken installs token on stream and returns the stream's token as
// installed. Only the holder does: another node's answer is the error
// holder gives (503 naming the holder).
func (n *Node) installToken(ctx context.Context, stream string, mode lease.Mode, token string) (*lease.TokenRecord, error) {
	h, err := n.holder()
	if err != nil {
		return nil, err
	}
	if err := h.installToken(ctx, stream, mode, token); err != nil {
		return nil, err
	}
	return h.Star.ReadToken(ctx, stream)
}

// installToken runs the Fence verb with no submit in between: a stream
// the star holds is left and opened again under the new token. It counts
// the install (tokenInstalls) before it lets submits go on, so that a
// produce judged under the old token is judged again (errTokenInstalled)
// rather than appended after the install was answered.
func (h *Holding) installToken(ctx context.Context, stream string, mode lease.Mode, token string) error {
	h.submitMu.Lock()
	defer h.submitMu.Unlock()
	defer h.tokenInstalls.Add(1)
	_, err := h.Star.Fence(ctx, stream, mode, token)
	return err
}

// errTokenInstalled is a produce whose token was judged before a token
// install the holder made since: it is judged again.
var errTokenInstalled = errors.New("broker: a fencing token was installed since the produce's token was judged")
