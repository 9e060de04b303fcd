package sim

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/cutline/cutline/metastore"
)

// slowStore lets other goroutines run before every metastore call (a
// number of yields drawn from the seed), so that a crash can land inside a
// step that only talks to the metastore (an open, a Finish's mark). It
// does not sleep: the lease holds a mutex across some metastore calls, and
// a goroutine waiting on a mutex is not durably blocked, so the bubble's
// clock would never reach the end of the sleep.
type slowStore struct {
	metastore.Store
	mu sync.Mutex
	r  *rand.Rand
}

func newSlowStore(s metastore.Store, seed uint64) *slowStore {
	return &slowStore{Store: s, r: rand.New(rand.NewPCG(seed, 0x5107))}
}

func (s *slowStore) wait() {
	s.mu.Lock()
	n := s.r.IntN(4)
	s.mu.Unlock()
	for range n {
		runtime.Gosched()
	}
}

// Get implements metastore.Store.
func (s *slowStore) Get(ctx context.Context, key string) (metastore.KV, error) {
	s.wait()
	return s.Store.Get(ctx, key)
}

// List implements metastore.Store.
func (s *slowStore) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	s.wait()
	return s.Store.List(ctx, prefix)
}

// Txn implements metastore.Store.
func (s *slowStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	s.wait()
	return s.Store.Txn(ctx, t)
}
