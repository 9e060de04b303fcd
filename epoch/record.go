package epoch

import (
	"fmt"
	"strings"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// Record kinds and the newest formats this package reads and writes.
const (
	chainKind    = "chain"
	recordKind   = "epoch"
	chainFormat  = 1
	recordFormat = 1
)

// State is the life stage of an epoch. It only moves forward:
// open → fenced → settled.
type State string

const (
	// StateOpen: the epoch may still be written by its writer.
	StateOpen State = "open"
	// StateFenced: the cut is published; nothing at or past it is ever
	// acknowledged.
	StateFenced State = "fenced"
	// StateSettled: garbage past the cut is gone, coverage is restored and
	// the checkpoint equals the cut.
	StateSettled State = "settled"
)

func (s State) rank() int {
	switch s {
	case StateOpen:
		return 1
	case StateFenced:
		return 2
	case StateSettled:
		return 3
	}
	return 0
}

// Constants are fixed when an epoch is minted and never change: a change of
// any of them is a new epoch (a roll).
type Constants struct {
	// Class is the storage class; the chain keeps one head per class.
	Class string `json:"class"`
	// Buckets are the zones' bucket names in their fixed order. The order
	// matters: fencers poison empty buckets in this order.
	Buckets []string `json:"buckets"`
	// W is the copy quorum: a slot is committed when W buckets hold its
	// flight.
	W int `json:"w"`
	// Window is how many slots may be assigned past the release point.
	Window int `json:"window"`
	// Prefix is the object key prefix of the epoch's slots in every
	// bucket: "" or a '/'-separated path of valid names. Every writer,
	// reader, fencer and settler of the epoch lays out keys from it (see
	// wire.KeysOf in package chain/wire), so they cannot disagree on where the slots are.
	Prefix string `json:"prefix,omitempty"`
}

// MaxWindow bounds Constants.Window. A writer keeps at most window flights
// in memory, and settlement probes window+1 slots in every bucket for
// garbage, so the window bounds both memory and the cost of a takeover.
const MaxWindow = 1 << 16

// K is the number of buckets.
func (c Constants) K() int { return len(c.Buckets) }

// B is the blocking set: K−W+1 poisons make a slot dead.
func (c Constants) B() int { return len(c.Buckets) - c.W + 1 }

// Validate checks the constants: a valid class, 1 ≤ K, distinct valid bucket
// names, 1 ≤ W ≤ K, 1 ≤ window ≤ MaxWindow. Each violation is a *cutline.ConfigError naming the
// field.
func (c Constants) Validate() error {
	if err := ValidateName("class", c.Class); err != nil {
		return err
	}
	if len(c.Buckets) == 0 {
		return &cutline.ConfigError{Field: "buckets", Value: "[]", Reason: "K must be at least 1"}
	}
	seen := make(map[string]bool, len(c.Buckets))
	for i, b := range c.Buckets {
		if err := ValidateName(fmt.Sprintf("buckets[%d]", i), b); err != nil {
			return err
		}
		if seen[b] {
			return &cutline.ConfigError{Field: fmt.Sprintf("buckets[%d]", i), Value: fmt.Sprintf("%q", b), Reason: "duplicate bucket"}
		}
		seen[b] = true
	}
	if c.W < 1 || c.W > len(c.Buckets) {
		return &cutline.ConfigError{Field: "w", Value: c.W, Reason: fmt.Sprintf("must satisfy 1 ≤ W ≤ K=%d", len(c.Buckets))}
	}
	if c.Window < 1 || c.Window > MaxWindow {
		return &cutline.ConfigError{Field: "window", Value: c.Window, Reason: fmt.Sprintf("must satisfy 1 ≤ window ≤ %d", MaxWindow)}
	}
	return ValidatePrefix(c.Prefix)
}

// slotKeyTail is the longest key a slot adds after the prefix:
// /<star>/<20-digit epoch>/<20-digit slot>.
const slotKeyTail = 1 + MaxNameLen + 1 + 20 + 1 + 20

// ValidatePrefix checks an object key prefix: "" or '/'-separated valid
// names (see ValidateName), short enough that the slot key of any star
// fits objstore.MaxKeyLen. A violation is a *cutline.ConfigError for "prefix".
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		if err := ValidateName("prefix", seg); err != nil {
			return err
		}
	}
	if len(prefix)+slotKeyTail > objstore.MaxKeyLen {
		return &cutline.ConfigError{Field: "prefix", Value: fmt.Sprintf("%.20q…", prefix), Reason: "too long for the keys of the longest star ids",
			Err: &objstore.KeyError{Key: prefix, Reason: fmt.Sprintf("slot keys under it may exceed %d bytes", objstore.MaxKeyLen)}}
	}
	return nil
}

