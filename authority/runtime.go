package authority

import (
	"fmt"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
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
	// that the grant ended before it offers. 0 means
	// DefaultDecisionDelay.
	DecisionDelay time.Duration
}

// DefaultDecisionDelay is RuntimeConfig.DecisionDelay's default. Every
// promotable node recovers from the same object storage, so no node's
// frontier is better than another's for long: the delay only lets the
// news of the ended grant reach every node before the first offer. It is
// on the failover's critical path when a grant ends by the fast fence.
const DefaultDecisionDelay = 100 * time.Millisecond

// Runtime is a node's deterministic admission state: it admits writes only
// while its local grant names it, is the newest token it has seen, and its
// absolute deadline has not passed. Every input goes through one door,
// Step: the controller's messages, the ticks of the host's clock, the
// results of health pings and the host's reports (its frontier, how far it
// can recover, a drain's completion, the heartbeat's progress). Everything
// the host is to send and do comes out of Ready, and stays there until the
// host acknowledges it with Advance. Grant, Admit, NextTick, Topology,
// HealthPeers, Awaiting and Fenced are queries: they change nothing. It is
// not safe for concurrent use.
type Runtime struct {
	cfg      RuntimeConfig
	now      time.Time
	grant    Grant // the grant held; zero when none
	maxToken Token // the newest token seen in any grant or revocation
	ended    Token // the newest token known to have ended: never admitted again
	draining bool  // asked to release: admission closed

	// After a grant ended: what must be recovered, and since when.
	required   *RequiredMsg
	requiredAt time.Time
	offered    bool
	// Recovery placement, if selected.
	recovery *RecoverMsg
	// The host's reports: how far it has recovered (materialized) the
	// last holder's chain, how far it can recover it, and whether its
	// storage can serve.
	frontier, recoverable Required
	usable                bool

	// What Ready hands out until Advance acknowledges it.
	out        []Event
	heartbeat  *Heartbeat   // the periodic heartbeat, when one is due
	release    bool         // the host is to drain and step ReleaseDone
	recoverDue bool         // the host is to recover (Ready.Recover)
	acked      RuntimeState // the state the host last acknowledged

	// Direct peer health: the topology the controller last described,
	// and each link's last successful round trip under its token.
	topo  *TopologyMsg
	links map[string]*link
	// A peer's concern about the holder.
	concerned bool
	retryAt   time.Time
	advised   bool
	// The holder's self-fence decision, for one token and topology.
	challenging bool
	challenged  time.Time
	confirmed   time.Time // the controller's last confirmation of the decision
	decision    [2]uint64 // token, topology
	fenced      bool
	granted     time.Time // when the current token's grant was accepted
}

// link is one direct health link: to the holder (from a peer) or to a
// peer (from the holder), bound to a token.
type link struct {
	token  Token
	lastOK time.Time
	ok     bool // completed a round trip under token
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
		return nil, &cutline.ConfigError{Field: "DecisionDelay", Value: cfg.DecisionDelay, Reason: "must lie in [0, 1m]"}
	}
	return &Runtime{cfg: cfg, now: now, links: map[string]*link{}}, nil
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
	case r.fenced:
		return &NotAdmittedError{Node: r.cfg.Node, Reason: "self-fenced: a majority of the voters is unreachable and the controller did not confirm in time"}
	}
	return nil
}

// ping records one round trip on the health link with peer under token
// (PingResult).
func (r *Runtime) ping(peer string, token Token, ok bool, now time.Time) {
	if now.After(r.now) {
		r.now = now
	}
	l := r.links[peer]
	if l == nil || l.token != token {
		l = &link{token: token}
		r.links[peer] = l
	}
	if ok {
		l.lastOK, l.ok = r.now, true
	}
}

// healthy reports whether the link with peer under token had a round trip
// within the health window.
func (r *Runtime) healthy(peer string, token Token) (healthy, everOK bool) {
	l := r.links[peer]
	if l == nil || l.token != token || !l.ok {
		return false, false
	}
	return r.now.Before(l.lastOK.Add(HealthWindow)), true
}

// Fenced reports whether the holder closed its own admission.
func (r *Runtime) Fenced() bool { return r.fenced }

