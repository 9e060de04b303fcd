package objstore

import (
	"context"
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Sentinel errors. Every backend classifies its failures into these inside
// the backend, so callers test them with errors.Is and never compare strings.
var (
	// ErrNotFound: no object exists at the key. This is a definite answer.
	ErrNotFound = errkind.New(cutline.ErrNotFound, "objstore: not found")
	// ErrExists: Create lost because an object already exists at the key.
	// This is a definite answer: the existing object was not modified.
	ErrExists = errkind.New(cutline.ErrConflict, "objstore: already exists")
	// ErrUnavailable: the bucket could not be reached or did not answer
	// (timeout, 5xx, connection reset). The outcome is unknown: a Create that
	// returns it may or may not have landed; a Get that returns it says
	// nothing about whether the object exists. It must never be read as
	// "absent".
	ErrUnavailable = errkind.New(cutline.ErrUnavailable, "objstore: unavailable")
	// ErrInvalidKey: the key is malformed; nothing was sent to storage. The
	// error is a *KeyError.
	ErrInvalidKey = errkind.New(cutline.ErrInvalid, "objstore: invalid key")
	// ErrNotCreateOnly: Verify found that a bucket does not enforce
	// create-only writes. Such a bucket would break every fencing guarantee.
	ErrNotCreateOnly = errkind.New(cutline.ErrInvalid, "objstore: bucket does not enforce create-only writes")
	// ErrInvalidRange: GetRange was called with offset < 0 or length ≤ 0.
	ErrInvalidRange = errkind.New(cutline.ErrInvalid, "objstore: invalid range")

	// The store's refusals. Each is a definite answer about the request,
	// never ErrNotFound or ErrExists, and says nothing about the object at
	// the key. Unlike ErrUnavailable, retrying the same request does not
	// help.

	// ErrAccessDenied: the store refused the credentials or a permission
	// (401/403, expired or invalid tokens, bad signatures). A configuration
	// error for an operator, not an "unknown" outcome; never reported as
	// ErrNotFound.
	ErrAccessDenied = errkind.New(cutline.ErrDenied, "objstore: access denied")
	// ErrNoSuchBucket: the bucket itself does not exist. A configuration
	// error for an operator, not an "unknown" outcome; never reported as
	// ErrNotFound, so that a mistyped bucket name cannot look like an empty
	// slot.
	ErrNoSuchBucket = errkind.New(cutline.ErrInvalid, "objstore: no such bucket")
	// ErrRejected: the store refused the request as malformed or
	// unsupported (a 4xx other than the ones above).
	ErrRejected = errkind.New(cutline.ErrInvalid, "objstore: request rejected")
)

// Bucket is one zone's object store: the only storage primitive cutline
// needs. Implementations are safe for concurrent use.
//
// Errors: every method returns nil, one of the sentinels above (wrapped with
// context), or the context's error when ctx ended first. Only nil,
// ErrNotFound and ErrExists say anything about the object at the key: every
// other error, the refusals ErrAccessDenied, ErrNoSuchBucket and ErrRejected
// included, leaves it unknown to callers.
//
// Byte slices: Create does not retain data after it returns; slices returned
// by Get and GetRange belong to the caller.
type Bucket interface {
	// Name identifies the bucket in logs and errors (never a credential).
	Name() string

	// Create stores data at key only if no object exists there. It returns
	// ErrExists if one does; the existing object is left untouched. Readers
	// never observe a partially written object.
	Create(ctx context.Context, key string, data []byte) error

	// Get returns the whole object at key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)

	// GetRange returns up to length bytes of the object at key starting at
	// offset: fewer when the object ends first, none when offset is at or
	// past its end. It returns ErrNotFound when no object exists. offset
	// must be ≥ 0 and length > 0.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)

	// Delete removes the object at key. Deleting a missing object succeeds.
	Delete(ctx context.Context, key string) error

	// List returns up to limit objects whose keys start with prefix and sort
	// strictly after startAfter, in lexical key order. limit ≤ 0 means a
	// backend-chosen page size (at least 1). An empty result means there are
	// no more. See All for a paging iterator.
	List(ctx context.Context, prefix, startAfter string, limit int) ([]ObjectInfo, error)
}

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Key  string
	Size int64
}

// OpError wraps a backend failure with the operation, bucket and key. It
// unwraps to the classified sentinel (and to the backend's own error when one
// exists), so errors.Is works through it.
type OpError struct {
	Op     string // "create", "get", "getrange", "delete", "list"
	Bucket string
	Key    string
	Err    error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("objstore %s %s/%s: %v", e.Op, e.Bucket, e.Key, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// Unavailable wraps cause so that it matches ErrUnavailable while keeping the
// cause for errors.As. Backends use it to classify transport failures. It is
// Classify(ErrUnavailable, cause).
func Unavailable(cause error) error {
	return Classify(ErrUnavailable, cause)
}
