package authhttp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/epoch"
)

// msgBuffer is how many decoded messages a connection holds for its
// reader.
const msgBuffer = 16

// DefaultMaxMessage is Dialer.MaxMessage's default: far above any message
// the controller sends (a topology of a few thousand voters), far below
// what would let a stream exhaust a node's memory.
const DefaultMaxMessage = 256 << 10

// Dialer opens nodes' control channels to the controller served at Base,
// and takes orders only from the controller it names. Base and Client
// are required. Its methods are safe for concurrent use.
type Dialer struct {
	// Base is the controller's URL: https://host:port, with an optional
	// path prefix.
	Base string
	// Client carries the node's TLS configuration (ClientTLS). Do not set
	// its Timeout, which would cut the stream short: bound requests with
	// the transport's timeouts instead (dial, TLS handshake, response
	// headers), which also bound Close's goodbye.
	Client *http.Client
	// Controller is the identity the controller's certificate must name,
	// as Identity reads it: every answer, the stream's first, is refused
	// with a *IdentityError unless it comes from that certificate. Empty
	// accepts any certificate the CA verifies, a node's among them: set it
	// wherever the CA signs certificates for others than the controller.
	Controller string
	// Identity maps the controller's verified certificate to its identity.
	// Nil means NodeIdentity.
	Identity func(*x509.Certificate) (string, error)
	// MaxMessage bounds one message of the stream, in bytes: a longer one
	// ends the stream (the node reconnects), and is never held in memory
	// whole. 0 means DefaultMaxMessage; between 1 KiB and 64 MiB.
	MaxMessage int
}

func (d *Dialer) check() (*url.URL, error) {
	u, err := baseURL(d.Base)
	if err != nil {
		return nil, err
	}
	if d.Client == nil {
		return nil, &cutline.ConfigError{Field: "Client", Value: nil, Reason: "required: it carries the client certificate"}
	}
	if d.MaxMessage != 0 && (d.MaxMessage < 1<<10 || d.MaxMessage > 64<<20) {
		return nil, &cutline.ConfigError{Field: "MaxMessage", Value: d.MaxMessage, Reason: "must lie in [1KiB, 64MiB] (0 means the default)"}
	}
	return u, nil
}

// verify refuses an answer that does not come from the controller: one
// without a certificate the client verified, or, when Controller is set,
// whose certificate names another identity.
func (d *Dialer) verify(route string, resp *http.Response) error {
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 || len(resp.TLS.VerifiedChains) == 0 {
		return &IdentityError{Reason: fmt.Sprintf("the answer to %s came without a verified certificate", route)}
	}
	if d.Controller == "" {
		return nil
	}
	cert := resp.TLS.PeerCertificates[0]
	ident := d.Identity
	if ident == nil {
		ident = NodeIdentity
	}
	id, err := ident(cert)
	switch {
	case err != nil:
		return &IdentityError{Subject: cert.Subject.String(), Reason: fmt.Sprintf("the answer to %s names no identity, not the controller %q: %v", route, d.Controller, err)}
	case id != d.Controller:
		return &IdentityError{Subject: cert.Subject.String(), Reason: fmt.Sprintf("the answer to %s names %q, not the controller %q", route, clip(id), d.Controller)}
	}
	return nil
}

