package metastore

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Sentinel errors, classified inside each backend.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errkind.New(cutline.ErrNotFound, "metastore: not found")
	// ErrConflict: a compare failed (a CAS was lost). Nothing was written.
	// The error is a *ConflictError carrying the key's current revision.
	ErrConflict = errkind.New(cutline.ErrConflict, "metastore: conflict")
	// ErrUnavailable: the store did not answer (timeout, lost leader,
	// connection reset), or, for List, could not finish a snapshot (see
	// Store.List). The outcome is unknown: a write that returns it may or
	// may not have applied. Retrying later may succeed.
	ErrUnavailable = errkind.New(cutline.ErrUnavailable, "metastore: unavailable")
	// ErrSessionExpired: the session's TTL ran out (or it was closed); keys
	// bound to it are gone and it cannot bind new ones.
	ErrSessionExpired = errkind.New(cutline.ErrStale, "metastore: session expired")
	// ErrInvalidKey: the key is empty or malformed (or a Txn is malformed,
	// see Store.Txn); nothing was sent.
	ErrInvalidKey = errkind.New(cutline.ErrInvalid, "metastore: invalid key")
)

// KV is one key's value and revisions. Revisions are positive and grow with
// every write to the store; Revision is the revision of the key's last
// modification and is what CAS compares.
type KV struct {
	Key            string
	Value          []byte
	Revision       int64 // revision of the last write of this key
	CreateRevision int64 // revision at which the key was (last) created
	Session        int64 // ID of the session the key is bound to, 0 if none
}

// Compare is a condition of a Txn: the key's current Revision equals
// Revision, where 0 means "the key must not exist".
type Compare struct {
	Key      string
	Revision int64
}

// Op is a write of a Txn: a put of Value at Key (bound to Session when it is
// non-nil), or a delete when Delete is set.
type Op struct {
	Key     string
	Value   []byte
	Delete  bool
	Session Session
}

// Txn is an atomic multi-key write: if every compare holds, every op is
// applied at one new revision; otherwise nothing is applied.
type Txn struct {
	If   []Compare
	Then []Op
}

// EventType says whether an event is a put or a delete.
type EventType int

