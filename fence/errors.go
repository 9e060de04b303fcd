package fence

import (
	"fmt"
	"strings"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

var (
	// ErrUndecided: the context ended while unreachable buckets held the
	// deciding vote on a slot (for example a flight in one bucket, poison in
	// another, the third zone down). The fencer never guesses; retry when the
	// zone is back. The error is a *UndecidedError.
	ErrUndecided = errkind.New(cutline.ErrUnavailable, "fence: slot undecided")
	// ErrBlocked: a slot cannot be decided without an object that is neither
	// a valid flight nor poison for it (corrupt, misplaced, or of an unknown
	// format). The fencer never overwrites, copies or counts such an object;
	// an operator must look at it. The error is a *BlockedError.
	ErrBlocked = errkind.New(cutline.ErrCorrupt, "fence: slot blocked by a foreign object")
)

// UndecidedError names the slot that could not be decided and the buckets
// whose answer it waits for.
type UndecidedError struct {
	Star    string
	Epoch   uint64
	Slot    uint64
	Waiting []string  // buckets that did not answer
	Since   time.Time // when the slot was first found undecided
	Err     error     // the context's error
}

func (e *UndecidedError) Error() string {
	return fmt.Sprintf("fence %s/%d: slot %d undecided since %s, waiting for buckets %s: %v",
		e.Star, e.Epoch, e.Slot, e.Since.Format(time.RFC3339), strings.Join(e.Waiting, ","), e.Err)
}

func (e *UndecidedError) Unwrap() []error { return []error{ErrUndecided, e.Err} }

// BlockedError names the objects that block a slot.
type BlockedError struct {
	Star    string
	Epoch   uint64
	Slot    uint64
	Objects []error // one *wire.ObjectError per foreign object (bucket and key)
}

func (e *BlockedError) Error() string {
	parts := make([]string, len(e.Objects))
	for i, o := range e.Objects {
		parts[i] = o.Error()
	}
	return fmt.Sprintf("fence %s/%d: slot %d cannot be decided without foreign objects: %s", e.Star, e.Epoch, e.Slot, strings.Join(parts, "; "))
}

func (e *BlockedError) Unwrap() []error { return append([]error{ErrBlocked}, e.Objects...) }
