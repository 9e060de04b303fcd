// Package metacount wraps a metastore.Store and counts what is asked of
// it: gets, lists, the keys they return, and transactions. Counts do not
// depend on the machine, so tests can assert that an operation reads the
// same number of keys whatever the star's history.
package metacount

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/cutline/cutline/metastore"
)

// Stats are the requests a Store forwarded since it was made or reset.
type Stats struct {
	Gets   int // Get calls, found or not
	Floors int // Floor calls (metastore.Floorer), found or not
	Manys  int // ReadMany requests (metastore.ManyReader), of up to 128 reads
	Lists  int // List calls
	Keys   int // keys read: one per Get or Floor that found its key, every key a List returned
	Txns   int // Txn calls
}

// Store is a counting metastore.Store. It is safe for concurrent use.
type Store struct {
	metastore.Store

	mu sync.Mutex
	s  Stats
}

// Wrap returns a counting view of s.
func Wrap(s metastore.Store) *Store { return &Store{Store: s} }

// Stats returns the counts so far.
func (c *Store) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// Reset zeroes the counts.
func (c *Store) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s = Stats{}
}

func (c *Store) add(f func(s *Stats)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.s)
}

// Get counts one get, and one key read when the key exists.
func (c *Store) Get(ctx context.Context, key string) (metastore.KV, error) {
	kv, err := c.Store.Get(ctx, key)
	c.add(func(s *Stats) {
		s.Gets++
		if err == nil {
			s.Keys++
		}
	})
	return kv, err
}

// Floor counts one floor read, and one key read when it found one. It
// forwards to the wrapped store's Floorer, or to its List fallback.
func (c *Store) Floor(ctx context.Context, prefix, key string) (metastore.KV, error) {
	kv, err := metastore.Floor(ctx, c.Store, prefix, key)
	c.add(func(s *Stats) {
		s.Floors++
		if err == nil {
			s.Keys++
		}
	})
	return kv, err
}

// ReadMany counts one request per metastore.MaxReadMany reads, and every
// key found. It forwards to the wrapped store's ManyReader, or one read at
// a time.
func (c *Store) ReadMany(ctx context.Context, reads []metastore.Read) ([]metastore.ReadResult, error) {
	res, err := metastore.ReadMany(ctx, c.Store, reads)
	c.add(func(s *Stats) {
		s.Manys++
		for _, r := range res {
			if r.Found {
				s.Keys++
			}
		}
	})
	return res, err
}

// Reads is every read request: gets, floors, lists and many-reads.
func (s Stats) Reads() int { return s.Gets + s.Floors + s.Lists + s.Manys }

// List counts one list and every key it returned.
func (c *Store) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	kvs, rev, err := c.Store.List(ctx, prefix)
	c.add(func(s *Stats) { s.Lists++; s.Keys += len(kvs) })
	return kvs, rev, err
}

// ListKeys counts one list and every key it returned. It forwards to
// the wrapped store's KeyLister, or lists and drops the values.
func (c *Store) ListKeys(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	kvs, rev, err := metastore.ListKeys(ctx, c.Store, prefix)
	c.add(func(s *Stats) { s.Lists++; s.Keys += len(kvs) })
	return kvs, rev, err
}

// Txn counts one transaction.
func (c *Store) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	c.add(func(s *Stats) { s.Txns++ })
	return c.Store.Txn(ctx, t)
}

// Watch and NewSession are forwarded uncounted.
func (c *Store) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	return c.Store.Watch(ctx, prefix, from)
}

// NewSession is forwarded uncounted.
func (c *Store) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	return c.Store.NewSession(ctx, ttl)
}
