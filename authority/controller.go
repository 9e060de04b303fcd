package authority

import (
	"fmt"
	"slices"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
)

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	// Domain names what the grant is for (a star's set of streams).
	Domain string
	// Lease is how long a grant is valid after the holder's last
	// heartbeat: the deadline every renewal carries. 0 means 10 s.
	Lease time.Duration
	// Reconnect is how long an unexpected close of the holder's control
	// channel reserves its token for the same node to resume. 0 means
	// DefaultReconnect, or Lease when that is shorter; at most Lease.
	Reconnect time.Duration
	// RecoveryTimeout is how long a candidate placed in recovery has to
	// report a frontier covering the requirement. Past it the candidate
	// loses the selection, its offers are refused for as long again, and
	// another candidate can be chosen. 0 means 1 min; between 1 ms and
	// 1 h.
	RecoveryTimeout time.Duration
}

// Default timings.
const (
	DefaultLease           = 10 * time.Second
	DefaultReconnect       = 2 * time.Second
	DefaultRecoveryTimeout = time.Minute
)

func (c *ControllerConfig) validate() error {
	if err := epoch.ValidateName("domain", c.Domain); err != nil {
		return err
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Reconnect == 0 {
		c.Reconnect = min(DefaultReconnect, c.Lease)
	}
	if c.Lease < time.Millisecond || c.Lease > time.Hour {
		return &cutline.ConfigError{Field: "Lease", Value: c.Lease, Reason: "must lie in [1ms, 1h]"}
	}
	if c.Reconnect < 0 || c.Reconnect > c.Lease {
		return &cutline.ConfigError{Field: "Reconnect", Value: c.Reconnect, Reason: "must lie in [0, Lease]"}
	}
	if c.RecoveryTimeout == 0 {
		c.RecoveryTimeout = DefaultRecoveryTimeout
	}
	if c.RecoveryTimeout < time.Millisecond || c.RecoveryTimeout > time.Hour {
		return &cutline.ConfigError{Field: "RecoveryTimeout", Value: c.RecoveryTimeout, Reason: "must lie in [1ms, 1h]"}
	}
	return nil
}

// Ready is what the controller's driver does next, in order: persist
// Persist (when set) by compare-and-set, report it with Persisted, and
// send Msgs. Messages that depend on a persisted decision (a grant, a
// recovery placement) are held back until Persisted: nothing is promised
// that is not durable.
type Ready struct {
	Persist *StateRecord
	Msgs    []Msg
}

// Controller is the deterministic state machine of a domain's authority:
// the only issuer of grants. It is driven by events (Step) and ticks of
// the injected clock, and does no I/O: its driver persists its State by
// compare-and-set under the controller's election and carries its
// messages. It is not safe for concurrent use; one driver goroutine owns
// it.
type Controller struct {
	cfg    ControllerConfig
	st     StateRecord  // last persisted
	prop   *StateRecord // proposed, not persisted yet
	after  func(st StateRecord) []Msg
	handed bool // prop was handed out by Ready
	now    time.Time

	peers map[string]*peer
	// deadline: the holder's grant is valid until then (Granted,
	// Handoff). fenceUntil: a holder whose grant ended may still admit
	// writes until then; no new token is issued before.
	deadline, fenceUntil time.Time
	reservedUntil        time.Time // the holder's reconnect reservation
	progress             chain.Position
	frontier             map[string]Required // candidates' reported frontiers for st.Token
	msgs                 []Msg
	// recovering: when the candidate in recovery was placed. backoff:
	// candidates that did not recover in time, and until when their
	// offers are refused.
	recovering time.Time
	backoff    map[string]time.Time

	// The fast fence: the topology version (it changes whenever the set
	// of connected voters does; the term is in its high bits), the
	// holder's heartbeats under the current grant, and the open incident.
	topo     uint64
	beats    uint64
	incident *incident
}

// incident is a suspicion of the holder under one token and topology:
// who reported it, and the holder's heartbeat count when it was
// challenged.
type incident struct {
	token      Token
	topo       uint64
	beat0      uint64
	challenged time.Time
	reports    map[string]bool
}

// Timings of the fast fence.
const (
	// ChallengeWait is how long the controller gives a challenged holder
	// to heartbeat, and tells a reporter to wait before retrying.
	ChallengeWait = 250 * time.Millisecond
	// HealthWindow is how long a direct health link goes without a
	// successful round trip before its peer is unhealthy.
	HealthWindow = 5 * time.Second
	// PingEvery is how often both ends of a health link ping.
	PingEvery = time.Second
	// SelfFenceWait is how long a holder that suspects its isolation
	// waits for the controller to confirm its heartbeat before it closes
	// its own admission.
	SelfFenceWait = 300 * time.Millisecond
)

type peer struct {
	caps Capabilities
}

// NewController starts the state machine of an elected controller from
// the durable state it loaded (Election.Load) at time now. It assumes the
// worst about what its predecessor promised: a holder may have been
// renewed right before, so its deadline is now + Lease.
func NewController(cfg ControllerConfig, st StateRecord, now time.Time) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if st.Domain != "" && st.Domain != cfg.Domain {
		return nil, &cutline.ConfigError{Field: "state", Value: st.Domain, Reason: fmt.Sprintf("belongs to another domain than %q", cfg.Domain)}
	}
	st.Domain = cfg.Domain
	if err := st.check(); err != nil {
		return nil, err
	}
	if st.Phase == "" {
		st.Phase = Vacant
	}
	c := &Controller{cfg: cfg, st: st, now: now, peers: map[string]*peer{}, frontier: map[string]Required{}, backoff: map[string]time.Time{}, recovering: now}
	// Topology versions grow across controllers too (each election
	// writes the next term), so a node never takes a new controller's
	// topology for an older one.
	c.topo = st.Term << 32
	c.deadline = now.Add(cfg.Lease)
	c.fenceUntil = now.Add(cfg.Lease)
	// The holder's channel is not connected to this controller yet: it
	// has the reservation window to come back.
	c.reservedUntil = now.Add(cfg.Lease)
	return c, nil
}

