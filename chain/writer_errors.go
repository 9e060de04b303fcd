package chain

import (
	"errors"
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Errors of the Writer and the Reader.
var (
	// ErrFenced: the writer halted because a slot is dead (B buckets hold
	// poison): the epoch has been or is being fenced. Nothing at or past the
	// dead slot will ever be acknowledged. The error is a *FencedError.
	ErrFenced = errkind.New(cutline.ErrStale, "chain: epoch fenced")
	// ErrNoQuorum: the writer halted because every bucket answered for a
	// slot and the answers reach neither W copies nor B poisons (objects
	// that are neither a valid flight nor poison take part). The writer
	// never guesses. The error is a *NoQuorumError naming the objects.
	ErrNoQuorum = errkind.New(cutline.ErrCorrupt, "chain: slot cannot be decided")
	// ErrAborted: Abort stopped the writer before the slot was decided and
	// acknowledged. The slot may or may not end up in the chain; a fence of
	// the epoch decides. The error is a *AbortedError.
	ErrAborted = errkind.New(cutline.ErrUnavailable, "chain: writer aborted")
	// ErrPayloadTooLarge: a payload exceeds MaxPayload. Nothing was
	// assigned. The error is a *PayloadError.
	ErrPayloadTooLarge = errkind.New(cutline.ErrInvalid, "chain: payload too large")
	// ErrPending: Future.Result was called before the future was done.
	ErrPending = errkind.New(cutline.ErrUnavailable, "chain: append not yet decided")
	// ErrConflictingFlight: a bucket holds a well-formed flight for the
	// slot whose bytes differ from the writer's (or from another bucket's).
	// One writer per epoch makes this impossible unless two writers share
	// an epoch, which compromises it: a writer that meets one before its
	// slot is decided halts with a *ConflictError, and a fence that meets
	// one stops with it and publishes nothing. A reader of an open epoch
	// counts only identical copies toward W, so it never serves a flight
	// without W of them; it reports the conflict when it meets the other
	// flight before W identical copies answered. Below a published cut it
	// serves any one copy that verifies (see Reading in the package doc).
	// It is also the Err of the *ObjectError naming the object.
	ErrConflictingFlight = errkind.New(cutline.ErrConflict, "chain: conflicting flight")

	// ErrDataUnavailable: a committed slot could not be read from any
	// bucket. The error is a *DataUnavailableError.
	ErrDataUnavailable = errkind.New(cutline.ErrUnavailable, "chain: flight unavailable")
	// ErrNotCommitted: the position is not part of the chain (yet): at or
	// past a published cut, past the committed prefix of an open epoch, or
	// in an epoch that has no record.
	ErrNotCommitted = errkind.New(cutline.ErrNotFound, "chain: position not committed")
)

// Errors that say no more than their kind.
var (
	// errClosed: Submit was called after Close or Abort.
	errClosed = errkind.New(cutline.ErrClosed, "chain: writer closed")
	// errTrimmed: the position's flight was deleted by a trim.
	errTrimmed = errkind.New(cutline.ErrTrimmed, "chain: position trimmed")
)

// FencedError reports the dead slot at which a writer halted.
type FencedError struct {
	Star  string
	Epoch uint64
	// Slot is the dead slot: the lowest slot known to be dead. Every slot
	// at or past it fails with this error.
	Slot uint64
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("chain %s/%d: slot %d is dead (epoch fenced): nothing at or past it is acknowledged", e.Star, e.Epoch, e.Slot)
}

// Unwrap makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Unwrap() error { return ErrFenced }

// NoQuorumError reports a slot whose K answers reach neither quorum.
type NoQuorumError struct {
	Star    string
	Epoch   uint64
	Slot    uint64
	Copies  int
	Poisons int
	// Objects are the *ObjectError of each bucket that held an object
	// counting as neither copy nor poison, naming bucket and key.
	Objects []error
}

func (e *NoQuorumError) Error() string {
	return fmt.Sprintf("chain %s/%d: slot %d cannot be decided (%d copies, %d poisons): %v",
		e.Star, e.Epoch, e.Slot, e.Copies, e.Poisons, errors.Join(e.Objects...))
}

// Unwrap makes errors.Is match ErrNoQuorum and the objects' errors
// (ErrCorrupt, ErrMisplaced, ErrUnknownFormat, ErrConflictingFlight).
func (e *NoQuorumError) Unwrap() []error {
	return append([]error{ErrNoQuorum}, e.Objects...)
}

// ConflictError reports a slot that holds two different well-formed
// flights: two writers wrote the epoch. The epoch is compromised; nothing
// at or past the slot is acknowledged by the writer that found it, and a
// fence refuses to count the slot either way.
type ConflictError struct {
	Star  string
	Epoch uint64
	Slot  uint64
	// Object is the *ObjectError naming a bucket and key holding a
	// flight that differs from another copy.
	Object error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("chain %s/%d: slot %d holds conflicting flights (two writers wrote the epoch): %v", e.Star, e.Epoch, e.Slot, e.Object)
}

// Unwrap makes errors.Is match ErrConflictingFlight and the object's error.
func (e *ConflictError) Unwrap() []error { return []error{ErrConflictingFlight, e.Object} }

// AbortedError reports a slot left undecided or unacknowledged by Abort.
type AbortedError struct {
	Star  string
	Epoch uint64
	Slot  uint64
}

func (e *AbortedError) Error() string {
	return fmt.Sprintf("chain %s/%d: slot %d aborted before acknowledgement (outcome unknown)", e.Star, e.Epoch, e.Slot)
}

// Unwrap makes errors.Is(err, ErrAborted) hold.
func (e *AbortedError) Unwrap() error { return ErrAborted }

// PayloadError reports a refused payload.
type PayloadError struct {
	Size int
}

func (e *PayloadError) Error() string {
	return fmt.Sprintf("chain: payload of %d bytes exceeds the maximum of %d", e.Size, MaxPayload)
}

// Unwrap makes errors.Is(err, ErrPayloadTooLarge) hold.
func (e *PayloadError) Unwrap() error { return ErrPayloadTooLarge }

// DataUnavailableError reports a committed slot that no bucket could
// serve.
type DataUnavailableError struct {
	Star  string
	Epoch uint64
	Slot  uint64
	// Err joins each bucket's reason (unreachable, absent, poison, corrupt).
	Err error
}

func (e *DataUnavailableError) Error() string {
	return fmt.Sprintf("chain %s/%d: slot %d: no bucket holds a valid flight: %v", e.Star, e.Epoch, e.Slot, e.Err)
}

// Unwrap makes errors.Is match ErrDataUnavailable and the buckets' reasons.
func (e *DataUnavailableError) Unwrap() []error { return []error{ErrDataUnavailable, e.Err} }
