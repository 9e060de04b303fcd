package memstore

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore"
)

// Options configures a Store. The zero value works.
type Options struct {
	// Clock drives session expiry. Nil means the wall clock.
	Clock clock.Clock
	// HistoryLimit is how many of the newest events are kept at least for
	// watches from an old revision; older ones are compacted. 0 means
	// 100,000.
	HistoryLimit int
}

// Store is an in-memory metastore.Store. Create it with New.
type Store struct {
	clock   clock.Clock
	limit   int
	mu      sync.Mutex
	rev     int64
	kvs     map[string]metastore.KV
	history []metastore.WatchEvent
	// compactRev is the newest revision whose events were dropped.
	compactRev int64
	changed    chan struct{}
	nextID     int64
	sess       map[int64]*session
	// partitioned is set between Partition and Heal; cut holds the sessions
	// that Partition suspended, so that Heal resumes only those.
	partitioned bool
	cut         map[int64]bool
}

var _ metastore.Store = (*Store)(nil)

// New returns an empty store.
func New(opts Options) *Store {
	if opts.HistoryLimit <= 0 {
		opts.HistoryLimit = 100_000
	}
	return &Store{
		clock:   clock.Or(opts.Clock),
		limit:   opts.HistoryLimit,
		kvs:     make(map[string]metastore.KV),
		changed: make(chan struct{}),
		sess:    make(map[int64]*session),
	}
}

func clone(kv metastore.KV) metastore.KV {
	kv.Value = bytes.Clone(kv.Value)
	return kv
}

// unreachable returns the error of a call made during a partition; s.mu is
// held.
func (s *Store) unreachableLocked(op, key string) error {
	if !s.partitioned {
		return nil
	}
	return fmt.Errorf("metastore %s %q: %w", op, key, metastore.Unavailable(errPartitioned))
}

var errPartitioned = fmt.Errorf("memstore: store partitioned")