// State returns the last persisted state.
func (c *Controller) State() StateRecord { return c.st }

// Deadline returns the holder's current deadline (meaningful while
// Granted or in Handoff).
func (c *Controller) Deadline() time.Time { return c.deadline }

// Ready returns what to do next. A Persist handed out stays pending until
// Persisted; Ready does not hand it out twice.
func (c *Controller) Ready() Ready {
	rd := Ready{Msgs: c.msgs}
	c.msgs = nil
	if c.prop != nil && !c.handed {
		p := *c.prop
		rd.Persist = &p
		c.handed = true
	}
	return rd
}

// Persisted reports that the proposed state was written, at st.Revision;
// the messages that waited for it are queued.
func (c *Controller) Persisted(st StateRecord) {
	if c.prop == nil {
		return
	}
	c.st, c.prop, c.handed = st, nil, false
	if c.after != nil {
		c.msgs = append(c.msgs, c.after(st)...)
		c.after = nil
	}
	c.maybeGrant()
}

// propose queues a durable transition; after builds the messages that may
// only go once it is persisted. One proposal is in flight at a time.
func (c *Controller) propose(next StateRecord, after func(st StateRecord) []Msg) {
	next.Revision, next.TokenRevision = c.st.Revision, c.st.TokenRevision
	c.prop, c.after, c.handed = &next, after, false
}

func (c *Controller) busy() bool { return c.prop != nil }

func refused(node string, ev Event, format string, args ...any) error {
	return &RefusedError{Node: node, Event: ev.event(), Reason: fmt.Sprintf(format, args...)}
}

// Step applies one event. A refused event changes nothing and returns a
// *RefusedError; a nil event is a *cutline.ConfigError.
func (c *Controller) Step(ev Event) error {
	switch e := ev.(type) {
	case Tick:
		if e.Now.After(c.now) {
			c.now = e.Now
		}
		c.tick()
		return nil
	case Connect:
		return c.connect(e)
	case Disconnect:
		return c.disconnect(e)
	case Heartbeat:
		return c.heartbeat(e)
	case Offer:
		return c.offer(e)
	case Recovered:
		return c.recovered(e)
	case HandoffRequest:
		return c.handoff(e)
	case Released:
		return c.released(e)
	case Concern:
		return c.concern(e)
	case ConcernCleared:
		if inc := c.incident; inc != nil && inc.token == e.Token {
			delete(inc.reports, e.Node)
		}
		return nil
	case Advisory:
		return c.advisory(e)
	case Challenge:
		return c.challenge(e)
	}
	// A nil or foreign event is the host's mistake, not a node's: it is
	// refused as an invalid argument, and changes nothing.
	return &cutline.ConfigError{Field: "event", Value: fmt.Sprintf("%T", ev), Reason: "not an event of the controller"}
}

