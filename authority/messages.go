package authority

import (
	"time"

	"github.com/cutline/cutline/chain"
)

// Event is an input of the controller's state machine: what a node said
// (Node is the identity the transport authenticated, never a name taken
// from the message) or a tick of the clock.
type Event interface{ event() string }

// Connect: a node opened its control channel, declaring its capabilities
// and the token of the grant it holds (0 for none).
type Connect struct {
	Node  string
	Caps  Capabilities
	Token Token
}

// Disconnect: a node's control channel closed. Unexpected is a close
// without a goodbye (a crash, a partition).
type Disconnect struct {
	Node       string
	Unexpected bool
}

// Heartbeat: the holder is alive under Token and has acknowledged up to
// Progress on its chain.
type Heartbeat struct {
	Node     string
	Token    Token
	Progress chain.Position
}

// Offer: a promotable node offers to take the grant after Token. On
// Star's chain, Frontier is how far it has materialized (recovered), and
// Recoverable how far it can recover, judged from its local image and the
// object storage it reaches (Frontier at least). Usable says its storage
// and state can serve. Only an offer that can recover the requirement is
// taken; one that has not materialized it is placed in recovery.
type Offer struct {
	Node        string
	Token       Token
	Star        string
	Frontier    chain.Position
	Recoverable chain.Position
	Usable      bool
}

// Recovered: the candidate in recovery after Token has restored a
// continuous frontier up to Frontier on Star's chain.
type Recovered struct {
	Node     string
	Token    Token
	Star     string
	Frontier chain.Position
}

// HandoffRequest asks the controller to move the grant to Target, a
// connected promotable node, through the holder's drain and release.
type HandoffRequest struct {
	Target string
}

// Released: the holder drained (every stream through Finish) and closed
// its admission under Token; Progress is where its chain ends.
type Released struct {
	Node     string
	Token    Token
	Progress chain.Position
}

// Concern: a voter lost its direct health with the holder under Token
// (no successful round trip for the health window) as it saw the topology
// Topology. RoundTrip says its token-bound channel to the holder completed
// a round trip before: only such a concern counts. It is not a verdict:
// the controller challenges the holder and decides.
type Concern struct {
	Node      string
	Token     Token
	Topology  uint64
	RoundTrip bool
}

// ConcernCleared: the reporter's direct health with the holder recovered
// before the controller confirmed anything.
type ConcernCleared struct {
	Node  string
	Token Token
}

// Advisory: a nonvoter's route to the holder failed. It may prompt an
// immediate holder heartbeat; it never creates, refreshes, joins or
// accelerates an incident.
type Advisory struct {
	Node  string
	Token Token
}

// Tick advances the controller's clock.
type Tick struct {
	Now time.Time
}

// Challenge: the holder suspects it is isolated from a majority of the
// voters and asks the controller to confirm its own heartbeat under Token
// and Topology; the answer is a grant renewal.
type Challenge struct {
	Node     string
	Token    Token
	Topology uint64
}

func (Connect) event() string        { return "connect" }
func (Disconnect) event() string     { return "disconnect" }
func (Heartbeat) event() string      { return "heartbeat" }
func (Offer) event() string          { return "offer" }
func (Recovered) event() string      { return "recovered" }
func (HandoffRequest) event() string { return "handoff request" }
func (Released) event() string       { return "released" }
func (Tick) event() string           { return "tick" }
func (Concern) event() string        { return "concern" }
func (ConcernCleared) event() string { return "concern cleared" }
func (Advisory) event() string       { return "advisory" }
func (Challenge) event() string      { return "challenge" }

// MsgKind names a controller message: its kind on the wire.
type MsgKind string

// The kinds of controller messages, one per message type.
const (
	MsgGrant         MsgKind = "grant"
	MsgRevoke        MsgKind = "revoke"
	MsgRequired      MsgKind = "required"
	MsgRecover       MsgKind = "recover"
	MsgRelease       MsgKind = "release"
	MsgTopology      MsgKind = "topology"
	MsgHeartbeatNow  MsgKind = "heartbeat-now"
	MsgConcernAnswer MsgKind = "concern-answer"
)

// Msg is an output of the controller and an input of a node's Runtime: a
// message to one node (To), bound to a token (Token). Like the events a
// node sends (Event), it is one of a closed set of small structs, each
// holding only the fields its kind uses: GrantMsg, RevokeMsg,
// RequiredMsg, RecoverMsg, ReleaseMsg, TopologyMsg, HeartbeatNowMsg and
// ConcernAnswerMsg.
type Msg interface {
	Input
	// Recipient is the node the message is for (its To).
	Recipient() string
	// Kind names the message.
	Kind() MsgKind
}

// GrantMsg carries a grant to its holder: a new one, or a renewal of the
// deadline. Token is the grant's; Topology the topology version it was
// sent under (a renewal confirming a challenge names the challenged one).
type GrantMsg struct {
	To       string
	Token    Token
	Topology uint64
	Grant    Grant
}

// RevokeMsg tells a former holder its grant under Token has ended.
type RevokeMsg struct {
	To    string
	Token Token
}

