package batch

import (
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Sentinel errors of the package. Every error returned matches one of
// them, cutline.ErrInvalid (options, stream names), a sentinel of the
// package the failure came from (lease, settle, chain) or a context
// error.
var (
	// ErrFailed: a record was not acknowledged. Its flight failed, or an
	// earlier record of its stream did (records behind a failed one are
	// failed too, never sent out of order), or the producer was closed
	// before its flight was decided. Like a failed lease.Star.Submit, a
	// failed record may or may not be durable. The error is a
	// *RecordError for a record, a *StreamError for an Add refused on a
	// failed stream; either reaches the cause.
	ErrFailed = errkind.New(cutline.ErrUnavailable, "batch: record not acknowledged")
	// ErrTooLarge: a record or bundle does not fit a flight. The error is
	// a *SizeError.
	ErrTooLarge = errkind.New(cutline.ErrInvalid, "batch: too large")
	// ErrInput: Encode was given streams that make no bundle. The error
	// is an *InputError.
	ErrInput = errkind.New(cutline.ErrInvalid, "batch: invalid bundle input")
	// ErrDedupFormat: bytes that are not the encoding of a Dedup
	// (Dedup.UnmarshalBinary). The error is a *DedupFormatError.
	ErrDedupFormat = errkind.New(cutline.ErrCorrupt, "batch: not a valid producer table")
)

// errClosed: the producer is closed (or closing); Add takes nothing. It
// matches cutline.ErrClosed.
var errClosed = errkind.New(cutline.ErrClosed, "batch: producer closed")

// RecordError is the failure of one record: its stream and offset, and
// the cause (the flight's error, or the earlier record's).
type RecordError struct {
	Stream string
	Offset uint64
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("batch: record %s/%d not acknowledged: %v", e.Stream, e.Offset, e.Err)
}

// Unwrap makes errors.Is match ErrFailed and the cause.
func (e *RecordError) Unwrap() []error { return []error{ErrFailed, e.Err} }

// StreamError refuses an Add on a stream whose records failed: call Reset
// once the failure is handled.
type StreamError struct {
	Stream string
	Err    error
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("batch: stream %s failed (Reset it to go on): %v", e.Stream, e.Err)
}

// Unwrap makes errors.Is match ErrFailed and the cause.
func (e *StreamError) Unwrap() []error { return []error{ErrFailed, e.Err} }

// SizeError: Size bytes where at most Max fit.
type SizeError struct {
	Size, Max int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("batch: %d bytes do not fit in %d", e.Size, e.Max)
}

// Unwrap makes errors.Is match ErrTooLarge.
func (e *SizeError) Unwrap() error { return ErrTooLarge }

// InputError names what Encode refused.
type InputError struct {
	Stream string
	Reason string
}

func (e *InputError) Error() string {
	if e.Stream == "" {
		return "batch: " + e.Reason
	}
	return fmt.Sprintf("batch: stream %s: %s", e.Stream, e.Reason)
}

// Unwrap makes errors.Is match ErrInput.
func (e *InputError) Unwrap() error { return ErrInput }

// DedupFormatError says why Dedup.UnmarshalBinary refused its bytes.
type DedupFormatError struct {
	Reason string
}

func (e *DedupFormatError) Error() string {
	return "batch: producer table invalid: " + e.Reason
}

// Unwrap makes errors.Is match ErrDedupFormat.
func (e *DedupFormatError) Unwrap() error { return ErrDedupFormat }
