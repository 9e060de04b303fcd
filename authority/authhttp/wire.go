package authhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

// The protocol's routes, parameters and headers.
const (
	// RouteStream is the control channel: GET, streaming the node's
	// messages as newline-delimited JSON.
	RouteStream = "/v1/stream"
	// RouteEvent takes one event envelope: POST.
	RouteEvent = "/v1/event"
	// RouteBye is the goodbye: POST.
	RouteBye = "/v1/bye"

	// HeaderNode, on a stream's response, is the identity the server
	// authenticated.
	HeaderNode = "Cutline-Node"
	// HeaderStream, on a stream's response, is the stream's id, which a
	// goodbye names (its "stream" parameter) so that it never closes a
	// newer stream of the same node.
	HeaderStream = "Cutline-Stream"

	// MaxBody bounds a request's body.
	MaxBody = 64 << 10
)

// Event kinds of the envelope.
const (
	// KindHeartbeat carries an authority.Heartbeat.
	KindHeartbeat = "heartbeat"
	// KindOffer carries an authority.Offer.
	KindOffer = "offer"
	// KindRecovered carries an authority.Recovered.
	KindRecovered = "recovered"
	// KindReleased carries an authority.Released.
	KindReleased = "released"
	// KindHandoff carries an authority.HandoffRequest (operators only).
	KindHandoff = "handoff"
	// KindConcern carries an authority.Concern.
	KindConcern = "concern"
	// KindConcernCleared carries an authority.ConcernCleared.
	KindConcernCleared = "concern-cleared"
	// KindAdvisory carries an authority.Advisory.
	KindAdvisory = "advisory"
	// KindChallenge carries an authority.Challenge.
	KindChallenge = "challenge"
)

// Capability names of the stream's caps parameter.
var capNames = []string{"vote", "storage", "promotable", "contention", "cleanup"}

func capFlags(c *authority.Capabilities) []*bool {
	return []*bool{&c.Vote, &c.Storage, &c.Promotable, &c.Contention, &c.Cleanup}
}

// formatCaps writes caps as a comma-separated list of names.
func formatCaps(c authority.Capabilities) string {
	var names []string
	for i, f := range capFlags(&c) {
		if *f {
			names = append(names, capNames[i])
		}
	}
	return strings.Join(names, ",")
}

// parseCaps reads a comma-separated list of capability names; an empty
// list is no capability.
func parseCaps(s string) (authority.Capabilities, error) {
	var c authority.Capabilities
	if s == "" {
		return c, nil
	}
	flags := capFlags(&c)
	for name := range strings.SplitSeq(s, ",") {
		found := false
		for i, n := range capNames {
			if name == n {
				*flags[i], found = true, true
			}
		}
		if !found {
			return authority.Capabilities{}, fmt.Errorf("unknown capability %.40q (want a comma-separated list of %s)", name, strings.Join(capNames, ", "))
		}
	}
	return c, nil
}

// streamQuery is the stream's parameters.
func streamQuery(node string, caps authority.Capabilities, token authority.Token) url.Values {
	return url.Values{"node": {node}, "caps": {formatCaps(caps)}, "token": {strconv.FormatUint(uint64(token), 10)}}
}

// parseStreamQuery reads the stream's parameters: node (optional: when
// set, the identity the client expects), caps and token (optional).
func parseStreamQuery(q url.Values) (node string, caps authority.Capabilities, token authority.Token, err error) {
	for k, v := range q {
		switch {
		case k != "node" && k != "caps" && k != "token":
			return "", caps, 0, fmt.Errorf("unknown parameter %.40q", k)
		case len(v) != 1:
			return "", caps, 0, fmt.Errorf("parameter %q given %d times", k, len(v))
		}
	}
	if caps, err = parseCaps(q.Get("caps")); err != nil {
		return "", caps, 0, err
	}
	if s := q.Get("token"); s != "" {
		t, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			return "", caps, 0, fmt.Errorf("token %.40q is not a decimal integer", s)
		}
		token = authority.Token(t)
	}
	return q.Get("node"), caps, token, nil
}

