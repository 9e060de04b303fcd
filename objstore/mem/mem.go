// Package mem is an in-memory objstore.Bucket: a map under a mutex. It
// enforces create-only writes exactly as the real backends do and is what
// unit tests and examples use. Wrap it with objstore/fault to inject errors,
// outages and stragglers.
package mem

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/cutline/cutline/objstore"
)

// Bucket is an in-memory bucket. The zero value is not usable; call New.
type Bucket struct {
	name string
	mu   sync.RWMutex
	objs map[string][]byte
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns an empty bucket called name.
func New(name string) *Bucket {
	return &Bucket{name: name, objs: make(map[string][]byte)}
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.name }

func (b *Bucket) check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
	}
	if err := objstore.ValidateKey(key); err != nil {
		return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
	}
	return nil
}

// Create implements objstore.Bucket.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	if err := b.check(ctx, "create", key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objs[key]; ok {
		return &objstore.OpError{Op: "create", Bucket: b.name, Key: key, Err: objstore.ErrExists}
	}
	b.objs[key] = bytes.Clone(data)
	if b.objs[key] == nil {
		b.objs[key] = []byte{}
	}
	return nil
}

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := b.check(ctx, "get", key); err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	d, ok := b.objs[key]
	if !ok {
		return nil, &objstore.OpError{Op: "get", Bucket: b.name, Key: key, Err: objstore.ErrNotFound}
	}
	return bytes.Clone(d), nil
}

// GetRange implements objstore.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := b.check(ctx, "getrange", key); err != nil {
		return nil, err
	}
	if offset < 0 || length <= 0 {
		return nil, &objstore.OpError{Op: "getrange", Bucket: b.name, Key: key, Err: objstore.ErrInvalidRange}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	d, ok := b.objs[key]
	if !ok {
		return nil, &objstore.OpError{Op: "getrange", Bucket: b.name, Key: key, Err: objstore.ErrNotFound}
	}
	if offset >= int64(len(d)) {
		return []byte{}, nil
	}
	end := min(offset+length, int64(len(d)))
	return bytes.Clone(d[offset:end]), nil
}

// Delete implements objstore.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.check(ctx, "delete", key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objs, key)
	return nil
}

// List implements objstore.Bucket.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, &objstore.OpError{Op: "list", Bucket: b.name, Key: prefix, Err: err}
	}
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, &objstore.OpError{Op: "list", Bucket: b.name, Key: prefix, Err: err}
	}
	if limit <= 0 {
		limit = 1000
	}
	b.mu.RLock()
	var out []objstore.ObjectInfo
	for k, d := range b.objs {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			out = append(out, objstore.ObjectInfo{Key: k, Size: int64(len(d))})
		}
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Len reports how many objects the bucket holds (a test aid).
func (b *Bucket) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.objs)
}