// Get implements metastore.Store.
func (s *Store) Get(ctx context.Context, key string) (metastore.KV, error) {
	if err := ctx.Err(); err != nil {
		return metastore.KV{}, err
	}
	if err := metastore.ValidateKey(key); err != nil {
		return metastore.KV{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unreachableLocked("get", key); err != nil {
		return metastore.KV{}, err
	}
	kv, ok := s.kvs[key]
	if !ok {
		return metastore.KV{}, fmt.Errorf("metastore get %q: %w", key, metastore.ErrNotFound)
	}
	return clone(kv), nil
}

// List implements metastore.Store. It reads the whole prefix in one step
// under the store's lock: the result is a snapshot at the returned
// revision, and no compaction (Compact, HistoryLimit) can interrupt it.
func (s *Store) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	return s.list(ctx, prefix, true)
}

// ListKeys implements metastore.KeyLister: List without copying the
// values.
func (s *Store) ListKeys(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	return s.list(ctx, prefix, false)
}

func (s *Store) list(ctx context.Context, prefix string, values bool) ([]metastore.KV, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := metastore.ValidatePrefix(prefix); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unreachableLocked("list", prefix); err != nil {
		return nil, 0, err
	}
	var out []metastore.KV
	for k, kv := range s.kvs {
		if strings.HasPrefix(k, prefix) && values {
			out = append(out, clone(kv))
		} else if strings.HasPrefix(k, prefix) {
			kv.Value = nil
			out = append(out, kv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, s.rev, nil
}

// Txn implements metastore.Store.
func (s *Store) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := metastore.ValidateTxn(t); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(t.Then) > 0 {
		if err := s.unreachableLocked("txn", t.Then[0].Key); err != nil {
			return 0, err
		}
	} else if err := s.unreachableLocked("txn", ""); err != nil {
		return 0, err
	}
	for _, c := range t.If {
		cur := s.kvs[c.Key].Revision
		if cur != c.Revision {
			return 0, &metastore.ConflictError{Key: c.Key, Expected: c.Revision, Revision: cur}
		}
	}
	for _, op := range t.Then {
		if op.Session == nil || op.Delete {
			continue
		}
		if ss, ok := s.sess[op.Session.ID()]; !ok || ss.ended || ss.closed {
			return 0, fmt.Errorf("metastore txn put %q: session %d: %w", op.Key, op.Session.ID(), metastore.ErrSessionExpired)
		}
	}
	// Like etcd, a txn that changes nothing (no ops, or only deletes of
	// absent keys) does not consume a revision.
	changes := false
	for _, op := range t.Then {
		if _, ok := s.kvs[op.Key]; ok || !op.Delete {
			changes = true
			break
		}
	}
	if !changes {
		return s.rev, nil
	}
	s.rev++
	for _, op := range t.Then {
		if op.Delete {
			s.deleteLocked(op.Key)
			continue
		}
		kv := metastore.KV{Key: op.Key, Value: bytes.Clone(op.Value), Revision: s.rev}
		if kv.Value == nil {
			kv.Value = []byte{}
		}
		if old, ok := s.kvs[op.Key]; ok {
			kv.CreateRevision = old.CreateRevision
		} else {
			kv.CreateRevision = s.rev
		}
		if op.Session != nil {
			kv.Session = op.Session.ID()
		}
		s.kvs[op.Key] = kv
		s.record(metastore.WatchEvent{Type: metastore.EventPut, KV: clone(kv)})
	}
	s.notify()
	return s.rev, nil
}

// deleteLocked deletes key at the current revision; s.mu is held.
func (s *Store) deleteLocked(key string) {
	if _, ok := s.kvs[key]; !ok {
		return
	}
	delete(s.kvs, key)
	s.record(metastore.WatchEvent{Type: metastore.EventDelete, KV: metastore.KV{Key: key, Revision: s.rev}})
}

// record appends ev to the history. The oldest events are dropped in
// batches of an eighth of the limit, so that a full history does not cost a
// copy per write.
func (s *Store) record(ev metastore.WatchEvent) {
	s.history = append(s.history, ev)
	if len(s.history) <= s.limit+s.limit/8 {
		return
	}
	over := len(s.history) - s.limit
	s.compactRev = s.history[over-1].KV.Revision
	s.history = append([]metastore.WatchEvent(nil), s.history[over:]...)
}

func (s *Store) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Watch implements metastore.Store. A watch running when the store is
// partitioned yields an error matching metastore.ErrUnavailable and ends.
func (s *Store) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	return func(yield func(metastore.WatchEvent, error) bool) {
		if err := metastore.ValidatePrefix(prefix); err != nil {
			yield(metastore.WatchEvent{}, err)
			return
		}
		s.mu.Lock()
		if from <= 0 {
			from = s.rev + 1
		}
		s.mu.Unlock()
		for {
			if err := ctx.Err(); err != nil {
				yield(metastore.WatchEvent{}, err)
				return
			}
			s.mu.Lock()
			if err := s.unreachableLocked("watch", prefix); err != nil {
				s.mu.Unlock()
				yield(metastore.WatchEvent{}, err)
				return
			}
			if from <= s.compactRev {
				s.mu.Unlock()
				yield(metastore.WatchEvent{}, fmt.Errorf("metastore watch %q from %d: %w", prefix, from, metastore.ErrCompacted))
				return
			}
			var batch []metastore.WatchEvent
			i := sort.Search(len(s.history), func(i int) bool { return s.history[i].KV.Revision >= from })
			for ; i < len(s.history); i++ {
				ev := s.history[i]
				if strings.HasPrefix(ev.KV.Key, prefix) {
					batch = append(batch, cloneEvent(ev))
				}
			}
			wait := s.changed
			rev := s.rev
			s.mu.Unlock()
			for _, ev := range batch {
				if !yield(ev, nil) {
					return
				}
			}
			if rev+1 > from {
				from = rev + 1
			}
			select {
			case <-ctx.Done():
				yield(metastore.WatchEvent{}, ctx.Err())
				return
			case <-wait:
			}
		}
	}
}

func cloneEvent(ev metastore.WatchEvent) metastore.WatchEvent {
	ev.KV = clone(ev.KV)
	return ev
}

// Compact discards the history of changes before revision rev, as etcd's
// compaction does: a watch from a revision below rev then yields
// metastore.ErrCompacted, and a watch from rev or later is served. A rev
// above the current revision compacts up to the current revision; an older
// one than a previous compaction does nothing. Get and List read the
// current state and are not affected.
func (s *Store) Compact(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev = min(rev, s.rev)
	if rev-1 <= s.compactRev {
		return
	}
	i := sort.Search(len(s.history), func(i int) bool { return s.history[i].KV.Revision >= rev })
	s.history = append([]metastore.WatchEvent(nil), s.history[i:]...)
	s.compactRev = rev - 1
}

// Revision returns the store's current revision.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Partition makes the store unreachable: every call fails with an error
// matching metastore.ErrUnavailable, running watches end with such an
// error, and every live session is suspended (it expires one TTL later on
// the store's clock unless Heal comes first), as when a host loses its
// connection to etcd.
func (s *Store) Partition() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.partitioned {
		return
	}
	s.partitioned = true
	s.cut = make(map[int64]bool)
	for id, ss := range s.sess {
		if !ss.ended && ss.timer == nil {
			s.suspendLocked(ss)
			s.cut[id] = true
		}
	}
	s.notify() // wake watches so that they see the partition
}

// Heal ends a partition: calls succeed again and the sessions that
// Partition suspended and that have not expired meanwhile are resumed.
func (s *Store) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.partitioned {
		return
	}
	s.partitioned = false
	for id := range s.cut {
		if ss, ok := s.sess[id]; ok {
			s.resumeLocked(ss)
		}
	}
	s.cut = nil
}

