package authority

import (
	"fmt"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/epoch"
)

// RuntimeConfig configures a Runtime.
type RuntimeConfig struct {
	// Node is this node's identity; Domain the grant's domain.
	Node   string
	Domain string
	// Caps are the node's capabilities.
	Caps Capabilities
	// DecisionDelay is how long a promotable node waits after learning
	// that the grant ended before it offers. 0 means 500 ms.
	DecisionDelay time.Duration
}

// DefaultDecisionDelay is RuntimeConfig.DecisionDelay's default.
const DefaultDecisionDelay = 500 * time.Millisecond

// Runtime is a node's deterministic admission state: it admits writes only
// while its local grant names it, is the newest token it has seen, and its
// absolute deadline has not passed. It takes the controller's messages
// (Step) and ticks, and tells its host what to send and do (Ready). It is
// not safe for concurrent use.
type Runtime struct {
	cfg      RuntimeConfig
	now      time.Time
	grant    Grant // the grant held; zero when none
	maxToken Token // the newest token seen in any grant or revocation
	ended    Token // the newest token known to have ended: never admitted again
	draining bool  // asked to release: admission closed

	// After a grant ended: what must be recovered, and since when.
	required   *Msg
	requiredAt time.Time
	offered    bool
	// Recovery placement, if selected.
	recovery *Msg
	// The host's report of its recovered frontier.
	frontier Required
	usable   bool

	out     []Event
	release bool // the host is to drain and call Released
}

// NewRuntime returns a runtime holding nothing.
func NewRuntime(cfg RuntimeConfig, now time.Time) (*Runtime, error) {
	if err := epoch.ValidateName("node", cfg.Node); err != nil {
		return nil, err
	}
	if err := epoch.ValidateName("domain", cfg.Domain); err != nil {
		return nil, err
	}
	if cfg.DecisionDelay == 0 {
		cfg.DecisionDelay = DefaultDecisionDelay
	}
	if cfg.DecisionDelay < 0 || cfg.DecisionDelay > time.Minute {
		return nil, &config.Error{Field: "DecisionDelay", Value: cfg.DecisionDelay, Reason: "must lie in [0, 1m]"}
	}
	return &Runtime{cfg: cfg, now: now}, nil
}

// Resume is process takeover: a new local process of the holder takes the
// grant over from the one that crashed, without any new holder being
// selected, only while the identity, the token and the absolute deadline
// still validate. Anything else is a *NotAdmittedError; the process then
// connects as a node holding nothing.
func Resume(cfg RuntimeConfig, g Grant, now time.Time) (*Runtime, error) {
	r, err := NewRuntime(cfg, now)
	if err != nil {
		return nil, err
	}
	switch {
	case g.Domain != cfg.Domain || g.Holder != cfg.Node:
		return nil, &NotAdmittedError{Node: cfg.Node, Reason: fmt.Sprintf("the grant is %s's for %s", g.Holder, g.Domain)}
	case g.Token == 0:
		return nil, &NotAdmittedError{Node: cfg.Node, Reason: "no token"}
	case !now.Before(g.Deadline):
		return nil, &NotAdmittedError{Node: cfg.Node, Reason: fmt.Sprintf("the grant's deadline %v has passed", g.Deadline)}
	}
	r.grant, r.maxToken = g, g.Token
	return r, nil
}

// Grant returns the grant held (zero when none).
func (r *Runtime) Grant() Grant { return r.grant }

// Admit says whether a write may be admitted now: nil, or a
// *NotAdmittedError saying why not.
func (r *Runtime) Admit(now time.Time) error {
	g := r.grant
	switch {
	case g.Token == 0 || g.Holder != r.cfg.Node:
		return &NotAdmittedError{Node: r.cfg.Node, Reason: "holds no grant"}
	case g.Token < r.maxToken || g.Token <= r.ended:
		return &NotAdmittedError{Node: r.cfg.Node, Reason: fmt.Sprintf("token %d is older than %d", g.Token, r.maxToken)}
	case !now.Before(g.Deadline):
		return &NotAdmittedError{Node: r.cfg.Node, Reason: "the grant's deadline has passed"}
	case r.draining:
		return &NotAdmittedError{Node: r.cfg.Node, Reason: "draining for a handoff"}
	}
	return nil
}