// health evaluates direct health at every tick: a peer reports its
// concern about the holder (or an advisory, without vote) and clears it
// when health recovers; the holder challenges the controller when the
// voters it cannot reach, with itself, are a strict majority, and fences
// itself when no confirmation came within SelfFenceWait. A fenced holder
// asks again under each new topology, and reopens only on the answer.
func (r *Runtime) health() {
	tp := r.topo
	if tp == nil || tp.Holder == "" {
		return
	}
	if tp.Holder != r.cfg.Node {
		healthy, everOK := r.healthy(tp.Holder, tp.Token)
		switch {
		case healthy:
			if r.concerned {
				r.out = append(r.out, ConcernCleared{Node: r.cfg.Node, Token: tp.Token})
			}
			r.concerned, r.advised = false, false
		case !r.cfg.Caps.Vote:
			if everOK && !r.advised {
				r.advised = true
				r.out = append(r.out, Advisory{Node: r.cfg.Node, Token: tp.Token})
			}
		case everOK && !r.now.Before(r.retryAt):
			r.concerned = true
			r.retryAt = r.now.Add(ChallengeWait)
			r.out = append(r.out, Concern{Node: r.cfg.Node, Token: tp.Token, Topology: tp.Topology, RoundTrip: true})
		}
		return
	}
	if r.grant.Token == 0 || r.grant.Token != tp.Token {
		return
	}
	voters := map[string]bool{r.cfg.Node: true}
	for _, v := range tp.Voters {
		voters[v] = true
	}
	// A link that never completed a round trip is missing only once the
	// grant is older than the health window: a new holder's links need
	// that long to come up.
	settled := !r.now.Before(r.granted.Add(HealthWindow))
	missing := 0
	for v := range voters {
		if v == r.cfg.Node {
			continue
		}
		if ok, everOK := r.healthy(v, tp.Token); !ok && (everOK || settled) {
			missing++
		}
	}
	suspect := missing > 0 && 2*(missing+1) > len(voters)
	key := [2]uint64{uint64(tp.Token), tp.Topology}
	switch {
	case !suspect && !r.fenced:
		r.challenging = false
	case r.challenging && r.decision == key && r.fenced && !r.now.Before(r.challenged.Add(PingEvery)):
		// Still fenced: ask again at the heartbeat's pace, since a
		// challenge or its answer may have been lost.
		r.challenged = r.now
		r.out = append(r.out, Challenge{Node: r.cfg.Node, Token: tp.Token, Topology: tp.Topology})
	case r.challenging && r.decision == key:
		if !r.now.Before(r.challenged.Add(SelfFenceWait)) {
			r.fenced = true
		}
	case !r.fenced && r.decision == key && r.now.Before(r.confirmed.Add(PingEvery)):
		// Confirmed a moment ago: ask again at the heartbeat's pace.
	default:
		// A new decision: a suspicion, or a fenced holder under a new
		// topology, which reopens only on a confirmation for it (even
		// when the new topology no longer makes it suspect).
		r.challenging, r.challenged, r.decision = true, r.now, key
		r.out = append(r.out, Challenge{Node: r.cfg.Node, Token: tp.Token, Topology: tp.Topology})
	}
}

// Step applies one input: a controller message (Msg) or a report of the
// host (Tick, PingResult, FrontierReport, RecoverableReport, ReleaseDone,
// HeartbeatDue). Only a message can be refused; a report is always taken.
// What the input leads to is in the next Ready.
func (r *Runtime) Step(in Input) error {
	switch in := in.(type) {
	case Msg:
		return r.stepMsg(in)
	case nil:
		return &RefusedError{Node: r.cfg.Node, Event: "nil", Reason: "no input"}
	case Tick:
		r.tick(in.Now)
	case PingResult:
		r.ping(in.Peer, in.Token, in.OK, in.Now)
	case FrontierReport:
		r.setFrontier(in.Star, in.Pos, in.Usable)
	case RecoverableReport:
		r.recoverable = Required{Star: in.Star, Pos: in.Pos}
	case ReleaseDone:
		if r.draining && r.grant.Token != 0 {
			r.out = append(r.out, Released{Node: r.cfg.Node, Token: r.grant.Token, Progress: in.Progress})
		}
	case HeartbeatDue:
		if r.grant.Token != 0 {
			r.heartbeat = &Heartbeat{Node: r.cfg.Node, Token: r.grant.Token, Progress: in.Progress}
		}
	default:
		return &RefusedError{Node: r.cfg.Node, Event: fmt.Sprintf("%T", in), Reason: "unknown input"}
	}
	return nil
}

