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

// tokenAnswer is the answer of PUT /v1/streams/{stream}/token.
type tokenAnswer struct {
	Stream string     `json:"stream"`
	Mode   lease.Mode `json:"mode"`
	Token  string     `json:"token"`
}

// installToken: PUT /v1/streams/{stream}/token?mode=fenced|any installs
// the body (one trailing newline aside) as the stream's producer fencing
// token (lease.Star.Fence): from its answer on, a produce passes only
// with that token in Cutline-Fencing-Token (in mode any, also without
// one). An empty body with mode any removes the token. Only the holder
// installs; another broker answers 503 naming it, as for a produce.
func (s *server) installToken(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("stream")
	mode := lease.Mode(cmp.Or(r.URL.Query().Get("mode"), string(lease.Fenced)))
	if mode != lease.Fenced && mode != lease.Any {
		return nil, badRequest("mode: fenced (the default: every produce presents the token) or any (a produce without a token passes too)")
	}
	// The longest token, and a CRLF.
	raw, err := body(w, r, lease.MaxTokenLen+2, http.StatusBadRequest, fmt.Sprintf("a fencing token is at most %d bytes", lease.MaxTokenLen))
	token := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	switch {
	case err != nil:
		return nil, err
	case lease.ValidateToken(token) != nil:
		return nil, badToken("the body", token)
	case mode == lease.Fenced && token == "":
		return nil, badRequest("a fenced stream needs a token: send it as the body (or ?mode=any with an empty body removes the token)")
	}
	ctx, cancel := context.WithTimeout(r.Context(), produceTimeout)
	defer cancel()
	installed, err := s.n.installToken(ctx, name, mode, token)
	if errors.Is(err, metastore.ErrConflict) {
		return nil, &httpError{http.StatusConflict, "the stream's token changed while this one was installed; read the answer of that install, or retry"}
	} else if err != nil {
		return nil, err
	}
	return tokenAnswer{Stream: name, Mode: installed.Mode, Token: installed.Token}, nil
}

// badToken refuses a token (from where) that lease does not accept; the
// error never shows it.
func badToken(where, token string) error {
	return badRequest("%s: not a fencing token: %v", where, lease.ValidateToken(token))
}

// installToken installs token on stream and returns the stream's token as
// installed. Only the holder does.
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

// installToken runs the Fence verb with no submit in between (a stream
// the star holds is left and opened again under the new token). It counts
// the install before it lets submits go on, so that a produce judged
// under the old token is judged again (errTokenInstalled) rather than
// appended after the install was answered.
func (h *Holding) installToken(ctx context.Context, stream string, mode lease.Mode, token string) error {
	h.submitMu.Lock()
	defer h.submitMu.Unlock()
	defer h.tokenInstalls.Add(1)
	_, err := h.Star.Fence(ctx, stream, mode, token)
	return err
}

var errTokenInstalled = errors.New("broker: a fencing token was installed since the produce's token was judged")