func (c *Controller) connect(e Connect) error {
	if err := epoch.ValidateName("node", e.Node); err != nil {
		return err
	}
	if e.Token > c.st.Token {
		// Every token is durable before any node learns it: a greater one
		// was never issued, and believing it would let a node claim a
		// grant no controller gave.
		return refused(e.Node, e, "token %d was never issued (the last is %d)", e.Token, c.st.Token)
	}
	if e.Caps.Zero() {
		// Invisible to the topology: nothing to record.
		delete(c.peers, e.Node)
		return nil
	}
	old, had := c.peers[e.Node]
	c.peers[e.Node] = &peer{caps: e.Caps}
	if e.Caps.Vote != (had && old.caps.Vote) {
		c.topologyChanged()
	} else {
		c.msgs = append(c.msgs, c.topologyMsg(e.Node))
	}
	st := c.st
	switch {
	case (st.Phase == Granted || st.Phase == Handoff) && e.Node == st.Holder && e.Token == st.Token && c.now.Before(c.deadline):
		// The holder (or a new process of it) resumes its grant
		// within the reservation: no new holder is selected.
		c.reservedUntil = time.Time{}
		c.msgs = append(c.msgs, c.grantMsg(st))
		if st.Phase == Handoff {
			c.msgs = append(c.msgs, ReleaseMsg{To: st.Holder, Token: st.Token})
		}
	case e.Token != 0 && e.Token <= st.Token && !(st.Phase == Granted && e.Node == st.Holder && e.Token == st.Token):
		// A former holder: whatever it believes, its token is over.
		c.msgs = append(c.msgs, RevokeMsg{To: e.Node, Token: e.Token})
	}
	if st.Phase == Vacant && e.Caps.Promotable {
		c.msgs = append(c.msgs, RequiredMsg{To: e.Node, Token: st.Token, Required: st.Required})
	}
	return nil
}

func (c *Controller) disconnect(e Disconnect) error {
	p, ok := c.peers[e.Node]
	if !ok {
		return nil
	}
	delete(c.peers, e.Node)
	if p.caps.Vote {
		c.topologyChanged()
	}
	st := c.st
	switch {
	case (st.Phase == Granted || st.Phase == Handoff) && e.Node == st.Holder:
		if !e.Unexpected {
			// A goodbye: the holder closed its admission.
			c.fenceUntil = c.now
			c.endGrant("the holder left")
			return nil
		}
		if !c.now.Before(c.deadline) {
			c.endGrant("the holder's deadline passed")
			return nil
		}
		c.reservedUntil = c.now.Add(c.cfg.Reconnect)
	case st.Phase == Handoff && e.Node == st.Target && !c.busy():
		// The reserved target left: the holder keeps the grant.
		next := st
		next.Phase, next.Target = Granted, ""
		c.propose(next, func(s StateRecord) []Msg { return []Msg{c.grantMsg(s)} })
	case st.Phase == Recovering && e.Node == st.Candidate && !c.busy():
		c.vacate(st.Token, st.Required, "the candidate left during its recovery")
	}
	return nil
}

func (c *Controller) heartbeat(e Heartbeat) error {
	st := c.st
	if !(st.Phase == Granted || st.Phase == Handoff) || e.Node != st.Holder || e.Token != st.Token {
		if e.Token != 0 && e.Token <= st.Token {
			c.msgs = append(c.msgs, RevokeMsg{To: e.Node, Token: e.Token})
		}
		return refused(e.Node, e, "token %d is not the current grant (%s)", e.Token, st)
	}
	if _, ok := c.peers[e.Node]; !ok {
		return refused(e.Node, e, "not connected")
	}
	if !c.now.Before(c.deadline) {
		// Confirmed expired: a late heartbeat cannot revive the grant.
		c.endGrant("the holder's deadline passed")
		return refused(e.Node, e, "the grant's deadline passed")
	}
	if c.progress.Less(e.Progress) {
		c.progress = e.Progress
	}
	c.beats++
	c.deadline = c.now.Add(c.cfg.Lease)
	c.msgs = append(c.msgs, c.grantMsg(st))
	return nil
}