// do sends req and refuses an answer that does not come from the
// controller, closing its body.
func (d *Dialer) do(route string, req *http.Request) (*http.Response, error) {
	resp, err := d.Client.Do(req)
	if err != nil {
		return nil, &RequestError{Route: route, Err: err}
	}
	if err := d.verify(route, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// conn is a node's control channel over the protocol.
type conn struct {
	d     *Dialer
	base  *url.URL
	node  string
	caps  authority.Capabilities
	token authority.Token

	ctx    context.Context // the dial's values, never cancelled: the goodbye's
	cancel context.CancelFunc
	stream string // the stream's id, named by the goodbye
	msgs   chan authority.Msg
	done   chan struct{} // closed by Close: the reader stops delivering
	ended  chan struct{} // closed when the reader returned

	mu     sync.Mutex
	closed bool
	once   sync.Once
	err    error
}

var _ authority.Conn = (*conn)(nil)

// Dial opens node's control channel to the controller served at base;
// it is (&Dialer{Base: base, Client: hc}).Dial, which accepts any
// controller certificate the CA verifies: use a Dialer naming the
// Controller wherever the CA signs certificates for others too.
func Dial(ctx context.Context, base string, node string, caps authority.Capabilities, token authority.Token, hc *http.Client) (authority.Conn, error) {
	d := &Dialer{Base: base, Client: hc}
	if hc == nil {
		return nil, &cutline.ConfigError{Field: "hc", Value: nil, Reason: "required: it carries the client certificate"}
	}
	return d.Dial(ctx, node, caps, token)
}

// Dial opens node's control channel: the server steps Connect{Node, Caps:
// caps, Token: token} for the identity the client certificate
// authenticates, which must be node, and streams the controller's
// messages to Msgs, each at most MaxMessage bytes. An answer from another
// certificate than the controller's is a *IdentityError (ErrIdentity).
// Dial returns once the Connect was stepped; ctx bounds the dial only,
// not the stream.
//
// The returned Conn's Send posts events; since the stream carried the
// Connect, Send of a Connect equal to it (the one authority.Agent sends
// first) does nothing, and any other Connect is refused: Dial anew to
// declare other capabilities or another token. Close says goodbye and
// ends the stream; call it once the connection is no longer used, even
// after the stream ended.
func (d *Dialer) Dial(ctx context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
	u, err := d.check()
	if err != nil {
		return nil, err
	}
	if err := epoch.ValidateName("node", node); err != nil {
		return nil, err
	}
	limit := d.MaxMessage
	if limit == 0 {
		limit = DefaultMaxMessage
	}
	target := u.JoinPath(RouteStream)
	target.RawQuery = streamQuery(node, caps, token).Encode()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, target.String(), nil)
	if err != nil {
		stop()
		cancel()
		return nil, &cutline.ConfigError{Field: "base", Value: d.Base, Reason: "cannot form a request", Err: err}
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := d.do(RouteStream, req)
	if !stop() && err == nil {
		// ctx ended while the stream opened.
		resp.Body.Close()
		err = &RequestError{Route: RouteStream, Err: ctx.Err()}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		return nil, readError(RouteStream, resp)
	}
	if got := resp.Header.Get(HeaderNode); got != node {
		// The server connected another identity: leave at once.
		c := &conn{d: d, base: u, node: node, ctx: context.WithoutCancel(ctx), cancel: cancel, stream: resp.Header.Get(HeaderStream)}
		resp.Body.Close()
		cancel()
		_ = c.post(c.ctx, RouteBye, c.byeQuery(), nil)
		return nil, &IdentityError{Subject: clip(got), Reason: fmt.Sprintf("the server authenticated %q, not %q", clip(got), node)}
	}
	c := &conn{d: d, base: u, node: node, caps: caps, token: token,
		ctx: context.WithoutCancel(ctx), cancel: cancel, stream: resp.Header.Get(HeaderStream),
		msgs: make(chan authority.Msg, msgBuffer), done: make(chan struct{}), ended: make(chan struct{})}
	go c.read(resp.Body, limit)
	return c, nil
}

// Post sends one event to the controller served at base, authenticated
// by hc's client certificate, outside of any stream: how an operator
// requests a handoff. It is (&Dialer{Base: base, Client: hc}).Post.
func Post(ctx context.Context, base string, ev authority.Event, hc *http.Client) error {
	if hc == nil {
		return &cutline.ConfigError{Field: "hc", Value: nil, Reason: "required: it carries the client certificate"}
	}
	return (&Dialer{Base: base, Client: hc}).Post(ctx, ev)
}

// Post sends one event to the controller outside of any stream. It
// returns the controller's *authority.RefusedError for a refused event, a
// *StatusError for a request the server refused, a *RequestError when no
// answer came, a *IdentityError for an answer from another certificate
// than the controller's. Connect, Disconnect and Tick are refused (a
// *cutline.ConfigError): Dial and Close carry the first two.
func (d *Dialer) Post(ctx context.Context, ev authority.Event) error {
	u, err := d.check()
	if err != nil {
		return err
	}
	body, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	c := &conn{d: d, base: u}
	return c.post(ctx, RouteEvent, nil, body)
}

func baseURL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, &cutline.ConfigError{Field: "base", Value: base, Reason: "not a URL", Err: err}
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, &cutline.ConfigError{Field: "base", Value: base, Reason: "must be https://host[:port][/prefix]: the transport is mutual TLS"}
	}
	return u, nil
}

