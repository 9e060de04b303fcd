package authhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease/authority"
)

// msgBuffer is how many decoded messages a connection holds for its
// reader.
const msgBuffer = 16

// conn is a node's control channel over the protocol.
type conn struct {
	base  *url.URL
	hc    *http.Client
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

// Dial opens node's control channel to the controller served at base
// (https://host:port, with an optional path prefix): the server steps
// Connect{Node, Caps: caps, Token: token} for the identity hc's client
// certificate authenticates, which must be node, and streams the
// controller's messages to Msgs. Dial returns once the Connect was
// stepped; ctx bounds the dial only, not the stream.
//
// The returned Conn's Send posts events; since the stream carried the
// Connect, Send of a Connect equal to it (the one authority.Agent sends
// first) does nothing, and any other Connect is refused: Dial anew to
// declare other capabilities or another token. Close says goodbye and
// ends the stream; call it once the connection is no longer used, even
// after the stream ended.
//
// hc carries the client's TLS configuration (ClientTLS). Do not set its
// Timeout, which would cut the stream short: bound requests with the
// transport's timeouts instead (dial, TLS handshake, response headers),
// which also bound Close's goodbye.
func Dial(ctx context.Context, base string, node string, caps authority.Capabilities, token authority.Token, hc *http.Client) (authority.Conn, error) {
	u, err := baseURL(base)
	if err != nil {
		return nil, err
	}
	if err := epoch.ValidateName("node", node); err != nil {
		return nil, err
	}
	if hc == nil {
		return nil, &config.Error{Field: "hc", Value: nil, Reason: "required: it carries the client certificate"}
	}
	target := u.JoinPath(RouteStream)
	target.RawQuery = streamQuery(node, caps, token).Encode()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, target.String(), nil)
	if err != nil {
		stop()
		cancel()
		return nil, &config.Error{Field: "base", Value: base, Reason: "cannot form a request", Err: err}
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := hc.Do(req)
	if !stop() && err == nil {
		// ctx ended while the stream opened.
		resp.Body.Close()
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, &RequestError{Route: RouteStream, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		return nil, readError(RouteStream, resp)
	}
	if got := resp.Header.Get(HeaderNode); got != node {
		// The server connected another identity: leave at once.
		c := &conn{base: u, hc: hc, node: node, ctx: context.WithoutCancel(ctx), cancel: cancel, stream: resp.Header.Get(HeaderStream)}
		resp.Body.Close()
		cancel()
		_ = c.post(c.ctx, RouteBye, c.byeQuery(), nil)
		return nil, &IdentityError{Subject: clip(got), Reason: fmt.Sprintf("the server authenticated %q, not %q", clip(got), node)}
	}
	c := &conn{base: u, hc: hc, node: node, caps: caps, token: token,
		ctx: context.WithoutCancel(ctx), cancel: cancel, stream: resp.Header.Get(HeaderStream),
		msgs: make(chan authority.Msg, msgBuffer), done: make(chan struct{}), ended: make(chan struct{})}
	go c.read(resp.Body)
	return c, nil
}

// Post sends one event to the controller served at base, authenticated
// by hc's client certificate, outside of any stream: how an operator
// requests a handoff. It returns the controller's *authority.RefusedError
// for a refused event, a *StatusError for a request the server refused,
// a *RequestError when no answer came. Connect, Disconnect and Tick are
// refused (a *config.Error): Dial and Close carry the first two.
func Post(ctx context.Context, base string, ev authority.Event, hc *http.Client) error {
	u, err := baseURL(base)
	if err != nil {
		return err
	}
	if hc == nil {
		return &config.Error{Field: "hc", Value: nil, Reason: "required: it carries the client certificate"}
	}
	body, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	c := &conn{base: u, hc: hc}
	return c.post(ctx, RouteEvent, nil, body)
}

func baseURL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, &config.Error{Field: "base", Value: base, Reason: "not a URL", Err: err}
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, &config.Error{Field: "base", Value: base, Reason: "must be https://host[:port][/prefix]: the transport is mutual TLS"}
	}
	return u, nil
}

// read delivers the stream's messages until it ends.
func (c *conn) read(body io.ReadCloser) {
	defer close(c.ended)
	defer close(c.msgs)
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var w wireMsg
		if err := dec.Decode(&w); err != nil {
			return
		}
		m := w.msg()
		if m.To != c.node {
			continue
		}
		select {
		case c.msgs <- m:
		case <-c.done:
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
		return ErrClosed
	}
	if e, ok := ev.(authority.Connect); ok {
		if e.Node == c.node && e.Caps == c.caps && e.Token == c.token {
			return nil
		}
		return &config.Error{Field: "Connect", Value: fmt.Sprintf("%s %s token %d", clip(e.Node), formatCaps(e.Caps), e.Token),
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
	resp, err := c.hc.Do(req)
	if err != nil {
		return &RequestError{Route: route, Err: err}
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
