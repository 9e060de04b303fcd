// Package racystore is a Bucket that enforces create-only writes one
// request at a time and breaks them under concurrency, as some stores do:
// its Create checks whether the key holds an object and then writes,
// overwriting, with a gap between. Tests reach it directly or behind an
// S3 front end to show that objstore.Verify refuses such a store.
//
// The gap is held open deterministically: a create of a matching key that
// found the key free waits until Creators creates of that key have found
// it free, and only then writes. So every create of a burst of Creators
// succeeds, and the store loses the check every time, not by luck. The
// wait is bounded; a gate that did not fill in time is reported by
// Missed, so that a test fails with a message instead of hanging.
package racystore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cutline/cutline/objstore"
)

// DefaultWait bounds how long a create waits at its gate when Options.Wait
// is 0.
const DefaultWait = 10 * time.Second

// Options configure Wrap.
type Options struct {
	// Match selects the keys whose creates race; the others are
	// create-only. Default: every key.
	Match func(key string) bool
	// Creators is how many creates of one key hold the gap open until
	// all of them have checked. Default: objstore.VerifyRaceCreators.
	Creators int
	// Wait bounds one create's wait at its gate. Default: DefaultWait.
	Wait time.Duration
}

// Bucket is the racy store over inner, which holds the objects.
type Bucket struct {
	inner objstore.Bucket
	opts  Options

	mu      sync.Mutex
	gates   map[string]*gate
	missed  []string
	written int
	write   sync.Mutex // a write is Delete then Create on inner
}

type gate struct {
	arrived int
	full    chan struct{}
}

var _ objstore.Bucket = (*Bucket)(nil)

// Wrap returns the racy store over inner.
func Wrap(inner objstore.Bucket, opts Options) *Bucket {
	if opts.Match == nil {
		opts.Match = func(string) bool { return true }
	}
	if opts.Creators == 0 {
		opts.Creators = objstore.VerifyRaceCreators
	}
	if opts.Wait == 0 {
		opts.Wait = DefaultWait
	}
	return &Bucket{inner: inner, opts: opts, gates: map[string]*gate{}}
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.inner.Name() }

// Create checks, waits at the key's gate, then overwrites.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	if !b.opts.Match(key) {
		return b.inner.Create(ctx, key, data)
	}
	if err := objstore.Precheck(ctx, key); err != nil {
		return err
	}
	switch _, err := b.inner.Get(ctx, key); {
	case err == nil:
		return &objstore.OpError{Op: "create", Bucket: b.Name(), Key: key, Err: objstore.ErrExists}
	case !errors.Is(err, objstore.ErrNotFound):
		return err
	}
	// The gap: hold the write until the whole burst has checked.
	g := b.arrive(key)
	select {
	case <-g.full:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.opts.Wait):
		b.mu.Lock()
		b.missed = append(b.missed, fmt.Sprintf("%s: %d of %d creates checked within %v", key, g.arrived, b.opts.Creators, b.opts.Wait))
		b.mu.Unlock()
	}
	b.write.Lock()
	defer b.write.Unlock()
	if err := b.inner.Delete(ctx, key); err != nil {
		return err
	}
	if err := b.inner.Create(ctx, key, data); err != nil {
		return err
	}
	b.mu.Lock()
	b.written++
	b.mu.Unlock()
	return nil
}

func (b *Bucket) arrive(key string) *gate {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gates[key]
	if g == nil {
		g = &gate{full: make(chan struct{})}
		b.gates[key] = g
	}
	g.arrived++
	if g.arrived == b.opts.Creators {
		close(g.full)
	}
	return g
}

// Missed lists the gates that did not fill in time: creates that wrote
// before the whole burst had checked.
func (b *Bucket) Missed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.missed...)
}

// Raced is how many creates of matching keys wrote.
func (b *Bucket) Raced() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	return b.inner.Get(ctx, key)
}

// GetRange implements objstore.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return b.inner.GetRange(ctx, key, offset, length)
}

// Delete implements objstore.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error { return b.inner.Delete(ctx, key) }

// List implements objstore.Bucket.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	return b.inner.List(ctx, prefix, startAfter, limit)
}
