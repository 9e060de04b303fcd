package authority

import (
	"fmt"
	"math"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/metastore"
)

// Token is a fencing token: every grant carries one strictly greater than
// every token issued before it for the domain.
type Token uint64

// Capabilities are what a node declares when it connects, each one
// independently: there are no roles. A node declaring none (Zero) is
// invisible to the topology: it never votes, offers or counts.
type Capabilities struct {
	// Vote: the node's reports count toward the fast-fence quorum.
	Vote bool `json:"vote"`
	// Storage: the node does storage work (settlement, trimming).
	Storage bool `json:"storage"`
	// Promotable: the node may be selected as the next holder.
	Promotable bool `json:"promotable"`
	// Contention: the node competes for capture ownership on its host.
	Contention bool `json:"contention"`
	// Cleanup: the node cleans up after a lost capture.
	Cleanup bool `json:"cleanup"`
}

// Zero reports whether no capability is declared.
func (c Capabilities) Zero() bool { return c == Capabilities{} }

// Grant is the controller's word on who writes a domain: the holder, its
// token and an absolute deadline past which the holder stops admitting
// writes unless the grant was renewed. Revision is the metastore revision
// of the token record the grant was issued at: the holder guards its
// progress writes with it (Guard).
type Grant struct {
	Domain   string    `json:"domain"`
	Holder   string    `json:"holder"`
	Token    Token     `json:"token"`
	Deadline time.Time `json:"deadline"`
	Revision int64     `json:"revision"`
}

// Phase is where a domain's authority stands.
type Phase string

const (
	// Vacant: no holder. Token is the last one issued (ended); Required is
	// what the next holder must recover; offers are taken.
	Vacant Phase = "vacant"
	// Granted: Holder writes under Token.
	Granted Phase = "granted"
	// Recovering: Candidate was selected for the grant after Token and
	// recovers up to Required; it stays read-only until the next token is
	// issued to it.
	Recovering Phase = "recovering"
	// Handoff: Holder, under Token, is asked to drain and release; Target
	// is reserved to receive the next token in the same transition.
	Handoff Phase = "handoff"
)

// Required is the minimum position the next holder must recover: a
// position on the chain of Star, the last holder.
type Required struct {
	Star string         `json:"star,omitempty"`
	Pos  chain.Position `json:"pos"`
}

// Covers reports whether a frontier on star's chain reaches r.
func (r Required) Covers(star string, frontier chain.Position) bool {
	if r.Star == "" {
		return true
	}
	return star == r.Star && r.Pos.Compare(frontier) <= 0
}

// StateRecord is a domain's durable authority state, kept by the controller at
// authority/<domain>/state and written only by compare-and-set under the
// controller's election.
type StateRecord struct {
	metastore.RecordHeader
	Domain string `json:"domain"`
	// Term counts controller elections; every elected controller writes
	// the state once with its term before anything else.
	Term      uint64   `json:"term"`
	Phase     Phase    `json:"phase"`
	Holder    string   `json:"holder,omitempty"`
	Token     Token    `json:"token"`
	Required  Required `json:"required"`
	Candidate string   `json:"candidate,omitempty"`
	Target    string   `json:"target,omitempty"`
	// Ended says why the last grant ended (Vacant), for operators.
	Ended string `json:"ended,omitempty"`
	// Revision is the metastore revision the state was read or written
	// at; TokenRevision that of the token record, which changes only when
	// the writer changes (a new token, a candidate placed in recovery, a
	// grant ended): the revision writes are guarded with (Guard).
	Revision      int64 `json:"-"`
	TokenRevision int64 `json:"-"`
}

// writer is who may write the domain's progress in state s: the holder,
// the candidate in recovery, or nobody.
func (s StateRecord) writer() (Token, string) {
	switch s.Phase {
	case Granted, Handoff:
		return s.Token, "holder:" + s.Holder
	case Recovering:
		return s.Token, "recovering:" + s.Candidate
	}
	return s.Token, ""
}