const (
	EventPut EventType = iota + 1
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// WatchEvent is one change seen by Watch. For deletes, KV.Value is nil and
// KV.Revision is the revision of the delete.
type WatchEvent struct {
	Type EventType
	KV   KV
}

// Store is a durable compare-and-set key-value store: the metadata home of
// chains, epochs, tenure and grants. Implementations are safe for concurrent
// use.
//
// Errors: nil, ErrNotFound, ErrConflict (*ConflictError), ErrUnavailable,
// ErrSessionExpired, ErrInvalidKey, ErrCompacted (Watch only), or the
// context's error; a backend may add final errors of its own for
// misconfiguration (such as an endpoint that is not its server). A write
// that returns anything but nil or ErrConflict has an unknown outcome.
//
// Byte slices passed in are not retained; returned ones belong to the caller.
type Store interface {
	// Get returns the key's value and revisions, or ErrNotFound.
	Get(ctx context.Context, key string) (KV, error)

	// List returns every key that starts with prefix, in key order, and the
	// revision it read them at. The result is one snapshot: exactly the
	// keys under prefix at that revision, with their values and revisions
	// at that revision (every KV.Revision ≤ it). The revision is at least
	// that of every write that completed before List was called, so a
	// watch from it plus one misses no later change.
	//
	// List never fails with ErrCompacted. A backend that reads a large
	// prefix in several requests at one revision, and loses that revision
	// to a compaction of its history before the last one, starts over at
	// its current revision, a bounded number of times; when every attempt
	// is overtaken it returns an error matching ErrUnavailable, and reading
	// again is safe.
	List(ctx context.Context, prefix string) ([]KV, int64, error)

	// Txn applies t atomically and returns the new revision. When a compare
	// fails it returns a *ConflictError for the first failing compare and
	// applies nothing. An Op bound to an expired session fails with
	// ErrSessionExpired and applies nothing. Two ops on one key, or a
	// negative compare revision, fail with ErrInvalidKey before anything is
	// sent. A txn that changes nothing (no ops, or deletes of absent keys)
	// returns the current revision without consuming one.
	Txn(ctx context.Context, t Txn) (int64, error)

	// Watch yields the changes to keys under prefix with revision ≥ from, in
	// revision order, until ctx ends (then it yields ctx's error once) or
	// the store fails. from = 0 means "changes after now". A backend that
	// can no longer serve from (compacted history) yields an error matching
	// ErrCompacted; the caller then reads the state with List and watches
	// from List's revision plus one.
	Watch(ctx context.Context, prefix string, from int64) iter.Seq2[WatchEvent, error]

	// NewSession starts a session with the given TTL, kept alive in the
	// background until Close or until keep-alives fail for a whole TTL.
	NewSession(ctx context.Context, ttl time.Duration) (Session, error)
}

// ErrCompacted: a watch asked for history the store has discarded. Only
// Watch returns it; List never does (see Store.List).
var ErrCompacted = errkind.New(cutline.ErrTrimmed, "metastore: revision compacted")

// Session is a liveness lease. Keys written with Op.Session set vanish when
// the session ends.
type Session interface {
	// ID is the backend's identifier of the session (an etcd lease ID).
	ID() int64
	// TTL is the session's time to live.
	TTL() time.Duration
	// Done is closed when the session has ended: expired, revoked, closed,
	// or no longer confirmed. A backend closes it when it could not renew
	// the session for (at most) its TTL, measured from the sending of the
	// last renewal that got through, so that the holder learns of the loss
	// no later than the store expires the session and others watching its
	// keys see them go. A session that ended never comes back.
	Done() <-chan struct{}
	// Close revokes the session (its bound keys are deleted) and stops its
	// keep-alives. Closing twice is a no-op.
	Close(ctx context.Context) error
}

// ConflictError reports a lost compare. Revision is the key's current
// revision (0 when the key does not exist).
type ConflictError struct {
	Key      string
	Expected int64
	Revision int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("metastore: conflict on %q: expected revision %d, found %d", e.Key, e.Expected, e.Revision)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// Put writes value at key if the key's revision is expect (0: the key must
// not exist), and returns the new revision.
func Put(ctx context.Context, s Store, key string, value []byte, expect int64) (int64, error) {
	return s.Txn(ctx, Txn{If: []Compare{{Key: key, Revision: expect}}, Then: []Op{{Key: key, Value: value}}})
}

// PutBound is Put with the key bound to sess: it vanishes when sess ends.
func PutBound(ctx context.Context, s Store, sess Session, key string, value []byte, expect int64) (int64, error) {
	return s.Txn(ctx, Txn{If: []Compare{{Key: key, Revision: expect}}, Then: []Op{{Key: key, Value: value, Session: sess}}})
}

// Delete deletes key if its revision is expect.
func Delete(ctx context.Context, s Store, key string, expect int64) error {
	_, err := s.Txn(ctx, Txn{If: []Compare{{Key: key, Revision: expect}}, Then: []Op{{Key: key, Delete: true}}})
	return err
}

// Unavailable wraps cause so that it matches ErrUnavailable and keeps the
// cause for errors.As. Backends use it to classify failures.
func Unavailable(cause error) error {
	return &classified{kind: ErrUnavailable, cause: cause}
}

type classified struct {
	kind  error
	cause error
}

func (c *classified) Error() string   { return c.kind.Error() + ": " + c.cause.Error() }
func (c *classified) Unwrap() []error { return []error{c.kind, c.cause} }

// ValidateKey checks a key: non-empty, at most 1024 bytes, no control
// characters. Keys are otherwise opaque to the store.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > 1024 {
		return fmt.Errorf("%w: longer than 1024 bytes", ErrInvalidKey)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: control character %U in %q", ErrInvalidKey, r, key)
		}
	}
	return nil
}

// ValidatePrefix checks a List or Watch prefix: empty means every key;
// otherwise it follows the rules of ValidateKey.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return ValidateKey(prefix)
}

// ValidateTxn is the check a Store backend makes on a Txn before anything
// is sent or applied: every key passes ValidateKey, no compare has a
// negative revision, and no key has two ops (etcd refuses that too). Each
// failure matches ErrInvalidKey and names the key.
func ValidateTxn(t Txn) error {
	for _, c := range t.If {
		if err := ValidateKey(c.Key); err != nil {
			return err
		}
		if c.Revision < 0 {
			return fmt.Errorf("%w: negative revision %d for %q", ErrInvalidKey, c.Revision, c.Key)
		}
	}
	seen := make(map[string]bool, len(t.Then))
	for _, op := range t.Then {
		if err := ValidateKey(op.Key); err != nil {
			return err
		}
		if seen[op.Key] {
			return fmt.Errorf("%w: two ops on %q in one txn", ErrInvalidKey, op.Key)
		}
		seen[op.Key] = true
	}
	return nil
}