// Cursors are an epoch's positions (slot numbers) that only advance.
// trimmed ≤ checkpoint, rewritten ≤ checkpoint, and once fenced
// checkpoint ≤ cut.
type Cursors struct {
	// Checkpoint: every slot below it is committed and covered by the
	// host's index. Settlement moves it to the cut.
	Checkpoint uint64 `json:"checkpoint"`
	// Trimmed: flights below it have been deleted (Trim).
	Trimmed uint64 `json:"trimmed"`
	// Rewritten: slots below it have been rewritten elsewhere by the host
	// (compaction), so trimming them loses nothing.
	Rewritten uint64 `json:"rewritten"`
}

// Record is an epoch's metastore record, chains/<star>/<epoch>.
type Record struct {
	metastore.RecordHeader
	Star      string    `json:"star"`
	Epoch     uint64    `json:"epoch"`
	Constants Constants `json:"constants"`
	State     State     `json:"state"`
	// Cut is the first dead slot; meaningful once State is fenced or
	// settled. [0, Cut) are all committed.
	Cut      uint64    `json:"cut"`
	Cursors  Cursors   `json:"cursors"`
	MintedAt time.Time `json:"minted_at"`
	// MintedBy is the minting process's Options.Identity (forensics
	// only). Stored as "writer" since the first record format.
	MintedBy  string    `json:"writer,omitempty"`
	FencedAt  time.Time `json:"fenced_at,omitzero"`
	SettledAt time.Time `json:"settled_at,omitzero"`

	// Revision is the metastore revision the record was read at.
	Revision int64 `json:"-"`

	// claim is the right to write the epoch, set only on the record Mint
	// returns (and shared by its copies). See Claim.
	claim *claimToken
}

// Fenced reports whether the cut is published (fenced or settled).
func (r *Record) Fenced() bool { return r.State == StateFenced || r.State == StateSettled }

func (r *Record) String() string {
	s := fmt.Sprintf("%s/%d (%s, K=%d W=%d window=%d) %s", r.Star, r.Epoch, r.Constants.Class, r.Constants.K(), r.Constants.W, r.Constants.Window, r.State)
	if r.Fenced() {
		s += fmt.Sprintf(" cut=%d", r.Cut)
	}
	return s
}

// check verifies a decoded record's internal consistency, so that a corrupt
// or hand-edited record is refused rather than acted upon.
func (r *Record) check(key, star string, epoch uint64) error {
	bad := func(reason string) error {
		return &metastore.RecordError{Key: key, Kind: recordKind, Reason: reason}
	}
	switch {
	case r.Star != star || r.Epoch != epoch:
		return bad(fmt.Sprintf("claims %s/%d", r.Star, r.Epoch))
	case r.Epoch == 0:
		return bad("epoch numbers start at 1")
	case r.State.rank() == 0:
		return bad(fmt.Sprintf("unknown state %q", r.State))
	case r.State == StateOpen && r.Cut != 0:
		return bad(fmt.Sprintf("open but carries cut %d", r.Cut))
	case r.Cursors.Trimmed > r.Cursors.Checkpoint || r.Cursors.Rewritten > r.Cursors.Checkpoint:
		return bad("cursors out of order")
	case r.Fenced() && r.Cursors.Checkpoint > r.Cut:
		return bad("checkpoint past the cut")
	}
	if err := r.Constants.Validate(); err != nil {
		return bad(err.Error())
	}
	return nil
}

// CounterRecord is a star's counter record, chains/<star>.
type CounterRecord struct {
	metastore.RecordHeader
	Star string `json:"star"`
	// Next is the number the next mint will take. Epoch numbers start at 1.
	Next uint64 `json:"next"`
	// Heads maps each class to the newest epoch minted in it.
	Heads map[string]uint64 `json:"heads"`
	// Unsettled is the settlement cursor: every epoch numbered below it
	// is settled or has no record, so the oldest epoch that may still
	// need settling is Unsettled or later. It is never above Next, only
	// moves forward, and is moved by MarkSettled. 0 (a counter written
	// before the field existed) says nothing, as 1 does.
	Unsettled uint64 `json:"unsettled,omitempty"`

	// Revision is the metastore revision the record was read at (0 when
	// the star has never minted).
	Revision int64 `json:"-"`
}