func (s StateRecord) String() string {
	switch s.Phase {
	case Granted:
		return fmt.Sprintf("%s: granted to %s (token %d)", s.Domain, s.Holder, s.Token)
	case Recovering:
		return fmt.Sprintf("%s: %s recovering to %s/%v after token %d", s.Domain, s.Candidate, s.Required.Star, s.Required.Pos, s.Token)
	case Handoff:
		return fmt.Sprintf("%s: %s (token %d) handing off to %s", s.Domain, s.Holder, s.Token, s.Target)
	}
	return fmt.Sprintf("%s: vacant after token %d", s.Domain, s.Token)
}

// Errors of the package.
var (
	// ErrNotAdmitted: the runtime's local authority does not admit writes
	// now. The error is a *NotAdmittedError saying why.
	ErrNotAdmitted = errkind.New(cutline.ErrStale, "authority: writes not admitted")
	// ErrStaleGrant: a write guarded by a grant whose token is no longer
	// the domain's current one (or its recovery transition) was refused;
	// it applied nothing. (A producer's stale fencing token is
	// lease.ErrStaleToken, another thing.) The error is a
	// *StaleGrantError.
	ErrStaleGrant = errkind.New(cutline.ErrStale, "authority: stale grant")
	// ErrDeposed: a controller's election is gone; its writes fail.
	ErrDeposed = errkind.New(cutline.ErrStale, "authority: controller deposed")
	// ErrRefused: the controller refused an event (an impostor, a stale
	// token, a token never issued, an offer out of turn). The error is a
	// *RefusedError.
	ErrRefused = errkind.New(cutline.ErrStale, "authority: refused")
	// ErrBadState: a durable State no controller writes (a phase it does
	// not know, Granted without a holder, ...): a controller does not
	// start from it. The error is a *StateError.
	ErrBadState = errkind.New(cutline.ErrCorrupt, "authority: inconsistent state")
)

// StateError says what is inconsistent in a durable State.
type StateError struct {
	Domain string
	Phase  Phase
	Reason string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("authority: the state of %s (phase %q) is inconsistent: %s", e.Domain, e.Phase, e.Reason)
}

func (e *StateError) Unwrap() error { return ErrBadState }

// check refuses a state that no controller writes. The zero phase is a
// domain never written, which reads as Vacant.
func (s StateRecord) check() error {
	bad := func(format string, args ...any) error {
		return &StateError{Domain: s.Domain, Phase: s.Phase, Reason: fmt.Sprintf(format, args...)}
	}
	name := func(field, v string, want bool) error {
		switch {
		case !want && v != "":
			return bad("%s %q is set", field, v)
		case want && v == "":
			return bad("no %s", field)
		case want:
			if err := epoch.ValidateName(field, v); err != nil {
				return bad("%v", err)
			}
		}
		return nil
	}
	holder, candidate, target := false, false, false
	switch s.Phase {
	case "", Vacant:
	case Granted:
		holder = true
	case Handoff:
		holder, target = true, true
	case Recovering:
		candidate = true
	default:
		return bad("unknown phase")
	}
	for _, err := range []error{name("holder", s.Holder, holder), name("candidate", s.Candidate, candidate), name("target", s.Target, target)} {
		if err != nil {
			return err
		}
	}
	switch {
	case holder && s.Token == 0:
		return bad("a holder without a token")
	case target && s.Target == s.Holder:
		return bad("the holder %q is its own handoff target", s.Holder)
	case s.Token == math.MaxUint64:
		// Every grant needs a token greater than the last.
		return bad("token %d leaves no next token", s.Token)
	case s.Required.Star == "" && s.Required.Pos != (chain.Position{}):
		return bad("a required position %v on no star", s.Required.Pos)
	}
	if s.Required.Star != "" {
		if err := epoch.ValidateName("required star", s.Required.Star); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// NotAdmittedError says why a runtime does not admit writes.
type NotAdmittedError struct {
	Node   string
	Reason string
}

func (e *NotAdmittedError) Error() string {
	return fmt.Sprintf("authority: %s does not admit writes: %s", e.Node, e.Reason)
}

func (e *NotAdmittedError) Unwrap() error { return ErrNotAdmitted }

// RefusedError is a refused event.
type RefusedError struct {
	Node   string
	Event  string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("authority: %s from %s refused: %s", e.Event, e.Node, e.Reason)
}

func (e *RefusedError) Unwrap() error { return ErrRefused }