// stepMsg applies one message from the controller. A message for another
// node or domain, a grant older than one already seen, or a message it
// does not know is refused and changes nothing. Any other message that
// shows a token newer than the grant held ends that grant at once (even
// when refused for what else it asks), and admission under the older
// token stays closed for good: whatever order the controller's messages
// arrive in, and whichever of them is lost, the first that shows the
// newer token closes it.
func (r *Runtime) stepMsg(m Msg) error {
	to, kind := m.Recipient(), string(m.Kind())
	refuse := func(reason string) error { return &RefusedError{Node: to, Event: kind, Reason: reason} }
	if to != r.cfg.Node {
		return refuse("addressed to another node")
	}
	var token Token
	switch m := m.(type) {
	case GrantMsg:
		g := m.Grant
		if g.Domain != r.cfg.Domain || g.Holder != r.cfg.Node || g.Token != m.Token {
			return refuse("not a grant of this node")
		}
		token = m.Token
	case RevokeMsg:
		token = m.Token
	case RequiredMsg:
		token = m.Token
	case RecoverMsg:
		token = m.Token
	case ReleaseMsg:
		token = m.Token
	case TopologyMsg:
		token = m.Token
	case HeartbeatNowMsg:
		token = m.Token
	case ConcernAnswerMsg:
		token = m.Token
	default:
		return refuse("unknown message")
	}
	r.see(token)
	switch m := m.(type) {
	case GrantMsg:
		g := m.Grant
		if g.Token < r.maxToken || g.Token <= r.ended || (g.Token == r.grant.Token && g.Deadline.Before(r.grant.Deadline)) {
			return refuse(fmt.Sprintf("token %d is stale (seen %d)", g.Token, r.maxToken))
		}
		if g.Token > r.grant.Token {
			r.draining = false
		}
		if g.Token == r.grant.Token && r.challenging && m.Topology == r.decision[1] && !r.now.Before(r.challenged) {
			// The controller confirmed: writes resume without a new
			// token.
			r.challenging, r.fenced, r.confirmed = false, false, r.now
		}
		if g.Token != r.grant.Token {
			r.challenging, r.fenced, r.granted = false, false, r.now
		}
		r.grant, r.maxToken = g, g.Token
		r.required, r.recovery, r.offered = nil, nil, false
	case RevokeMsg:
		r.end(m.Token)
	case RequiredMsg:
		if m.Token < r.maxToken || !r.cfg.Caps.Promotable {
			return refuse("stale or not promotable")
		}
		r.end(m.Token)
		// A new requirement also ends a recovery placement: the
		// controller withdrew it.
		r.required, r.requiredAt, r.offered, r.recovery = &m, r.now, false, nil
	case RecoverMsg:
		if m.Token < r.maxToken || m.Grant.Holder != r.cfg.Node {
			return refuse("stale or for another node")
		}
		r.recovery, r.recoverDue = &m, true
	case ReleaseMsg:
		if m.Token != r.grant.Token || r.grant.Token == 0 {
			return refuse("not the grant held")
		}
		r.draining, r.release = true, true
	case TopologyMsg:
		if r.topo != nil && m.Topology < r.topo.Topology {
			return refuse("an older topology")
		}
		if m.Ended {
			r.end(m.Token)
		}
		if r.topo == nil || r.topo.Topology != m.Topology || r.topo.Token != m.Token {
			// A topology or authority change starts a new decision, from
			// where the last one left admission: a self-fenced holder
			// stays fenced until a confirmation for the new topology.
			r.challenging, r.concerned, r.advised, r.retryAt = false, false, false, time.Time{}
		}
		r.topo = &m
	case HeartbeatNowMsg:
		if r.grant.Token == 0 || m.Token != r.grant.Token {
			return refuse("not the grant held")
		}
		r.out = append(r.out, Heartbeat{Node: r.cfg.Node, Token: r.grant.Token})
	case ConcernAnswerMsg:
		if m.RetryAfter > 0 {
			r.retryAt = r.now.Add(m.RetryAfter)
		} else {
			r.retryAt = r.now.Add(min(m.Window, HealthWindow))
		}
	}
	return nil
}

// see records a token the controller showed: every token is issued only
// after the grant before it ended, so a grant older than it is over.
func (r *Runtime) see(t Token) {
	if t <= r.maxToken {
		return
	}
	r.maxToken = t
	if r.grant.Token != 0 && r.grant.Token < t {
		r.end(r.grant.Token)
	}
}

