package settletest

import (
	"context"
	"errors"
	"sync"

	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// ErrCrashed is what a crashed process's requests answer, wrapped in the
// storage's class for an unknown outcome.
var ErrCrashed = errors.New("process crashed")

// KillSwitch crashes a process at its Nth mutating request (a metastore
// Txn, an object Create or Delete): with lost set, that request is carried
// out and its answer lost; otherwise it never arrives. From then on every
// request of the process fails, and its context is cancelled, as if the
// process had died there.
type KillSwitch struct {
	at   int
	lost bool

	mu     sync.Mutex
	n      int
	dead   bool
	what   []string
	cancel context.CancelFunc
	fired  chan struct{}
}

// NewKillSwitch crashes at the at-th mutating request (from 1), losing
// its answer if lost.
func NewKillSwitch(at int, lost bool) *KillSwitch {
	return &KillSwitch{at: at, lost: lost, fired: make(chan struct{})}
}

// Bind makes ctx the process's context: the switch cancels it when it
// fires.
func (k *KillSwitch) Bind(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	k.mu.Lock()
	k.cancel = cancel
	k.mu.Unlock()
	return ctx
}

// Fired is closed when the first crashed request has been answered.
func (k *KillSwitch) Fired() <-chan struct{} { return k.fired }

// Dead reports whether the process crashed.
func (k *KillSwitch) Dead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead
}

// Report tells whether the switch fired, and the request it fired at.
func (k *KillSwitch) Report() (bool, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.dead {
		return false, ""
	}
	return true, k.what[len(k.what)-1]
}

// Store is s as the process sees it: through the switch.
func (k *KillSwitch) Store(s metastore.Store) metastore.Store { return &crashStore{Store: s, k: k} }

// Bucket is b as the process sees it: through the switch.
func (k *KillSwitch) Bucket(b objstore.Bucket) objstore.Bucket { return &crashBucket{Bucket: b, k: k} }

// mutate admits one mutating request: crash tells whether the process is
// dead (now or already), run whether the request is carried out anyway
// (its answer lost).
func (k *KillSwitch) mutate(what string) (run bool, crash bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return false, true
	}
	k.n++
	k.what = append(k.what, what)
	if k.n != k.at {
		return true, false
	}
	k.dead = true
	return k.lost, true
}

// fireOnce cancels the process and signals the test, the first time a
// crash is answered.
func (k *KillSwitch) fireOnce() {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.fired:
		return
	default:
	}
	if k.cancel != nil {
		k.cancel()
	}
	close(k.fired)
}

type crashStore struct {
	metastore.Store
	k *KillSwitch
}

func (s *crashStore) Get(ctx context.Context, key string) (metastore.KV, error) {
	if s.k.Dead() {
		return metastore.KV{}, metastore.Unavailable(ErrCrashed)
	}
	return s.Store.Get(ctx, key)
}

func (s *crashStore) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	if s.k.Dead() {
		return nil, 0, metastore.Unavailable(ErrCrashed)
	}
	return s.Store.List(ctx, prefix)
}

func (s *crashStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	what := "txn"
	if len(t.Then) > 0 {
		what = "txn " + t.Then[0].Key
	}
	run, crash := s.k.mutate(what)
	if !crash {
		return s.Store.Txn(ctx, t)
	}
	if run {
		_, _ = s.Store.Txn(context.WithoutCancel(ctx), t)
	}
	s.k.fireOnce()
	return 0, metastore.Unavailable(ErrCrashed)
}

type crashBucket struct {
	objstore.Bucket
	k *KillSwitch
}

func (b *crashBucket) crashed(op, key string) error {
	return &objstore.OpError{Op: op, Bucket: b.Name(), Key: key, Err: objstore.Unavailable(ErrCrashed)}
}

func (b *crashBucket) Create(ctx context.Context, key string, data []byte) error {
	run, crash := b.k.mutate("create " + b.Name() + ":" + key)
	if !crash {
		return b.Bucket.Create(ctx, key, data)
	}
	if run {
		_ = b.Bucket.Create(context.WithoutCancel(ctx), key, data)
	}
	b.k.fireOnce()
	return b.crashed("create", key)
}

func (b *crashBucket) Delete(ctx context.Context, key string) error {
	run, crash := b.k.mutate("delete " + b.Name() + ":" + key)
	if !crash {
		return b.Bucket.Delete(ctx, key)
	}
	if run {
		_ = b.Bucket.Delete(context.WithoutCancel(ctx), key)
	}
	b.k.fireOnce()
	return b.crashed("delete", key)
}

func (b *crashBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if b.k.Dead() {
		return nil, b.crashed("get", key)
	}
	return b.Bucket.Get(ctx, key)
}

func (b *crashBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if b.k.Dead() {
		return nil, b.crashed("getrange", key)
	}
	return b.Bucket.GetRange(ctx, key, off, n)
}

func (b *crashBucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	if b.k.Dead() {
		return nil, b.crashed("list", prefix)
	}
	return b.Bucket.List(ctx, prefix, after, limit)
}
