// Package newstep is a synthetic production package for the enumerator's
// test: a step with new mutating calls that no scenario reaches.
package newstep

import (
	"context"

	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// Step is a new protocol step.
type Step struct {
	buckets []objstore.Bucket
	store   metastore.Store
	sess    metastore.Session
}

// Run writes a marker in every bucket, records it, and writes a second one.
func (s *Step) Run(ctx context.Context) error {
	for _, b := range s.buckets {
		if err := b.Create(ctx, "marker", []byte("x")); err != nil {
			return err
		}
	}
	if _, err := metastore.Put(ctx, s.store, "steps/marker", []byte("x"), 0); err != nil {
		return err
	}
	go func() {
		_ = s.buckets[0].Create(ctx, "second", nil)
	}()
	return bindMarker(ctx, s.store, s.sess)
}

// Cleanup deletes the marker; a planted variant rewrites a record.
func (s *Step) Cleanup(ctx context.Context) error {
	if planted.On(planted.CutPlainPut) {
		_, _ = s.store.Txn(ctx, metastore.Txn{})
	}
	return s.buckets[0].Delete(ctx, "marker")
}

func bindMarker(ctx context.Context, st metastore.Store, sess metastore.Session) error {
	_, err := metastore.PutBound(ctx, st, sess, "steps/bound", nil, 0)
	return err
}

// wrapped is a bucket wrapper of the package: its Create is a site.
type wrapped struct{ objstore.Bucket }

func (w wrapped) Create(ctx context.Context, key string, data []byte) error {
	return w.Bucket.Create(ctx, key, data)
}

// A look-alike on a receiver of unknown type: reported as unresolved.
var _ = undefinedThing.Create(nil, "k", nil)
