package benchfix

import (
	"context"
	"sync/atomic"

	"github.com/cutline/cutline/objstore"
)

// Discard is an objstore.Bucket that accepts every Create and keeps
// nothing: reads find nothing, lists are empty. It counts the bytes it was
// given. A writer appending into Discard buckets holds only its own
// memory, which is what a heap measurement wants to see.
type Discard struct {
	name  string
	bytes atomic.Int64
}

var _ objstore.Bucket = (*Discard)(nil)

// NewDiscard returns a discarding bucket called name.
func NewDiscard(name string) *Discard { return &Discard{name: name} }

// Discards returns one discarding bucket per name, as objstore.Buckets.
func Discards(names ...string) []objstore.Bucket {
	out := make([]objstore.Bucket, len(names))
	for i, n := range names {
		out[i] = NewDiscard(n)
	}
	return out
}

// Bytes is the total size of the objects created so far.
func (d *Discard) Bytes() int64 { return d.bytes.Load() }

// Name implements objstore.Bucket.
func (d *Discard) Name() string { return d.name }

// Create implements objstore.Bucket: it succeeds, unless ctx has ended,
// and keeps nothing.
func (d *Discard) Create(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.bytes.Add(int64(len(data)))
	return nil
}

// Get implements objstore.Bucket: nothing is ever found.
func (d *Discard) Get(ctx context.Context, key string) ([]byte, error) {
	return nil, objstore.ErrNotFound
}

// GetRange implements objstore.Bucket: nothing is ever found.
func (d *Discard) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return nil, objstore.ErrNotFound
}

// Delete implements objstore.Bucket: there is nothing to delete.
func (d *Discard) Delete(ctx context.Context, key string) error { return nil }

// List implements objstore.Bucket: the bucket is always empty.
func (d *Discard) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	return nil, nil
}
