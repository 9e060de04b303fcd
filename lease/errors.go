package lease

import (
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Sentinel errors of the package. Every error returned matches one of
// them, a sentinel of the package it came from (metastore, epoch, settle,
// chain, config), or a context error.
var (
	// ErrDeferred: the open is refused for now and may pass later: the
	// stream's lease is held, its predecessor is alive without a
	// clean-release mark, or its departure is in limbo. Retry the open.
	// The error is a *DeferredError.
	ErrDeferred = errkind.New(cutline.ErrConflict, "lease: open deferred")
	// ErrHeld: this star already holds the stream.
	ErrHeld = errkind.New(cutline.ErrConflict, "lease: stream already held by this star")
	// ErrNotHeld: the star does not hold the stream (never opened, or
	// finished). The error is a *StreamError.
	ErrNotHeld = errkind.New(cutline.ErrNotFound, "lease: stream not held")
	// ErrDeparting: the stream's Finish has begun; no append is taken.
	ErrDeparting = errkind.New(cutline.ErrClosed, "lease: stream is departing")
	// ErrTenureLost: another star took the stream over (after settling
	// this star's epoch) or the lease vanished with the session: this
	// star can no longer append to the stream.
	ErrTenureLost = errkind.New(cutline.ErrStale, "lease: tenure lost")
	// ErrSuperseded: a Finish found the tenure already replaced by a
	// successor that settled it; nothing was marked, nothing was lost.
	ErrSuperseded = errkind.New(cutline.ErrStale, "lease: tenure superseded")
	// ErrLimbo: Finish could not land (the metastore did not answer, or
	// the outcome of an append is not known yet) before its context
	// ended. The star keeps the lease and retries, Options.Backoff apart;
	// opens by others bounce with ErrDeferred until
	// it lands. The error is a *LimboError.
	ErrLimbo = errkind.New(cutline.ErrUnavailable, "lease: departure in limbo")
	// ErrOffset: a payload's span does not continue its stream where the
	// tenure is (a host bug: offsets must tile each stream). The error is
	// a *OffsetError.
	ErrOffset = errkind.New(cutline.ErrInvalid, "lease: span does not continue its stream")
	// ErrStaleToken: a producer presented a fencing token that is not the
	// stream's installed one (or none on a Fenced stream). The error is a
	// *TokenError.
	ErrStaleToken = errkind.New(cutline.ErrStale, "lease: stale fencing token")
	// ErrStarRunning: another instance of the star is registered under a
	// live session. Start again once its session has ended.
	ErrStarRunning = errkind.New(cutline.ErrConflict, "lease: star already running")
	// ErrSessionLost: the star's session ended; it holds nothing any more
	// and must be started again with a new session.
	ErrSessionLost = errkind.New(cutline.ErrStale, "lease: session lost")
)

// errClosed: the star was closed. It matches cutline.ErrClosed.
var errClosed = errkind.New(cutline.ErrClosed, "lease: star closed")

// Why an open was deferred.
type DeferReason string

const (
	// LeaseHeld: another star (or this one, in an open that did not
	// finish) holds the stream's advisory lease.
	LeaseHeld DeferReason = "lease held"
	// PredecessorAlive: the last writer's epoch is its class head, no
	// mark certifies its tenure, and the registry says the star is alive.
	// The open passes once the mark lands, the star restarts (superseding
	// the head), or the registry converges on its death.
	PredecessorAlive DeferReason = "predecessor alive"
	// InLimbo: this star's own departure from the stream has not landed.
	InLimbo DeferReason = "departure in limbo"
)

// DeferredError is a retryable refusal of an open.
type DeferredError struct {
	Stream string
	Reason DeferReason
	// Holder is the lease holder or the alive predecessor.
	Holder string
	// Epoch is the predecessor's unsettled head (PredecessorAlive).
	Epoch uint64
}

func (e *DeferredError) Error() string {
	s := fmt.Sprintf("lease: open of %s deferred: %s", e.Stream, e.Reason)
	if e.Holder != "" {
		s += " (" + e.Holder
		if e.Epoch != 0 {
			s += fmt.Sprintf(", epoch %d", e.Epoch)
		}
		s += ")"
	}
	return s
}

func (e *DeferredError) Unwrap() error { return ErrDeferred }

// StreamError names the stream of a sentinel error.
type StreamError struct {
	Stream string
	Err    error
}

func (e *StreamError) Error() string { return fmt.Sprintf("%v: %s", e.Err, e.Stream) }
func (e *StreamError) Unwrap() error { return e.Err }

// OffsetError: a span started at Offset where its stream continues at Want.
type OffsetError struct {
	Stream string
	Offset uint64
	Want   uint64
}

func (e *OffsetError) Error() string {
	return fmt.Sprintf("lease: stream %s continues at offset %d, not %d", e.Stream, e.Want, e.Offset)
}

func (e *OffsetError) Unwrap() error { return ErrOffset }

// TokenError: a stale token. The tokens themselves are never shown: they
// are credentials of the producers.
type TokenError struct {
	Stream    string
	Mode      Mode
	Presented bool
}

func (e *TokenError) Error() string {
	if !e.Presented {
		return fmt.Sprintf("lease: stream %s is %s: a fencing token is required", e.Stream, e.Mode)
	}
	return fmt.Sprintf("lease: stream %s (%s): the fencing token presented is not the installed one", e.Stream, e.Mode)
}

func (e *TokenError) Unwrap() error { return ErrStaleToken }

// LimboError: a departure that has not landed yet, and why.
type LimboError struct {
	Stream string
	Err    error
}

func (e *LimboError) Error() string {
	return fmt.Sprintf("lease: departure from %s in limbo (retrying): %v", e.Stream, e.Err)
}

func (e *LimboError) Unwrap() []error { return []error{ErrLimbo, e.Err} }
