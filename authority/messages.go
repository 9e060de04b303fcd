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

// MsgKind is what a controller message says.
type MsgKind string

const (
	// MsgGrant carries a grant to its holder: a new one, or a renewal of
	// the deadline.
	MsgGrant MsgKind = "grant"
	// MsgRevoke tells a former holder its grant under Token has ended.
	MsgRevoke MsgKind = "revoke"
	// MsgRequired tells a promotable node the grant after Token has ended
	// and what the next holder must recover.
	MsgRequired MsgKind = "required"
	// MsgRecover places a candidate in recovery: recover to Required,
	// guarding the writes with Grant.Revision, and report Recovered.
	MsgRecover MsgKind = "recover"
	// MsgRelease asks the holder to drain and release (a handoff).
	MsgRelease MsgKind = "release"
	// MsgTopology tells every node the current topology: its version,
	// the connected voters, the holder and its token.
	MsgTopology MsgKind = "topology"
	// MsgHeartbeatNow asks the holder for an immediate heartbeat (a
	// challenge of its health).
	MsgHeartbeatNow MsgKind = "heartbeat-now"
	// MsgConcernAnswer answers a concern: retry after RetryAfter (an
	// incident is open), or the health window that remains (Window).
	MsgConcernAnswer MsgKind = "concern-answer"
)

// Msg is an output of the controller: a message to one node, bound to a
// token.
type Msg struct {
	To       string
	Kind     MsgKind
	Token    Token
	Grant    Grant
	Required Required
	// Topology is the topology version the message was sent under
	// (grants, topology, concern answers).
	Topology uint64
	// Voters and Holder describe the topology (MsgTopology). Ended says
	// that Token's grant has ended: no node holds the domain, and Holder
	// is the last holder, whose links its peers keep.
	Voters []string
	Holder string
	Ended  bool
	// RetryAfter and Window answer a concern.
	RetryAfter time.Duration
	Window     time.Duration
}

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

func (Msg) input() string               { return "message" }
func (Tick) input() string              { return "tick" }
func (PingResult) input() string        { return "ping result" }
func (FrontierReport) input() string    { return "frontier report" }
func (RecoverableReport) input() string { return "recoverable report" }
func (ReleaseDone) input() string       { return "release done" }
func (HeartbeatDue) input() string      { return "heartbeat due" }