type wirePos struct {
	Epoch uint64 `json:"epoch"`
	Slot  uint64 `json:"slot"`
}

func toPos(p chain.Position) wirePos  { return wirePos{Epoch: p.Epoch, Slot: p.Slot} }
func (p wirePos) pos() chain.Position { return chain.Position{Epoch: p.Epoch, Slot: p.Slot} }

type wireRequired struct {
	Star string  `json:"star,omitempty"`
	Pos  wirePos `json:"pos"`
}

type wireGrant struct {
	Domain   string    `json:"domain"`
	Holder   string    `json:"holder"`
	Token    uint64    `json:"token"`
	Deadline time.Time `json:"deadline"`
	Revision int64     `json:"revision"`
}

// wireMsg is one line of a stream.
type wireMsg struct {
	To         string       `json:"to"`
	Kind       string       `json:"kind"`
	Token      uint64       `json:"token"`
	Grant      wireGrant    `json:"grant,omitzero"`
	Required   wireRequired `json:"required,omitzero"`
	Topology   uint64       `json:"topology,omitempty"`
	Voters     []string     `json:"voters,omitempty"`
	Holder     string       `json:"holder,omitempty"`
	Ended      bool         `json:"ended,omitempty"`
	RetryAfter int64        `json:"retry_after_ms,omitempty"`
	Window     int64        `json:"window_ms,omitempty"`
}

func toWireGrant(g authority.Grant) wireGrant {
	return wireGrant{Domain: g.Domain, Holder: g.Holder, Token: uint64(g.Token), Deadline: g.Deadline, Revision: g.Revision}
}

func (g wireGrant) grant() authority.Grant {
	return authority.Grant{Domain: g.Domain, Holder: g.Holder, Token: authority.Token(g.Token), Deadline: g.Deadline, Revision: g.Revision}
}

func toWireRequired(r authority.Required) wireRequired {
	return wireRequired{Star: r.Star, Pos: toPos(r.Pos)}
}

func (r wireRequired) required() authority.Required {
	return authority.Required{Star: r.Star, Pos: r.Pos.pos()}
}

// toWireMsg is m's line: every kind on the same line format, with the
// fields its kind does not use left out.
func toWireMsg(m authority.Msg) wireMsg {
	w := wireMsg{To: m.Recipient(), Kind: string(m.Kind())}
	switch m := m.(type) {
	case authority.GrantMsg:
		w.Token, w.Topology, w.Grant = uint64(m.Token), m.Topology, toWireGrant(m.Grant)
	case authority.RevokeMsg:
		w.Token = uint64(m.Token)
	case authority.RequiredMsg:
		w.Token, w.Required = uint64(m.Token), toWireRequired(m.Required)
	case authority.RecoverMsg:
		w.Token, w.Required, w.Grant = uint64(m.Token), toWireRequired(m.Required), toWireGrant(m.Grant)
	case authority.ReleaseMsg:
		w.Token = uint64(m.Token)
	case authority.TopologyMsg:
		w.Token, w.Topology, w.Voters, w.Holder, w.Ended = uint64(m.Token), m.Topology, m.Voters, m.Holder, m.Ended
	case authority.HeartbeatNowMsg:
		w.Token, w.Topology = uint64(m.Token), m.Topology
	case authority.ConcernAnswerMsg:
		w.Token, w.Topology = uint64(m.Token), m.Topology
		w.RetryAfter, w.Window = m.RetryAfter.Milliseconds(), m.Window.Milliseconds()
	}
	return w
}

