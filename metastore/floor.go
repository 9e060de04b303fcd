package metastore

import (
	"context"
	"fmt"
	"strings"
)

// Floorer is an optional capability of a Store: the last key of a prefix
// at or below a bound, in one read. Indexes keyed by zero-padded offsets
// use it to find the entry that holds an offset without listing the
// entries below it; Floor falls back on List for a Store without it.
type Floorer interface {
	// Floor returns the key that sorts last among the keys that start
	// with prefix and are ≤ key, or ErrNotFound when there is none. key
	// must start with prefix. It is one linearizable read.
	Floor(ctx context.Context, prefix, key string) (KV, error)
}

// Floor returns the last key under prefix that is ≤ key: through the
// store's Floorer when it has one (one read), otherwise by listing the
// prefix (a read that grows with the prefix). A key that does not start
// with prefix is ErrInvalidKey.
func Floor(ctx context.Context, s Store, prefix, key string) (KV, error) {
	if err := CheckFloor(prefix, key); err != nil {
		return KV{}, err
	}
	if f, ok := s.(Floorer); ok {
		return f.Floor(ctx, prefix, key)
	}
	kvs, _, err := s.List(ctx, prefix)
	if err != nil {
		return KV{}, err
	}
	return FloorOf(kvs, prefix, key)
}

// CheckFloor validates the arguments of a Floor: a valid prefix and a
// valid key that starts with it. Backends call it before they read.
func CheckFloor(prefix, key string) error {
	if err := ValidatePrefix(prefix); err != nil {
		return err
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	if !strings.HasPrefix(key, prefix) {
		return fmt.Errorf("metastore floor: key %q is not under prefix %q: %w", key, prefix, ErrInvalidKey)
	}
	return nil
}

// FloorOf picks the floor of key from kvs, sorted by key: the last one
// ≤ key, or ErrNotFound.
func FloorOf(kvs []KV, prefix, key string) (KV, error) {
	for i := len(kvs) - 1; i >= 0; i-- {
		if kvs[i].Key <= key && strings.HasPrefix(kvs[i].Key, prefix) {
			return kvs[i], nil
		}
	}
	return KV{}, fmt.Errorf("metastore floor %q under %q: %w", key, prefix, ErrNotFound)
}