func (c *Controller) offer(e Offer) error {
	st := c.st
	p := c.peers[e.Node]
	switch {
	case p == nil:
		return refused(e.Node, e, "not connected")
	case !p.caps.Promotable:
		return refused(e.Node, e, "not promotable")
	case e.Token != st.Token:
		return refused(e.Node, e, "for token %d, the last issued is %d", e.Token, st.Token)
	case st.Phase == Recovering && st.Candidate == e.Node:
		return nil // a duplicate of the offer that was taken
	case st.Phase != Vacant:
		return refused(e.Node, e, "the grant is not vacant (%s)", st)
	case c.busy():
		return refused(e.Node, e, "another decision is being made durable")
	case !e.Usable:
		return refused(e.Node, e, "not usable")
	case !st.Required.Covers(e.Star, e.Recoverable) && !st.Required.Covers(e.Star, e.Frontier):
		return refused(e.Node, e, "it can recover %s to %v, short of the requirement %s/%v", e.Star, e.Recoverable, st.Required.Star, st.Required.Pos)
	case c.now.Before(c.backoff[e.Node]):
		return refused(e.Node, e, "it did not recover in time when selected; it may offer again from %v", c.backoff[e.Node])
	}
	next := st
	next.Phase, next.Candidate = Recovering, e.Node
	c.frontier = map[string]Required{e.Node: {Star: e.Star, Pos: e.Frontier}}
	materialized := st.Required.Covers(e.Star, e.Frontier)
	c.propose(next, func(s StateRecord) []Msg {
		c.recovering = c.now
		if materialized {
			return nil
		}
		return []Msg{RecoverMsg{To: e.Node, Token: s.Token, Required: s.Required,
			Grant: Grant{Domain: s.Domain, Holder: e.Node, Token: s.Token, Revision: s.TokenRevision}}}
	})
	return nil
}

func (c *Controller) recovered(e Recovered) error {
	st := c.st
	if st.Phase != Recovering || e.Node != st.Candidate || e.Token != st.Token {
		return refused(e.Node, e, "not the candidate in recovery after token %d (%s)", e.Token, st)
	}
	c.frontier[e.Node] = Required{Star: e.Star, Pos: e.Frontier}
	c.maybeGrant()
	return nil
}

// maybeGrant issues the next token to the candidate once it covers the
// requirement and every earlier holder's deadline has passed.
func (c *Controller) maybeGrant() {
	st := c.st
	if st.Phase != Recovering || c.busy() || c.now.Before(c.fenceUntil) {
		return
	}
	f, ok := c.frontier[st.Candidate]
	if !ok || !st.Required.Covers(f.Star, f.Pos) {
		return
	}
	if _, ok := c.peers[st.Candidate]; !ok {
		return
	}
	next := st
	next.Phase, next.Holder, next.Token, next.Candidate = Granted, st.Candidate, st.Token+1, ""
	c.propose(next, func(s StateRecord) []Msg {
		c.deadline = c.now.Add(c.cfg.Lease)
		c.progress, c.beats, c.incident = chain.Position{}, 0, nil
		clear(c.backoff)
		return append([]Msg{c.grantMsg(s)}, c.topologyAll()...)
	})
}

// recoveryTimedOut withdraws the selection of a candidate that has not
// reported a frontier covering the requirement within RecoveryTimeout:
// the grant is vacant again, and the candidate's offers are refused for
// as long again, so that another can be chosen.
func (c *Controller) recoveryTimedOut() {
	st := c.st
	if st.Phase != Recovering || c.busy() || c.now.Before(c.recovering.Add(c.cfg.RecoveryTimeout)) {
		return
	}
	if f, ok := c.frontier[st.Candidate]; ok && st.Required.Covers(f.Star, f.Pos) {
		return // recovered: the grant waits only for the former holder's fence
	}
	c.backoff[st.Candidate] = c.now.Add(c.cfg.RecoveryTimeout)
	c.vacate(st.Token, st.Required, fmt.Sprintf("the candidate %s did not recover within %v", st.Candidate, c.cfg.RecoveryTimeout))
}

