package cutline

import (
	"errors"
	"fmt"
)

// The kinds of error. Every error a cutline package returns, its own
// sentinels and typed errors included, matches one of these with
// errors.Is, so a host can decide what to do without knowing which layer
// failed. The packages' own sentinels say more (which slot, which stream,
// which bucket); a kind says what the caller should do.
//
// An error that wraps a cause (a record not acknowledged because its
// flight's store did not answer, say) matches its own kind and the
// cause's; one kind is still what its own sentinel says.
var (
	// ErrInvalid: the call, its input or the configuration was refused
	// (a malformed key, a payload too large, an option out of range, a
	// store that lacks a property the library needs). Nothing was
	// applied, and the same call gets the same answer: fix the input or
	// the configuration, do not retry.
	ErrInvalid = errors.New("cutline: invalid")
	// ErrDenied: a store or a peer refused the caller's credentials or
	// identity, or what it asked is not allowed to it. Nothing was
	// applied. Fix the credentials or the permissions; retrying does not
	// help.
	ErrDenied = errors.New("cutline: denied")
	// ErrNotFound: what the call names does not exist (an object, a key,
	// an epoch record, a committed position, a held stream). A definite
	// answer: it was not there when the call looked.
	ErrNotFound = errors.New("cutline: not found")
	// ErrConflict: another party holds or has changed what the call needs
	// (a compare lost, an object exists, a stream held by another star, a
	// record in another state, an offset already covered). Nothing was
	// applied. Read the current state again and decide; an open that was
	// deferred may be retried later.
	ErrConflict = errors.New("cutline: conflict")
	// ErrStale: the caller acts on a right it no longer holds: its epoch
	// was fenced, its tenure lost, its token or grant replaced, its session
	// expired. Nothing at or past the point of loss is acknowledged. Stop
	// writing under the old right and acquire a new one (open the stream
	// again, start with a new session); never retry under the old one.
	ErrStale = errors.New("cutline: stale")
	// ErrUnavailable: a store, a zone or a peer did not answer, or the
	// outcome of the call is not known yet (timed out, aborted, not
	// decided). A write may or may not have applied, and nothing is known
	// to be absent: never read it as "not found" or "failed". Retry later,
	// or settle the outcome (read back, fence).
	ErrUnavailable = errors.New("cutline: unavailable")
	// ErrClosed: the object called was closed or stopped by its owner (a
	// writer, a star, a producer, a connection, a bucket). Calls after
	// Close all fail with it; make a new one to go on.
	ErrClosed = errors.New("cutline: closed")
	// ErrTrimmed: the data was there and has been deleted by a trim, a
	// retention point or a compaction of history. Read from where the data
	// now starts (the typed errors say where).
	ErrTrimmed = errors.New("cutline: trimmed")
	// ErrCorrupt: stored data does not decode or verify as what it should
	// be, or contradicts what the library guarantees (a foreign object in
	// a slot, a cut that differs from the published one, an index in a
	// format this version does not read). The library never overwrites or
	// guesses around it; an operator must look (or upgrade, or migrate).
	ErrCorrupt = errors.New("cutline: corrupt")
)

// Kinds lists every kind, in the order of this file.
func Kinds() []error {
	return []error{ErrInvalid, ErrDenied, ErrNotFound, ErrConflict, ErrStale, ErrUnavailable, ErrClosed, ErrTrimmed, ErrCorrupt}
}

// ConfigError is the one error every package returns for a refused
// option, name or constant: it names the field, its value and why, matches
// ErrInvalid, and reaches its cause (an objstore.ErrInvalidKey, say)
// through Err. Nothing is written when a constructor or verb refuses its
// configuration, and a refusal is final: the same input gets the same
// answer. Value never holds a credential; nil or "" means there is no
// value to show.
type ConfigError struct {
	Field  string
	Value  any
	Reason string
	// Err is the cause, when there is one: errors.Is reaches it through
	// the ConfigError.
	Err error
}

func (e *ConfigError) Error() string {
	s := fmt.Sprintf("invalid %s", e.Field)
	if e.Value != nil && e.Value != "" {
		s += fmt.Sprintf(" %v", e.Value)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap makes errors.Is match ErrInvalid and the cause.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}
