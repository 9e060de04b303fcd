package node

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	mode := lease.Mode(r.URL.Query().Get("mode"))
	switch mode {
	case "":
		mode = lease.Fenced
	case lease.Fenced, lease.Any:
	default:
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "mode: fenced (the default: every produce presents the token) or any (a produce without a token passes too)"})
		return
	}
	// The longest token, and a CRLF.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, lease.MaxTokenLen+2))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: fmt.Sprintf("a fencing token is at most %d bytes", lease.MaxTokenLen)})
			return
		}
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "reading the body: " + err.Error()})
		return
	}
	token := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if !validToken(w, "the body", token) {
		return
	}
	if mode == lease.Fenced && token == "" {
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "a fenced stream needs a token: send it as the body (or ?mode=any with an empty body removes the token)"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), produceTimeout)
	defer cancel()
	installed, err := s.n.installToken(ctx, name, mode, token)
	if errors.Is(err, metastore.ErrConflict) {
		writeJSON(w, http.StatusConflict, ErrorBody{Error: "the stream's token changed while this one was installed; read the answer of that install, or retry"})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, tokenAnswer{Stream: name, Mode: installed.Mode, Token: installed.Token})
}

// validToken answers 400 and reports false when token (from where) is not
// one lease accepts (lease.ValidateToken): at most lease.MaxTokenLen bytes
// of UTF-8 without control characters. The error never shows it.
func validToken(w http.ResponseWriter, where, token string) bool {
	if err := lease.ValidateToken(token); err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: fmt.Sprintf("%s: not a fencing token: %v", where, err)})
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