// askAgain asks a candidate whose backoff ran out for an offer again: it
// offered once for this requirement and was refused.
func (c *Controller) askAgain() {
	for _, n := range c.sortedPeers() {
		until, ok := c.backoff[n]
		if !ok || c.now.Before(until) {
			continue
		}
		delete(c.backoff, n)
		if c.st.Phase == Vacant && c.peers[n].caps.Promotable {
			c.msgs = append(c.msgs, RequiredMsg{To: n, Token: c.st.Token, Required: c.st.Required})
		}
	}
}

func (c *Controller) handoff(e HandoffRequest) error {
	st := c.st
	p := c.peers[e.Target]
	switch {
	case st.Phase != Granted:
		return refused(e.Target, e, "no grant to hand off (%s)", st)
	case c.busy():
		return refused(e.Target, e, "another decision is being made durable")
	case p == nil || !p.caps.Promotable:
		return refused(e.Target, e, "the target is not a connected promotable node")
	case e.Target == st.Holder:
		return refused(e.Target, e, "the target holds the grant already")
	}
	next := st
	next.Phase, next.Target = Handoff, e.Target
	c.propose(next, func(s StateRecord) []Msg {
		return []Msg{ReleaseMsg{To: s.Holder, Token: s.Token}}
	})
	return nil
}

func (c *Controller) released(e Released) error {
	st := c.st
	if st.Phase != Handoff || e.Node != st.Holder || e.Token != st.Token {
		return refused(e.Node, e, "no handoff of token %d by this node (%s)", e.Token, st)
	}
	if c.busy() {
		return refused(e.Node, e, "another decision is being made durable")
	}
	old := st.Holder
	next := st
	if _, ok := c.peers[st.Target]; !ok {
		// The target left: the holder keeps its grant and reopens.
		next.Phase, next.Target = Granted, ""
		c.propose(next, func(s StateRecord) []Msg { return []Msg{c.grantMsg(s)} })
		return nil
	}
	// One durable transition: holder and token change together; no state
	// without a holder is ever published.
	next.Phase, next.Holder, next.Token, next.Target = Granted, st.Target, st.Token+1, ""
	next.Required = Required{Star: old, Pos: e.Progress}
	c.propose(next, func(s StateRecord) []Msg {
		c.deadline = c.now.Add(c.cfg.Lease)
		c.progress, c.beats, c.incident = chain.Position{}, 0, nil
		clear(c.backoff)
		return append([]Msg{c.grantMsg(s), RevokeMsg{To: old, Token: st.Token}}, c.topologyAll()...)
	})
	return nil
}

func (c *Controller) tick() {
	st := c.st
	if c.busy() {
		return
	}
	switch st.Phase {
	case Granted, Handoff:
		_, connected := c.peers[st.Holder]
		switch {
		case !c.now.Before(c.deadline):
			c.endGrant("the holder's deadline passed")
		case !connected && !c.reservedUntil.IsZero() && !c.now.Before(c.reservedUntil):
			c.endGrant("the holder did not reconnect in time")
		}
	case Recovering:
		c.maybeGrant()
		c.recoveryTimedOut()
	case Vacant:
		c.askAgain()
	}
}

// endGrant ends the current grant: the state becomes vacant with what the
// next holder must recover, the former holder is told, and the promotable
// nodes are asked for offers. The former holder may admit writes until
// its deadline: no next token is issued before.
func (c *Controller) endGrant(why string) {
	st := c.st
	if c.fenceUntil.Before(c.deadline) {
		c.fenceUntil = c.deadline
	}
	req := Required{Star: st.Holder, Pos: c.progress}
	if st.Required.Star == st.Holder && c.progress.Less(st.Required.Pos) {
		req.Pos = st.Required.Pos
	}
	holder, token := st.Holder, st.Token
	c.vacate(token, req, why, RevokeMsg{To: holder, Token: token})
}