// RequiredMsg tells a promotable node that the grant under Token has
// ended, and what the next holder must recover (Required).
type RequiredMsg struct {
	To       string
	Token    Token
	Required Required
}

// RecoverMsg places a candidate in recovery after Token: recover to
// Required, guarding the writes with Grant.Revision (Grant.Holder is the
// candidate), and report Recovered.
type RecoverMsg struct {
	To       string
	Token    Token
	Required Required
	Grant    Grant
}

// ReleaseMsg asks the holder under Token to drain and release (a
// handoff).
type ReleaseMsg struct {
	To    string
	Token Token
}

// TopologyMsg tells a node the current topology: its version, the
// connected voters, the holder and its token. Ended says that Token's
// grant has ended: no node holds the domain, and Holder is the last
// holder, whose links its peers keep.
type TopologyMsg struct {
	To       string
	Token    Token
	Topology uint64
	Voters   []string
	Holder   string
	Ended    bool
}

// HeartbeatNowMsg asks the holder under Token for an immediate heartbeat
// (a challenge of its health), under topology Topology.
type HeartbeatNowMsg struct {
	To       string
	Token    Token
	Topology uint64
}

// ConcernAnswerMsg answers a concern about the holder under Token, under
// topology Topology: retry after RetryAfter (an incident is open), or
// the health window that remains (Window).
type ConcernAnswerMsg struct {
	To         string
	Token      Token
	Topology   uint64
	RetryAfter time.Duration
	Window     time.Duration
}

func (m GrantMsg) Recipient() string         { return m.To }
func (m RevokeMsg) Recipient() string        { return m.To }
func (m RequiredMsg) Recipient() string      { return m.To }
func (m RecoverMsg) Recipient() string       { return m.To }
func (m ReleaseMsg) Recipient() string       { return m.To }
func (m TopologyMsg) Recipient() string      { return m.To }
func (m HeartbeatNowMsg) Recipient() string  { return m.To }
func (m ConcernAnswerMsg) Recipient() string { return m.To }

func (GrantMsg) Kind() MsgKind         { return MsgGrant }
func (RevokeMsg) Kind() MsgKind        { return MsgRevoke }
func (RequiredMsg) Kind() MsgKind      { return MsgRequired }
func (RecoverMsg) Kind() MsgKind       { return MsgRecover }
func (ReleaseMsg) Kind() MsgKind       { return MsgRelease }
func (TopologyMsg) Kind() MsgKind      { return MsgTopology }
func (HeartbeatNowMsg) Kind() MsgKind  { return MsgHeartbeatNow }
func (ConcernAnswerMsg) Kind() MsgKind { return MsgConcernAnswer }

func (m GrantMsg) input() string         { return string(m.Kind()) }
func (m RevokeMsg) input() string        { return string(m.Kind()) }
func (m RequiredMsg) input() string      { return string(m.Kind()) }
func (m RecoverMsg) input() string       { return string(m.Kind()) }
func (m ReleaseMsg) input() string       { return string(m.Kind()) }
func (m TopologyMsg) input() string      { return string(m.Kind()) }
func (m HeartbeatNowMsg) input() string  { return string(m.Kind()) }
func (m ConcernAnswerMsg) input() string { return string(m.Kind()) }

// Input is what a Runtime steps: a controller message (Msg) or one of
// its host's reports (Tick, PingResult, FrontierReport,
// RecoverableReport, ReleaseDone, HeartbeatDue).
type Input interface{ input() string }

// PingResult: one round trip on the direct health link with Peer under
// Token, at Now: OK when it completed, not OK when it failed or timed
// out. Both ends of a holder–peer link ping every PingEvery; a link
// without a successful round trip for HealthWindow is unhealthy.
type PingResult struct {
	Peer  string
	Token Token
	OK    bool
	Now   time.Time
}

// FrontierReport: how far the host has recovered (materialized) Star's
// chain, and whether its storage can serve (Usable). During recovery, a
// frontier that covers the requirement is reported to the controller
// (Recovered).
type FrontierReport struct {
	Star   string
	Pos    chain.Position
	Usable bool
}

// RecoverableReport: how far the host can recover Star's chain, judged
// from its local image and the object storage it reaches. The node
// offers only when that (or its frontier) covers the requirement; until
// reported, it can recover only as far as its frontier.
type RecoverableReport struct {
	Star string
	Pos  chain.Position
}

// ReleaseDone: the host drained every stream for a handoff
// (RuntimeReady.Release); Progress is where its chain ends.
type ReleaseDone struct {
	Progress chain.Position
}

// HeartbeatDue: the host's heartbeat period came round; Progress is where
// its chain is acknowledged up to. A node holding a grant hands out a
// heartbeat (RuntimeReady.Heartbeat).
type HeartbeatDue struct {
	Progress chain.Position
}

func (Tick) input() string              { return "tick" }
func (PingResult) input() string        { return "ping result" }
func (FrontierReport) input() string    { return "frontier report" }
func (RecoverableReport) input() string { return "recoverable report" }
func (ReleaseDone) input() string       { return "release done" }
func (HeartbeatDue) input() string      { return "heartbeat due" }
