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
// token (lease.Star.Fence, which refuses an unknown mode and a fenced
// stream without a token): from its answer on, a produce passes only with
// that token in Cutline-Fencing-Token (in mode any, also without one). An
// empty body with mode any removes the token. Only the holder installs;
// another broker answers 503 naming it, as for a produce.
func (s *server) installToken(w http.ResponseWriter, r *http.Request) (any, error) {
	name, mode := r.PathValue("stream"), lease.Mode(cmp.Or(r.URL.Query().Get("mode"), string(lease.Fenced)))
	// The longest token, and a CRLF.
	raw, err := body(w, r, lease.MaxTokenLen+2, http.StatusBadRequest, fmt.Sprintf("a fencing token is at most %d bytes", lease.MaxTokenLen))
	token := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if err != nil {
		return nil, err
	} else if lease.ValidateToken(token) != nil {
		return nil, badToken("the body", token)
	}
	ctx, cancel := context.WithTimeout(r.Context(), produceTimeout)
	defer cancel()
	h, err := s.n.holder()
	if err == nil {
		_, err = h.app.Fence(ctx, name, mode, token)
	}
	if errors.Is(err, metastore.ErrConflict) {
		return nil, &httpError{http.StatusConflict, "the stream's token changed while this one was installed; retry"}
	} else if err != nil {
		return nil, err
	}
	// Fence installed exactly this, by compare-and-set.
	return tokenAnswer{Stream: name, Mode: mode, Token: token}, nil
}

// badToken refuses a token (from where) that lease does not accept; the
// error never shows it.
func badToken(where, token string) error {
	return badRequest("%s: not a fencing token: %v", where, lease.ValidateToken(token))
}