// read delivers the stream's messages, one per line of at most limit
// bytes, until it ends: at its end, a line too long, or one that is not
// a message (the node then reconnects).
func (c *conn) read(body io.ReadCloser, limit int) {
	defer close(c.ended)
	defer close(c.msgs)
	defer body.Close()
	lines := bufio.NewReaderSize(body, 4<<10)
	for {
		line, err := readLine(lines, limit)
		if err != nil && (!errors.Is(err, io.EOF) || len(line) == 0) {
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var w wireMsg
			if json.Unmarshal(line, &w) != nil {
				return
			}
			// A kind this client does not know (a newer controller's) is
			// skipped, as a runtime would refuse it.
			if m, err := w.msg(); err == nil && m.Recipient() == c.node {
				select {
				case c.msgs <- m:
				case <-c.done:
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Send posts ev (see Dial for Connect).
func (c *conn) Send(ctx context.Context, ev authority.Event) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errClosed
	}
	if e, ok := ev.(authority.Connect); ok {
		if e.Node == c.node && e.Caps == c.caps && e.Token == c.token {
			return nil
		}
		return &cutline.ConfigError{Field: "Connect", Value: fmt.Sprintf("%s %s token %d", clip(e.Node), formatCaps(e.Caps), e.Token),
			Reason: fmt.Sprintf("the stream declared %s %s token %d: Dial anew to declare otherwise", c.node, formatCaps(c.caps), c.token)}
	}
	body, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	return c.post(ctx, RouteEvent, nil, body)
}

// Msgs yields the controller's messages; it is closed when the stream
// ends.
func (c *conn) Msgs() <-chan authority.Msg { return c.msgs }

// Close says goodbye (the server steps an expected Disconnect, unless a
// newer stream of the node replaced this one) and ends the stream. It
// returns the goodbye's error; later calls return the same.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		// The goodbye goes first: were the stream to end before it, the
		// server would see an unexpected close.
		c.err = c.post(c.ctx, RouteBye, c.byeQuery(), nil)
		c.cancel()
		close(c.done)
		<-c.ended
	})
	return c.err
}

func (c *conn) byeQuery() url.Values { return url.Values{"stream": {c.stream}} }

// errTooLong is a stream line longer than the bound.
var errTooLong = errors.New("authhttp: a message of the stream exceeds its bound")

// readLine returns the next line of r, without holding more than limit
// bytes of it.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > limit+1 { // the newline aside
			return nil, errTooLong
		}
		line = append(line, part...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// post sends a request and reads its answer.
func (c *conn) post(ctx context.Context, route string, q url.Values, body []byte) error {
	u := c.base.JoinPath(route)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return &RequestError{Route: route, Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.d.do(route, req)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBody))
		resp.Body.Close()
		return nil
	}
	return readError(route, resp)
}

// readError turns an error answer into an error, and closes its body: a
// 409 into the controller's *authority.RefusedError, anything else into
// a *StatusError.
func readError(route string, resp *http.Response) error {
	defer resp.Body.Close()
	var eb errorBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if json.Unmarshal(raw, &eb) != nil {
		eb.Error = strings.TrimSpace(clip(string(raw)))
	}
	if resp.StatusCode == http.StatusConflict && eb.Refused != nil {
		return &authority.RefusedError{Node: eb.Refused.Node, Event: eb.Refused.Event, Reason: eb.Refused.Reason}
	}
	if len(eb.Error) > 1024 {
		eb.Error = eb.Error[:1024] + "…"
	}
	return &StatusError{Route: route, Code: resp.StatusCode, Message: eb.Error}
}