func (c *Controller) vacate(token Token, req Required, why string, extra ...Msg) {
	next := c.st
	next.Phase, next.Holder, next.Candidate, next.Target, next.Token, next.Required = Vacant, "", "", "", token, req
	next.Ended = why
	c.frontier = map[string]Required{}
	c.propose(next, func(s StateRecord) []Msg {
		out := append([]Msg(nil), extra...)
		for _, n := range c.sortedPeers() {
			if c.peers[n].caps.Promotable {
				out = append(out, RequiredMsg{To: n, Token: s.Token, Required: s.Required})
			}
		}
		return append(out, c.topologyAll()...)
	})
}

func (c *Controller) grantMsg(s StateRecord) Msg {
	return GrantMsg{To: s.Holder, Token: s.Token, Topology: c.topo,
		Grant: Grant{Domain: s.Domain, Holder: s.Holder, Token: s.Token, Deadline: c.deadline, Revision: s.TokenRevision}}
}

// topologyChanged starts a new topology: any open incident is discarded
// (its counts were taken under another topology) and every node learns
// the new one.
func (c *Controller) topologyChanged() {
	c.topo++
	c.incident = nil
	for _, n := range c.sortedPeers() {
		c.msgs = append(c.msgs, c.topologyMsg(n))
	}
}

func (c *Controller) topologyMsg(to string) Msg {
	var voters []string
	for _, n := range c.sortedPeers() {
		if c.peers[n].caps.Vote {
			voters = append(voters, n)
		}
	}
	m := TopologyMsg{To: to, Topology: c.topo, Voters: voters, Token: c.st.Token}
	switch c.st.Phase {
	case Granted, Handoff:
		m.Holder = c.st.Holder
	default:
		// The last holder, whose grant ended: peers keep their links to
		// it, and their concerns can still confirm it unhealthy (see
		// lateConcern).
		m.Holder, m.Ended = c.st.Required.Star, true
	}
	return m
}

// current reports whether token is the grant in force.
func (c *Controller) current(token Token) bool {
	return (c.st.Phase == Granted || c.st.Phase == Handoff) && token == c.st.Token
}

// concern is the fast fence. The first concern for a token opens an
// incident: the holder's heartbeat count is recorded, the holder is asked
// for an immediate heartbeat, and the reporter is told to retry after
// ChallengeWait. Each concern then evaluates, from the current
// connections: C, the holder plus every other connected voter; R, the
// connected voters reporting; H, 1 when the challenged holder has not
// heartbeat since. The grant ends when 2(R+H) > C; otherwise the reporter
// gets the health window that remains, and the heartbeat timeout stays
// the fallback.
func (c *Controller) concern(e Concern) error {
	st := c.st
	p := c.peers[e.Node]
	if (st.Phase == Vacant || st.Phase == Recovering) && e.Token == st.Token && e.Token != 0 && p != nil && p.caps.Vote && e.RoundTrip {
		return c.lateConcern(e)
	}
	switch {
	case !c.current(e.Token):
		return refused(e.Node, e, "token %d is not the grant in force (%s)", e.Token, st)
	case p == nil:
		return refused(e.Node, e, "not connected")
	case e.Node == st.Holder:
		return refused(e.Node, e, "the holder cannot report itself")
	case !p.caps.Vote:
		// A nonvoter's report is advisory only.
		return c.advisory(Advisory{Node: e.Node, Token: e.Token})
	case !e.RoundTrip:
		return refused(e.Node, e, "its channel to the holder never completed a round trip")
	case e.Topology != c.topo:
		c.msgs = append(c.msgs, c.topologyMsg(e.Node))
		return refused(e.Node, e, "topology %d is not the current %d", e.Topology, c.topo)
	case c.busy():
		return refused(e.Node, e, "another decision is being made durable")
	}
	inc := c.incident
	if inc == nil || inc.token != st.Token || inc.topo != c.topo {
		inc = &incident{token: st.Token, topo: c.topo, beat0: c.beats, challenged: c.now, reports: map[string]bool{}}
		c.incident = inc
		c.msgs = append(c.msgs, HeartbeatNowMsg{To: st.Holder, Token: st.Token, Topology: c.topo})
	}
	inc.reports[e.Node] = true
	C, R, H := c.counts(inc)
	if 2*(R+H) > C {
		c.incident = nil
		// A majority cannot reach the holder, so it cannot reach a
		// majority either: it closes its own admission within
		// SelfFenceWait of its suspicion. The next token waits that long,
		// not for its lease deadline. (Its suspicion may trail the
		// reporters' by up to a ping period; a write it admits meanwhile
		// can never be acknowledged once the successor has fenced its
		// epoch, which the successor does before its first write.)
		until := c.now.Add(SelfFenceWait)
		c.endGrant(fmt.Sprintf("the fast fence confirmed the holder unhealthy (C=%d, R=%d, H=%d)", C, R, H))
		c.fenceUntil = until
		return nil
	}
	ans := ConcernAnswerMsg{To: e.Node, Token: st.Token, Topology: c.topo}
	if wait := inc.challenged.Add(ChallengeWait).Sub(c.now); wait > 0 {
		ans.RetryAfter = wait
	} else {
		ans.Window = c.deadline.Sub(c.now)
	}
	c.msgs = append(c.msgs, ans)
	return nil
}

