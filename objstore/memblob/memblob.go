package memblob

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/cutline/cutline/objstore"
)

// Bucket is an in-memory bucket. The zero value is not usable; call New.
type Bucket struct {
	name string
	mu   sync.RWMutex
	objs map[string][]byte
	// sorted holds keys in order for List; it may still name deleted keys
	// (List skips those) and lacks the keys in added until the next List
	// merges them. This keeps Create O(1) and a List page O(log n + limit)
	// while the bucket is not changing.
	sorted []string
	added  []string
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
	d := bytes.Clone(data)
	if d == nil {
		d = []byte{}
	}
	b.objs[key] = d
	b.added = append(b.added, key)
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
	// offset+length may overflow; compare lengths instead.
	n := min(length, int64(len(d))-offset)
	return bytes.Clone(d[offset : offset+n]), nil
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
	if !b.stale() {
		defer b.mu.RUnlock()
		return b.page(prefix, startAfter, limit), nil
	}
	b.mu.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.index()
	return b.page(prefix, startAfter, limit), nil
}

// page reads one List page from the index; b.mu is held.
func (b *Bucket) page(prefix, startAfter string, limit int) []objstore.ObjectInfo {
	// The first candidate is the smallest key ≥ prefix and > startAfter.
	i, _ := slices.BinarySearch(b.sorted, prefix)
	if startAfter >= prefix {
		j, found := slices.BinarySearch(b.sorted, startAfter)
		if found {
			j++
		}
		i = max(i, j)
	}
	var out []objstore.ObjectInfo
	for _, k := range b.sorted[i:] {
		if !strings.HasPrefix(k, prefix) || len(out) == limit {
			break
		}
		if d, ok := b.objs[k]; ok {
			out = append(out, objstore.ObjectInfo{Key: k, Size: int64(len(d))})
		}
	}
	return out
}

// stale reports whether the index must be rebuilt before a List; b.mu is
// held.
func (b *Bucket) stale() bool {
	return len(b.added) > 0 || len(b.sorted) > 2*len(b.objs)+64
}

// index merges recently created keys into the sorted index and drops keys
// that were deleted since; b.mu is held for writing.
func (b *Bucket) index() {
	if !b.stale() {
		return
	}
	slices.Sort(b.added)
	merged := make([]string, 0, len(b.objs))
	i, j := 0, 0
	for i < len(b.sorted) || j < len(b.added) {
		var k string
		switch {
		case j == len(b.added) || (i < len(b.sorted) && b.sorted[i] < b.added[j]):
			k = b.sorted[i]
			i++
		default:
			k = b.added[j]
			j++
		}
		if _, live := b.objs[k]; !live {
			continue
		}
		if n := len(merged); n > 0 && merged[n-1] == k {
			continue // deleted and created again
		}
		merged = append(merged, k)
	}
	b.sorted, b.added = merged, nil
}

// Len reports how many objects the bucket holds (a test aid).
func (b *Bucket) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.objs)
}
