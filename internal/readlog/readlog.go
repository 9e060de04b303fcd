// Package readlog wraps a bucket to count, per key, the copies read whole
// and the bytes every read returned: what the tests of the fence and of
// settlement check their reads against.
package readlog

import (
	"context"
	"sync"

	"github.com/cutline/cutline/objstore"
)

// Bucket is an objstore.Bucket that counts its reads. It is safe for
// concurrent use.
type Bucket struct {
	objstore.Bucket
	mu    sync.Mutex
	whole map[string]int
	bytes map[string]int
}

// Wrap returns b counting its reads.
func Wrap(b objstore.Bucket) *Bucket {
	return &Bucket{Bucket: b, whole: map[string]int{}, bytes: map[string]int{}}
}

// Get implements objstore.Bucket: a Get that returned the object is one
// copy read whole.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := b.Bucket.Get(ctx, key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.whole[key]++
	}
	b.bytes[key] += len(p)
	return p, err
}

// GetRange implements objstore.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p, err := b.Bucket.GetRange(ctx, key, off, n)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes[key] += len(p)
	return p, err
}

// Whole returns how many copies of key were read whole.
func (b *Bucket) Whole(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.whole[key]
}

// Bytes returns the bytes the reads of key returned.
func (b *Bucket) Bytes(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes[key]
}