// lateConcern is a concern for a grant that already ended without a
// confirmation (its holder's channel closed and the reservation ran out),
// so the next token waits for the holder's lease deadline. Concerns from
// a majority confirm the holder unhealthy after the fact: it cannot reach
// that majority either, so it has closed its own admission within
// SelfFenceWait, and the next token need not wait longer. The holder is
// gone from the topology: H is 1 and C counts it.
func (c *Controller) lateConcern(e Concern) error {
	inc := c.incident
	if inc == nil || inc.token != e.Token || inc.topo != c.topo {
		inc = &incident{token: e.Token, topo: c.topo, beat0: c.beats, challenged: c.now, reports: map[string]bool{}}
		c.incident = inc
	}
	inc.reports[e.Node] = true
	C, R := 1, 0
	for n, p := range c.peers {
		if !p.caps.Vote {
			continue
		}
		C++
		if inc.reports[n] {
			R++
		}
	}
	if 2*(R+1) > C {
		if until := c.now.Add(SelfFenceWait); until.Before(c.fenceUntil) {
			c.fenceUntil = until
		}
		c.incident = nil
		c.maybeGrant()
	}
	return nil
}

// counts derives C, R and H of an incident from the current connections.
func (c *Controller) counts(inc *incident) (C, R, H int) {
	C = 1
	for n, p := range c.peers {
		if n == c.st.Holder || !p.caps.Vote {
			continue
		}
		C++
		if inc.reports[n] {
			R++
		}
	}
	if c.beats == inc.beat0 && !c.now.Before(inc.challenged.Add(ChallengeWait)) {
		H = 1
	}
	return C, R, H
}

// advisory prompts the holder for a heartbeat; nothing else.
func (c *Controller) advisory(e Advisory) error {
	if !c.current(e.Token) {
		return refused(e.Node, e, "token %d is not the grant in force", e.Token)
	}
	if _, ok := c.peers[e.Node]; !ok {
		return refused(e.Node, e, "not connected")
	}
	c.msgs = append(c.msgs, HeartbeatNowMsg{To: c.st.Holder, Token: c.st.Token, Topology: c.topo})
	return nil
}

// challenge is a holder asking to confirm its own heartbeat: a heartbeat
// the controller answers with a renewal under the current topology.
func (c *Controller) challenge(e Challenge) error {
	if e.Topology != c.topo {
		c.msgs = append(c.msgs, c.topologyMsg(e.Node))
		return refused(e.Node, e, "topology %d is not the current %d", e.Topology, c.topo)
	}
	return c.heartbeat(Heartbeat{Node: e.Node, Token: e.Token, Progress: c.progress})
}

// topologyAll is the current topology for every node.
func (c *Controller) topologyAll() []Msg {
	var out []Msg
	for _, n := range c.sortedPeers() {
		out = append(out, c.topologyMsg(n))
	}
	return out
}

func (c *Controller) sortedPeers() []string {
	out := make([]string, 0, len(c.peers))
	for n := range c.peers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