// end records that the grant under t (and every one before it) ended.
func (r *Runtime) end(t Token) {
	r.maxToken = max(r.maxToken, t)
	r.ended = max(r.ended, t)
	if r.grant.Token != 0 && r.grant.Token <= t {
		r.grant, r.draining = Grant{}, false
	}
}

// tick advances the runtime's clock (Tick): a promotable node offers once
// the decision delay after the end of a grant has passed, if the host
// reports its state usable and what it can recover covering the
// requirement (FrontierReport, RecoverableReport); a recovery placement
// not reached yet is handed out again.
func (r *Runtime) tick(now time.Time) {
	if now.After(r.now) {
		r.now = now
	}
	if rc := r.recovery; rc != nil && !rc.Required.Covers(r.frontier.Star, r.frontier.Pos) {
		r.recoverDue = true
	}
	r.health()
	q := r.required
	if q == nil || r.offered || !r.usable || r.now.Before(r.requiredAt.Add(r.cfg.DecisionDelay)) {
		return
	}
	req := q.Required
	if !req.Covers(r.recoverable.Star, r.recoverable.Pos) && !req.Covers(r.frontier.Star, r.frontier.Pos) {
		return
	}
	on := func(f Required) chain.Position {
		if f.Star != req.Star {
			return chain.Position{}
		}
		return f.Pos
	}
	r.offered = true
	frontier, recoverable := on(r.frontier), on(r.recoverable)
	if recoverable.Less(frontier) {
		recoverable = frontier
	}
	r.out = append(r.out, Offer{Node: r.cfg.Node, Token: q.Token, Star: req.Star, Frontier: frontier, Recoverable: recoverable, Usable: true})
}