// Step applies one message from the controller. A message for another
// node or domain, or bound to a token older than one already seen, is
// refused and changes nothing.
func (r *Runtime) Step(m Msg) error {
	if m.To != r.cfg.Node {
		return &RefusedError{Node: m.To, Event: string(m.Kind), Reason: "addressed to another node"}
	}
	switch m.Kind {
	case MsgGrant:
		g := m.Grant
		if g.Domain != r.cfg.Domain || g.Holder != r.cfg.Node || g.Token != m.Token {
			return &RefusedError{Node: m.To, Event: string(m.Kind), Reason: "not a grant of this node"}
		}
		if g.Token < r.maxToken || g.Token <= r.ended || (g.Token == r.grant.Token && g.Deadline.Before(r.grant.Deadline)) {
			return &RefusedError{Node: m.To, Event: string(m.Kind), Reason: fmt.Sprintf("token %d is stale (seen %d)", g.Token, r.maxToken)}
		}
		if g.Token > r.grant.Token {
			r.draining = false
		}
		r.grant, r.maxToken = g, g.Token
		r.required, r.recovery, r.offered = nil, nil, false
	case MsgRevoke:
		r.maxToken = max(r.maxToken, m.Token)
		r.ended = max(r.ended, m.Token)
		if r.grant.Token != 0 && r.grant.Token <= m.Token {
			r.grant, r.draining = Grant{}, false
		}
	case MsgRequired:
		if m.Token < r.maxToken || !r.cfg.Caps.Promotable {
			return &RefusedError{Node: m.To, Event: string(m.Kind), Reason: "stale or not promotable"}
		}
		r.maxToken = m.Token
		r.ended = max(r.ended, m.Token)
		mm := m
		r.required, r.requiredAt, r.offered = &mm, r.now, false
		if r.grant.Token != 0 && r.grant.Token <= m.Token {
			r.grant, r.draining = Grant{}, false
		}
	case MsgRecover:
		if m.Token < r.maxToken || m.Grant.Holder != r.cfg.Node {
			return &RefusedError{Node: m.To, Event: string(m.Kind), Reason: "stale or for another node"}
		}
		mm := m
		r.recovery = &mm
	case MsgRelease:
		if m.Token != r.grant.Token || r.grant.Token == 0 {
			return &RefusedError{Node: m.To, Event: string(m.Kind), Reason: "not the grant held"}
		}
		r.draining, r.release = true, true
	default:
		return &RefusedError{Node: m.To, Event: string(m.Kind), Reason: "unknown message"}
	}
	return nil
}

// Tick advances the runtime's clock: a promotable node offers once the
// decision delay after the end of a grant has passed, if the host reports
// its state usable (SetFrontier).
func (r *Runtime) Tick(now time.Time) {
	if now.After(r.now) {
		r.now = now
	}
	if q := r.required; q != nil && !r.offered && r.usable && !r.now.Before(r.requiredAt.Add(r.cfg.DecisionDelay)) {
		r.offered = true
		r.out = append(r.out, Offer{Node: r.cfg.Node, Token: q.Token, Star: r.frontier.Star, Frontier: r.frontier.Pos, Usable: true})
	}
}

// SetFrontier is the host's report of how far it has recovered the last
// holder's chain, and whether its storage can serve. During recovery a
// frontier that covers the requirement is reported to the controller.
func (r *Runtime) SetFrontier(star string, pos chain.Position, usable bool) {
	r.frontier, r.usable = Required{Star: star, Pos: pos}, usable
	if rc := r.recovery; rc != nil && rc.Required.Covers(star, pos) {
		r.out = append(r.out, Recovered{Node: r.cfg.Node, Token: rc.Token, Star: star, Frontier: pos})
	}
}

// Released is the host's report that it drained for a handoff.
func (r *Runtime) Released(progress chain.Position) {
	if r.draining && r.grant.Token != 0 {
		r.out = append(r.out, Released{Node: r.cfg.Node, Token: r.grant.Token, Progress: progress})
	}
}

// Heartbeat returns the heartbeat to send, if the runtime holds a grant.
func (r *Runtime) Heartbeat(progress chain.Position) (Heartbeat, bool) {
	if r.grant.Token == 0 {
		return Heartbeat{}, false
	}
	return Heartbeat{Node: r.cfg.Node, Token: r.grant.Token, Progress: progress}, true
}

// RuntimeReady is what the runtime's host does next.
type RuntimeReady struct {
	// Events go to the controller.
	Events []Event
	// Recover, when set, places the node in recovery: recover the chain
	// of Recover.Required.Star to Recover.Required.Pos, writing through
	// Guard with Recover.Grant.Revision, and report with SetFrontier. The
	// node stays read-only until it receives a grant.
	Recover *Msg
	// Release asks the host to drain every stream (Finish) and call
	// Released.
	Release bool
}

// Ready returns and clears what the host is to do.
func (r *Runtime) Ready() RuntimeReady {
	rd := RuntimeReady{Events: r.out, Release: r.release}
	if r.recovery != nil && !r.recovery.Required.Covers(r.frontier.Star, r.frontier.Pos) {
		m := *r.recovery
		rd.Recover = &m
	}
	r.out, r.release = nil, false
	return rd
}
