package authhttp

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
)

// RouteHealth is a node's end of its direct health links: POST, one
// round trip per ping.
const RouteHealth = "/v1/health"

// HealthOptions tunes a node's health handler. The zero value works.
type HealthOptions struct {
	// Identity maps a peer's verified certificate to its node name. Nil
	// means NodeIdentity.
	Identity func(*x509.Certificate) (string, error)
	// Logger receives refused pings (warn). Nil discards.
	Logger *slog.Logger
}

// NewHealthHandler returns the handler of RouteHealth for node, this
// node's identity. token returns the token this node's links are bound
// to now (the grant of the current holder, as its topology says:
// authority.Agent.HealthPeers). A ping is one round trip on the link
// between the authenticated peer and this node, bound to both identities
// and to a token: it is answered 200 only when the peer's token is this
// node's, 409 otherwise (a link of another grant), 403 for a request
// without a verified node certificate. Serve it under ServerTLS, whose
// certificate names this node.
func NewHealthHandler(node string, token func() authority.Token, opts HealthOptions) (http.Handler, error) {
	if node == "" {
		return nil, &cutline.ConfigError{Field: "node", Value: "", Reason: "required"}
	}
	if token == nil {
		return nil, &cutline.ConfigError{Field: "token", Value: nil, Reason: "required"}
	}
	if opts.Identity == nil {
		opts.Identity = NodeIdentity
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != RouteHealth {
			writeError(w, http.StatusNotFound, "not found", nil)
			return
		}
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
			writeError(w, http.StatusForbidden, "a verified client certificate is required", nil)
			return
		}
		if _, err := opts.Identity(r.TLS.PeerCertificates[0]); err != nil {
			opts.Logger.Warn("authhttp: health ping from an unknown identity", "err", err)
			writeError(w, http.StatusForbidden, "not a node", nil)
			return
		}
		tok, err := strconv.ParseUint(r.URL.Query().Get("token"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "token is not a decimal integer", nil)
			return
		}
		if mine := token(); authority.Token(tok) != mine {
			writeError(w, http.StatusConflict, fmt.Sprintf("%s's links are bound to token %d, not %d", node, mine, tok), nil)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), nil
}

// Pinger returns an authority.AgentOptions.Pinger that pings each peer at
// the base URL peers gives for it, through hc (carrying the node's
// ClientTLS). A ping completes only when the answering certificate names
// the peer meant and the peer's links are bound to the same token.
func Pinger(peers func(node string) (string, bool), hc *http.Client) func(ctx context.Context, peer string, token authority.Token) error {
	return func(ctx context.Context, peer string, token authority.Token) error {
		base, ok := peers(peer)
		if !ok {
			return fmt.Errorf("authhttp: no address for %s", peer)
		}
		u, err := baseURL(base)
		if err != nil {
			return err
		}
		u.Path = RouteHealth
		u.RawQuery = url.Values{"token": {strconv.FormatUint(uint64(token), 10)}}.Encode()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return &RequestError{Route: RouteHealth, Err: err}
		}
		defer resp.Body.Close()
		if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
			return &IdentityError{Reason: "the health answer came without TLS"}
		}
		if id, err := NodeIdentity(resp.TLS.PeerCertificates[0]); err != nil || id != peer {
			return &IdentityError{Subject: resp.TLS.PeerCertificates[0].Subject.String(), Reason: fmt.Sprintf("answered for %q, not %s", id, peer)}
		}
		if resp.StatusCode != http.StatusOK {
			return readError(RouteHealth, resp)
		}
		return nil
	}
}