type session struct {
	s   *Store
	id  int64
	ttl time.Duration
	// done is closed when the session ends for the store (ended) or for its
	// holder (closed), whichever comes first.
	done   chan struct{}
	ended  bool // expired or revoked: bound keys are gone
	closed bool // Close was called: no more keep-alives, no new bindings
	timer  clock.Timer
}

var _ metastore.Session = (*session)(nil)

// NewSession implements metastore.Store.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("metastore: session TTL must be positive, got %v", ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unreachableLocked("new session", ""); err != nil {
		return nil, err
	}
	s.nextID++
	ss := &session{s: s, id: s.nextID, ttl: ttl, done: make(chan struct{})}
	s.sess[ss.id] = ss
	return ss, nil
}

func (ss *session) ID() int64             { return ss.id }
func (ss *session) TTL() time.Duration    { return ss.ttl }
func (ss *session) Done() <-chan struct{} { return ss.done }

// Close implements metastore.Session. During a partition the revocation
// cannot reach the store: Close returns an error matching
// metastore.ErrUnavailable and the bound keys vanish one TTL later.
func (ss *session) Close(ctx context.Context) error {
	s := ss.s
	s.mu.Lock()
	if ss.ended || ss.closed {
		s.mu.Unlock()
		return nil
	}
	ss.closed = true
	close(ss.done)
	if err := s.unreachableLocked("close session", ""); err != nil {
		// Already suspended by Partition: the expiry timer runs.
		s.mu.Unlock()
		return fmt.Errorf("session %d: %w", ss.id, err)
	}
	s.mu.Unlock()
	s.end(ss.id)
	return nil
}

// end expires session id: its bound keys are deleted at one new revision.
func (s *Store) end(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sess[id]
	if !ok || ss.ended {
		return
	}
	ss.ended = true
	delete(s.sess, id)
	if ss.timer != nil {
		ss.timer.Stop()
		ss.timer = nil
	}
	if !ss.closed {
		close(ss.done)
	}
	var keys []string
	for k, kv := range s.kvs {
		if kv.Session == id {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		s.rev++
		for _, k := range keys {
			s.deleteLocked(k)
		}
		s.notify()
	}
}

func (s *Store) suspendLocked(ss *session) {
	if ss.ended || ss.timer != nil {
		return
	}
	id := ss.id
	ss.timer = s.clock.AfterFunc(ss.ttl, func() { s.end(id) })
}

func (s *Store) resumeLocked(ss *session) {
	if ss.ended || ss.closed || ss.timer == nil {
		return
	}
	ss.timer.Stop()
	ss.timer = nil
}

// Suspend stops the session's keep-alives, as a partition from the store
// would: unless resumed, it expires one TTL later on the store's clock.
func (s *Store) Suspend(sess metastore.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sess[sess.ID()]; ok {
		s.suspendLocked(ss)
	}
}

// Resume restarts the keep-alives of a suspended session that has not yet
// expired.
func (s *Store) Resume(sess metastore.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sess[sess.ID()]; ok {
		s.resumeLocked(ss)
	}
}

// Expire ends the session now, as if its TTL had run out.
func (s *Store) Expire(sess metastore.Session) { s.end(sess.ID()) }

var _ metastore.Floorer = (*Store)(nil)

// Floor implements metastore.Floorer, under the store's lock.
func (s *Store) Floor(ctx context.Context, prefix, key string) (metastore.KV, error) {
	if err := ctx.Err(); err != nil {
		return metastore.KV{}, err
	}
	if err := metastore.CheckFloor(prefix, key); err != nil {
		return metastore.KV{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unreachableLocked("floor", key); err != nil {
		return metastore.KV{}, err
	}
	var best metastore.KV
	found := false
	for k, kv := range s.kvs {
		if strings.HasPrefix(k, prefix) && k <= key && (!found || k > best.Key) {
			best, found = kv, true
		}
	}
	if !found {
		return metastore.KV{}, fmt.Errorf("metastore floor %q under %q: %w", key, prefix, metastore.ErrNotFound)
	}
	return clone(best), nil
}

var _ metastore.ManyReader = (*Store)(nil)

// ReadMany implements metastore.ManyReader, under the store's lock.
func (s *Store) ReadMany(ctx context.Context, reads []metastore.Read) ([]metastore.ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := metastore.CheckMany(reads); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unreachableLocked("read many", ""); err != nil {
		return nil, err
	}
	out := make([]metastore.ReadResult, len(reads))
	for i, r := range reads {
		if !r.Floor {
			if kv, ok := s.kvs[r.Key]; ok {
				out[i] = metastore.ReadResult{KV: clone(kv), Found: true}
			}
			continue
		}
		for k, kv := range s.kvs {
			if strings.HasPrefix(k, r.Prefix) && k <= r.Key && (!out[i].Found || k > out[i].KV.Key) {
				out[i] = metastore.ReadResult{KV: kv, Found: true}
			}
		}
		if out[i].Found {
			out[i].KV = clone(out[i].KV)
		}
	}
	return out, nil
}
