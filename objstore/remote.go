package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrUnsatisfiableRange: a store answered a ranged read with 416 (or its
// own code for it): the offset is at or past the object's end. It matches
// ErrRejected; Remote.RangeFailed turns it into GetRange's empty result.
var ErrUnsatisfiableRange = fmt.Errorf("%w: range not satisfiable", ErrRejected)

// ClassifyStatus maps the HTTP status of a store's error answer onto the
// sentinel it means, for the answers a backend's own error codes do not
// place. 0 (no response: a refused or reset connection, DNS, TLS, a
// timeout) and a 2xx or 3xx with an error attached are ErrUnavailable: an
// answer not understood means "unknown", never "absent".
func ClassifyStatus(status int) error {
	switch {
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusPreconditionFailed:
		return ErrExists
	case status == http.StatusRequestedRangeNotSatisfiable:
		return ErrUnsatisfiableRange
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrAccessDenied
	case status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500:
		return ErrUnavailable
	case status >= 400:
		return ErrRejected
	}
	return ErrUnavailable
}

// Remote is what a Bucket over a remote store does around each request,
// written once for every such backend: the checks before a request is
// sent, the classification of the store's failures, and the *OpError that
// names the operation, the bucket and the key. A backend keeps the one
// NewRemote returns and supplies only its own table of error codes
// (Classify).
type Remote struct {
	// RemoteOptions are the bucket's settings with the store's defaults
	// filled: Name is the bucket's name in errors, the rest are those of
	// Create's retries (see Resender).
	RemoteOptions
	// Kind names the backend in log records ("s3", "gcs", "azblob").
	Kind string
	// Classify maps a client's error onto the sentinel of this package it
	// means (ClassifyStatus serving for what its codes do not place). It
	// is never called with nil, nor once the caller's context has ended.
	Classify func(err error) error
}

// Err wraps err in an *OpError naming op, the bucket and key.
func (r Remote) Err(op, key string, err error) error {
	return &OpError{Op: op, Bucket: r.Name, Key: key, Err: err}
}

// Check is the check of a call about one key before anything is sent:
// Precheck, as an *OpError.
func (r Remote) Check(ctx context.Context, op, key string) error {
	if err := Precheck(ctx, key); err != nil {
		return r.Err(op, key, err)
	}
	return nil
}

// CheckCreate is Create's check: Check, and a size of at most
// MaxObjectSize (refused as ErrRejected and ErrObjectTooLarge: Get could
// not read the object back).
func (r Remote) CheckCreate(ctx context.Context, key string, data []byte) error {
	const op = "create"
	if err := r.Check(ctx, op, key); err != nil {
		return err
	}
	if len(data) > MaxObjectSize {
		return r.Err(op, key, Classify(ErrRejected, fmt.Errorf("%w: %d bytes", ErrObjectTooLarge, len(data))))
	}
	return nil
}

// CheckRange is GetRange's check: Check, and offset ≥ 0 and length > 0
// (ErrInvalidRange).
func (r Remote) CheckRange(ctx context.Context, key string, offset, length int64) error {
	const op = "getrange"
	if err := r.Check(ctx, op, key); err != nil {
		return err
	}
	if offset < 0 || length <= 0 {
		return r.Err(op, key, fmt.Errorf("%w: offset %d length %d", ErrInvalidRange, offset, length))
	}
	return nil
}

// CheckList is List's check: ctx's error, then ValidatePrefix's. It
// returns the page size to ask for: limit, or pageMax, the store's own
// page limit, when limit is not positive or is larger.
func (r Remote) CheckList(ctx context.Context, prefix string, limit, pageMax int) (int, error) {
	const op = "list"
	if err := ctx.Err(); err != nil {
		return 0, r.Err(op, prefix, err)
	}
	if err := ValidatePrefix(prefix); err != nil {
		return 0, r.Err(op, prefix, err)
	}
	if limit <= 0 || limit > pageMax {
		limit = pageMax
	}
	return limit, nil
}

// Call classifies err, the failure of a request made under ctx, into the
// error a Bucket method returns before the *OpError wrapper: when ctx has
// ended, that is the answer (ContextEnded), whatever the client made of
// it; otherwise Classify's sentinel, with err still reached by errors.As.
// It is what Resender.Create takes as its classifier.
func (r Remote) Call(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ContextEnded(ctxErr, err)
	}
	return Classify(r.Classify(err), err)
}

// Fail is Call's error wrapped in an *OpError.
func (r Remote) Fail(ctx context.Context, op, key string, err error) error {
	return r.Err(op, key, r.Call(ctx, err))
}

// Delete is what Delete does around send, the store's request: Check
// first, then send, whose failure is classified. A missing object is a
// success (deleting it again changes nothing); a missing bucket is not.
func (r Remote) Delete(ctx context.Context, key string, send func(context.Context) error) error {
	const op = "delete"
	if err := r.Check(ctx, op, key); err != nil {
		return err
	}
	err := send(ctx)
	if err == nil {
		return nil
	}
	cerr := r.Call(ctx, err)
	if errors.Is(cerr, ErrNotFound) {
		return nil
	}
	return r.Err(op, key, cerr)
}

// RangeFailed is GetRange's answer to a failed request: an empty result
// when the offset is at or past the end (ErrUnsatisfiableRange), Fail's
// error otherwise.
func (r Remote) RangeFailed(ctx context.Context, key string, err error) ([]byte, error) {
	cerr := r.Call(ctx, err)
	if errors.Is(cerr, ErrUnsatisfiableRange) {
		return []byte{}, nil
	}
	return nil, r.Err("getrange", key, cerr)
}

// ReadBody is ReadBody with MaxObjectSize as the limit (ErrObjectTooLarge
// beyond it), its error wrapped in an *OpError.
func (r Remote) ReadBody(ctx context.Context, op, key string, body io.ReadCloser, size *int64) ([]byte, error) {
	data, err := ReadBody(ctx, body, size, MaxObjectSize, ErrObjectTooLarge)
	if err != nil {
		return nil, r.Err(op, key, err)
	}
	return data, nil
}

// OpenEndedRange tells whether GetRange should ask for the rest of the
// object from offset rather than for [offset, offset+length): when the
// range runs past MaxObjectSize, no object a Remote reads is that long,
// and asking so spares the store an end near 2⁶³ that some add to and
// overflow.
func OpenEndedRange(offset, length int64) bool {
	return length > MaxObjectSize || offset > MaxObjectSize-length
}

// RangeOf is what GetRange returns of a body: data is the range asked
// for, or the whole object when the store ignored the range (whole), and
// the result is at most length bytes from offset, empty past the end.
func RangeOf(data []byte, offset, length int64, whole bool) []byte {
	if whole {
		if offset >= int64(len(data)) {
			return []byte{}
		}
		data = data[offset:]
	}
	if int64(len(data)) > length {
		data = data[:length]
	}
	return data
}
