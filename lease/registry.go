package lease

import (
	"context"
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// Registry is the star registry: stars/<star>, bound to the star's
// session. A star is alive while its entry exists; "dead" means the
// registry has converged on it, its entry is gone. The registry's word is
// only ever a reason to wait: a star it calls dead is fenced before
// anything of it is trusted, and a fence is safe against a star that is in
// fact still running.
type Registry struct {
	store metastore.Store
	keys  keys
	clock clock.Clock
}

// NewRegistry returns the registry under root ("" or ending in '/'), the
// metastore root shared with the star's Minter and the tenure records.
func NewRegistry(store metastore.Store, root string, c clock.Clock) (*Registry, error) {
	if store == nil {
		return nil, &cutline.ConfigError{Field: "Store", Value: nil, Reason: "required"}
	}
	k, err := newKeys(root)
	if err != nil {
		return nil, err
	}
	return &Registry{store: store, keys: k, clock: clock.Or(c)}, nil
}

// Register creates star's entry bound to sess. It fails with
// ErrStarRunning when an entry bound to another session exists, and
// succeeds (a no-op) when the entry is already bound to sess.
func (r *Registry) Register(ctx context.Context, star string, sess metastore.Session) error {
	if err := epoch.ValidateName("star", star); err != nil {
		return err
	}
	if sess == nil {
		return &cutline.ConfigError{Field: "Session", Value: nil, Reason: "required"}
	}
	key := r.keys.star(star)
	v, err := encode(&starEntry{RecordHeader: metastore.RecordHeader{Kind: starKind, Format: recFormat}, Star: star, Session: sess.ID(), Since: r.clock.Now().UTC()})
	if err != nil {
		return err
	}
	_, err = metastore.PutBound(ctx, r.store, sess, key, v, 0)
	if err == nil {
		return nil
	}
	kv, ok, gerr := getOptional(ctx, r.store, key)
	if gerr != nil || !ok {
		return fmt.Errorf("lease: register %s: %w", star, err)
	}
	if kv.Session == sess.ID() {
		return nil
	}
	return fmt.Errorf("lease: star %s (session %d): %w", star, kv.Session, ErrStarRunning)
}

// Alive reports whether star's entry exists.
func (r *Registry) Alive(ctx context.Context, star string) (bool, error) {
	if err := epoch.ValidateName("star", star); err != nil {
		return false, err
	}
	_, ok, err := getOptional(ctx, r.store, r.keys.star(star))
	if err != nil {
		return false, fmt.Errorf("lease: registry %s: %w", star, err)
	}
	return ok, nil
}