// msg is the message a line carries; a kind it does not know is an
// error. Fields a kind does not use are ignored.
func (w wireMsg) msg() (authority.Msg, error) {
	tok := authority.Token(w.Token)
	if len(w.Voters) == 0 {
		w.Voters = nil // an empty list is no list: the line leaves both out
	}
	switch authority.MsgKind(w.Kind) {
	case authority.MsgGrant:
		return authority.GrantMsg{To: w.To, Token: tok, Topology: w.Topology, Grant: w.Grant.grant()}, nil
	case authority.MsgRevoke:
		return authority.RevokeMsg{To: w.To, Token: tok}, nil
	case authority.MsgRequired:
		return authority.RequiredMsg{To: w.To, Token: tok, Required: w.Required.required()}, nil
	case authority.MsgRecover:
		return authority.RecoverMsg{To: w.To, Token: tok, Required: w.Required.required(), Grant: w.Grant.grant()}, nil
	case authority.MsgRelease:
		return authority.ReleaseMsg{To: w.To, Token: tok}, nil
	case authority.MsgTopology:
		return authority.TopologyMsg{To: w.To, Token: tok, Topology: w.Topology, Voters: w.Voters, Holder: w.Holder, Ended: w.Ended}, nil
	case authority.MsgHeartbeatNow:
		return authority.HeartbeatNowMsg{To: w.To, Token: tok, Topology: w.Topology}, nil
	case authority.MsgConcernAnswer:
		return authority.ConcernAnswerMsg{To: w.To, Token: tok, Topology: w.Topology,
			RetryAfter: time.Duration(w.RetryAfter) * time.Millisecond, Window: time.Duration(w.Window) * time.Millisecond}, nil
	}
	return nil, fmt.Errorf("unknown message kind %.40q", w.Kind)
}

// envelope is RouteEvent's body.
type envelope struct {
	Kind  string          `json:"kind"`
	Event json.RawMessage `json:"event"`
}

type wireHeartbeat struct {
	Node     string  `json:"node"`
	Token    uint64  `json:"token"`
	Progress wirePos `json:"progress"`
}

type wireOffer struct {
	Node        string  `json:"node"`
	Token       uint64  `json:"token"`
	Star        string  `json:"star"`
	Frontier    wirePos `json:"frontier"`
	Recoverable wirePos `json:"recoverable"`
	Usable      bool    `json:"usable"`
}

type wireRecovered struct {
	Node     string  `json:"node"`
	Token    uint64  `json:"token"`
	Star     string  `json:"star"`
	Frontier wirePos `json:"frontier"`
}

type wireReleased struct {
	Node     string  `json:"node"`
	Token    uint64  `json:"token"`
	Progress wirePos `json:"progress"`
}

type wireHandoff struct {
	Target string `json:"target"`
}

type wireConcern struct {
	Node      string `json:"node"`
	Token     uint64 `json:"token"`
	Topology  uint64 `json:"topology"`
	RoundTrip bool   `json:"round_trip"`
}

type wireNodeToken struct {
	Node  string `json:"node"`
	Token uint64 `json:"token"`
}

type wireChallenge struct {
	Node     string `json:"node"`
	Token    uint64 `json:"token"`
	Topology uint64 `json:"topology"`
}

// encodeEvent returns ev's envelope. Connect, Disconnect and Tick are not
// posted: the stream and the goodbye carry the first two, the
// controller's own clock the last.
func encodeEvent(ev authority.Event) ([]byte, error) {
	var kind string
	var body any
	switch e := ev.(type) {
	case authority.Heartbeat:
		kind, body = KindHeartbeat, wireHeartbeat{Node: e.Node, Token: uint64(e.Token), Progress: toPos(e.Progress)}
	case authority.Offer:
		kind, body = KindOffer, wireOffer{Node: e.Node, Token: uint64(e.Token), Star: e.Star, Frontier: toPos(e.Frontier), Recoverable: toPos(e.Recoverable), Usable: e.Usable}
	case authority.Recovered:
		kind, body = KindRecovered, wireRecovered{Node: e.Node, Token: uint64(e.Token), Star: e.Star, Frontier: toPos(e.Frontier)}
	case authority.Released:
		kind, body = KindReleased, wireReleased{Node: e.Node, Token: uint64(e.Token), Progress: toPos(e.Progress)}
	case authority.HandoffRequest:
		kind, body = KindHandoff, wireHandoff{Target: e.Target}
	case authority.Concern:
		kind, body = KindConcern, wireConcern{Node: e.Node, Token: uint64(e.Token), Topology: e.Topology, RoundTrip: e.RoundTrip}
	case authority.ConcernCleared:
		kind, body = KindConcernCleared, wireNodeToken{Node: e.Node, Token: uint64(e.Token)}
	case authority.Advisory:
		kind, body = KindAdvisory, wireNodeToken{Node: e.Node, Token: uint64(e.Token)}
	case authority.Challenge:
		kind, body = KindChallenge, wireChallenge{Node: e.Node, Token: uint64(e.Token), Topology: e.Topology}
	default:
		return nil, &cutline.ConfigError{Field: "event", Value: fmt.Sprintf("%T", ev), Reason: "not posted: Dial carries Connect, Close the goodbye, and the controller ticks itself"}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelope{Kind: kind, Event: raw})
}