// NextTick returns the earliest time after the runtime's clock at which
// a Tick could act: a health link's window running out, a concern's retry,
// the self-fence's wait, a fenced holder's next challenge, a new holder's
// links settling, or the decision delay before an offer. It is the zero
// time when only a message or a ping result can change anything. A host
// that ticks at NextTick (and after every message and ping) acts on each
// of these without delay.
func (r *Runtime) NextTick() time.Time {
	var next time.Time
	at := func(t time.Time) {
		if t.After(r.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if q := r.required; q != nil && !r.offered {
		at(r.requiredAt.Add(r.cfg.DecisionDelay))
	}
	tp := r.topo
	if tp == nil || tp.Holder == "" {
		return next
	}
	if tp.Holder != r.cfg.Node {
		if l := r.links[tp.Holder]; l != nil && l.token == tp.Token && l.ok {
			at(l.lastOK.Add(HealthWindow))
		}
		at(r.retryAt)
		return next
	}
	if r.grant.Token == 0 || r.grant.Token != tp.Token {
		return next
	}
	at(r.granted.Add(HealthWindow))
	for _, v := range tp.Voters {
		if l := r.links[v]; v != r.cfg.Node && l != nil && l.token == tp.Token && l.ok {
			at(l.lastOK.Add(HealthWindow))
		}
	}
	switch {
	case r.challenging && r.fenced:
		at(r.challenged.Add(PingEvery))
	case r.challenging:
		at(r.challenged.Add(SelfFenceWait))
	case !r.confirmed.IsZero():
		at(r.confirmed.Add(PingEvery))
	}
	return next
}

// setFrontier takes the host's report of how far it has recovered
// (FrontierReport). During recovery a frontier that covers the
// requirement is reported to the controller.
func (r *Runtime) setFrontier(star string, pos chain.Position, usable bool) {
	r.frontier, r.usable = Required{Star: star, Pos: pos}, usable
	if rc := r.recovery; rc != nil && rc.Required.Covers(star, pos) {
		r.out = append(r.out, Recovered{Node: r.cfg.Node, Token: rc.Token, Star: star, Frontier: pos})
	}
}

// Awaiting returns the requirement this node would offer for, while it
// has not offered yet: the host reports how far it has recovered and can
// recover the requirement's star (FrontierReport, RecoverableReport), and
// the node offers at a Tick once the decision delay has passed.
func (r *Runtime) Awaiting() (RequiredMsg, bool) {
	if r.required == nil || r.offered {
		return RequiredMsg{}, false
	}
	return *r.required, true
}

// RuntimeState is what a node's admission stands on: the grant held,
// whether it drains for a handoff or fenced itself, and the revision its
// progress writes are guarded with (Guard): the grant's, the recovery
// placement's, or 0 when it may write nothing.
type RuntimeState struct {
	Grant    Grant
	Draining bool
	Fenced   bool
	Revision int64
}

// RuntimeReady is what the runtime's host is to do next. Every field is
// empty when there is nothing of its kind.
type RuntimeReady struct {
	// Events go to the controller, in order.
	Events []Event
	// Heartbeat is the holder's periodic heartbeat (after HeartbeatDue),
	// sent at most once: a lost one is superseded by the next.
	Heartbeat *Heartbeat
	// Recover, when set, places the node in recovery: recover the chain
	// of Recover.Required.Star to Recover.Required.Pos, writing through
	// Guard with Recover.Grant.Revision, and step a FrontierReport. The
	// node stays read-only until it receives a grant. A placement not
	// reached is handed out again at the next Tick.
	Recover *RecoverMsg
	// Release asks the host to drain every stream (Finish) and step
	// ReleaseDone.
	Release bool
	// State, when set, is the runtime's state, changed since the last
	// Advance: the host points its guard at State.Revision.
	State *RuntimeState
}

func (r *Runtime) state() RuntimeState {
	st := RuntimeState{Grant: r.grant, Draining: r.draining, Fenced: r.fenced}
	switch {
	case r.grant.Token != 0:
		st.Revision = r.grant.Revision
	case r.recovery != nil:
		st.Revision = r.recovery.Grant.Revision
	}
	return st
}

// HasReady reports whether Ready has anything for the host.
func (r *Runtime) HasReady() bool {
	rd := r.Ready()
	return len(rd.Events) > 0 || rd.Heartbeat != nil || rd.Recover != nil || rd.Release || rd.State != nil
}

// Ready returns what the host is to do, without clearing it: the same
// things are returned again until Advance acknowledges them.
func (r *Runtime) Ready() RuntimeReady {
	rd := RuntimeReady{Events: r.out[:len(r.out):len(r.out)], Release: r.release}
	if r.heartbeat != nil {
		hb := *r.heartbeat
		rd.Heartbeat = &hb
	}
	if r.recoverDue && r.recovery != nil && !r.recovery.Required.Covers(r.frontier.Star, r.frontier.Pos) {
		m := *r.recovery
		rd.Recover = &m
	}
	if st := r.state(); st != r.acked {
		rd.State = &st
	}
	if len(rd.Events) == 0 {
		rd.Events = nil
	}
	return rd
}

// Advance acknowledges that the host handled rd, a Ready of this runtime:
// its events were sent (or given up), its heartbeat sent, its recovery and
// release started, its state applied. What came after that Ready stays
// for the next one.
func (r *Runtime) Advance(rd RuntimeReady) {
	n := min(len(rd.Events), len(r.out))
	r.out = r.out[n:]
	if len(r.out) == 0 {
		r.out = nil
	}
	if rd.Heartbeat != nil {
		r.heartbeat = nil
	}
	if rd.Recover != nil {
		r.recoverDue = false
	}
	if rd.Release {
		r.release = false
	}
	if rd.State != nil {
		r.acked = *rd.State
	}
}

// Topology returns the version of the last topology the controller
// described to this node (0 before any).
func (r *Runtime) Topology() uint64 {
	if r.topo == nil {
		return 0
	}
	return r.topo.Topology
}

// HealthyPeers returns how many of HealthPeers had a round trip on their
// link under the current token within HealthWindow: the links the node's
// concerns and the holder's self-fence count as up.
func (r *Runtime) HealthyPeers() int {
	peers, token := r.HealthPeers()
	up := 0
	for _, p := range peers {
		if ok, _ := r.healthy(p, token); ok {
			up++
		}
	}
	return up
}

// HealthPeers returns the nodes this node keeps a direct health link with
// under the current topology, and the token the links are bound to: the
// holder pings every other voter; every other node pings the holder.
func (r *Runtime) HealthPeers() ([]string, Token) {
	tp := r.topo
	if tp == nil || tp.Holder == "" {
		return nil, 0
	}
	if tp.Holder != r.cfg.Node {
		return []string{tp.Holder}, tp.Token
	}
	var out []string
	for _, v := range tp.Voters {
		if v != r.cfg.Node {
			out = append(out, v)
		}
	}
	return out, tp.Token
}