// decodeStrict decodes exactly one JSON value from data into v, refusing
// unknown fields and trailing data.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// decodeEvent reads an envelope: the event and the node it claims to come
// from ("" for a handoff request, which names no sender).
func decodeEvent(r io.Reader) (authority.Event, string, string, error) {
	var env envelope
	if err := decodeStrict(r, &env); err != nil {
		return nil, "", "", err
	}
	if len(env.Event) == 0 || string(env.Event) == "null" {
		return nil, "", env.Kind, errors.New("the envelope has no event")
	}
	body := bytes.NewReader(env.Event)
	switch env.Kind {
	case KindHeartbeat:
		var w wireHeartbeat
		err := decodeStrict(body, &w)
		return authority.Heartbeat{Node: w.Node, Token: authority.Token(w.Token), Progress: w.Progress.pos()}, w.Node, env.Kind, err
	case KindOffer:
		var w wireOffer
		err := decodeStrict(body, &w)
		return authority.Offer{Node: w.Node, Token: authority.Token(w.Token), Star: w.Star, Frontier: w.Frontier.pos(), Recoverable: w.Recoverable.pos(), Usable: w.Usable}, w.Node, env.Kind, err
	case KindRecovered:
		var w wireRecovered
		err := decodeStrict(body, &w)
		return authority.Recovered{Node: w.Node, Token: authority.Token(w.Token), Star: w.Star, Frontier: w.Frontier.pos()}, w.Node, env.Kind, err
	case KindReleased:
		var w wireReleased
		err := decodeStrict(body, &w)
		return authority.Released{Node: w.Node, Token: authority.Token(w.Token), Progress: w.Progress.pos()}, w.Node, env.Kind, err
	case KindHandoff:
		var w wireHandoff
		err := decodeStrict(body, &w)
		return authority.HandoffRequest{Target: w.Target}, "", env.Kind, err
	case KindConcern:
		var w wireConcern
		err := decodeStrict(body, &w)
		return authority.Concern{Node: w.Node, Token: authority.Token(w.Token), Topology: w.Topology, RoundTrip: w.RoundTrip}, w.Node, env.Kind, err
	case KindConcernCleared:
		var w wireNodeToken
		err := decodeStrict(body, &w)
		return authority.ConcernCleared{Node: w.Node, Token: authority.Token(w.Token)}, w.Node, env.Kind, err
	case KindAdvisory:
		var w wireNodeToken
		err := decodeStrict(body, &w)
		return authority.Advisory{Node: w.Node, Token: authority.Token(w.Token)}, w.Node, env.Kind, err
	case KindChallenge:
		var w wireChallenge
		err := decodeStrict(body, &w)
		return authority.Challenge{Node: w.Node, Token: authority.Token(w.Token), Topology: w.Topology}, w.Node, env.Kind, err
	}
	return nil, "", env.Kind, fmt.Errorf("unknown kind %.40q (want %s)", env.Kind,
		strings.Join([]string{KindHeartbeat, KindOffer, KindRecovered, KindReleased, KindHandoff, KindConcern, KindConcernCleared, KindAdvisory, KindChallenge}, ", "))
}

// errorBody is every error answer's body; Refused is set on a 409.
type errorBody struct {
	Error   string       `json:"error"`
	Refused *wireRefused `json:"refused,omitempty"`
}

type wireRefused struct {
	Node   string `json:"node"`
	Event  string `json:"event"`
	Reason string `json:"reason"`
}
