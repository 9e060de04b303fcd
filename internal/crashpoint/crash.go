package crashpoint

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// Mode says how a process crashes at its target request.
type Mode int

const (
	// Record crashes nothing: the switch only counts the requests by site
	// (a dry run).
	Record Mode = iota
	// Before crashes the process just before the request: it never
	// arrives.
	Before
	// After crashes the process just after the request: it was carried
	// out, and its answer is lost.
	After
)

// String names the mode: record, before or after.
func (m Mode) String() string {
	switch m {
	case Record:
		return "record"
	case Before:
		return "before"
	case After:
		return "after"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ErrCrashed is what every request of a crashed process answers, wrapped
// in the storage's class for an unknown outcome (objstore.ErrUnavailable,
// metastore.ErrUnavailable).
var ErrCrashed = errors.New("crashpoint: process crashed")

// Target is one crash case: the Nth request (from 1) made at Site by the
// step Via (see Attribution), crashed in Mode.
type Target struct {
	Site       string
	Via        string
	Occurrence int
	Mode       Mode
}

// Path is a site and the step that reached it: what a Switch counts.
type Path struct {
	Site, Via string
}

// String is "site via step".
func (p Path) String() string { return p.Site + " via " + p.Via }

// String describes the crash case.
func (t Target) String() string {
	return fmt.Sprintf("%s via %s, occurrence %d, %s", t.Site, t.Via, t.Occurrence, t.Mode)
}

// Switch is one process's crash switch: every mutating request of the
// process passes through it, is attributed to its site, counted, and at
// the target crashes the process. From then on every request of the
// process fails and its context (Bind) is cancelled, as if it had died
// there.
type Switch struct {
	table  *Table
	target Target

	mu           sync.Mutex
	counts       map[Path]int
	trace        []string
	unattributed []string
	dead         bool
	cancel       []context.CancelFunc
	fired        chan struct{}
}

// NewSwitch returns a switch for target (Mode Record: a dry run).
func NewSwitch(table *Table, target Target) *Switch {
	return &Switch{table: table, target: target, counts: map[Path]int{}, fired: make(chan struct{})}
}

// Bind returns a context of the process: cancelled when it crashes.
func (s *Switch) Bind(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		cancel()
	}
	s.cancel = append(s.cancel, cancel)
	return ctx
}

// Fired is closed when the process crashed.
func (s *Switch) Fired() <-chan struct{} { return s.fired }

// Dead reports whether the process crashed.
func (s *Switch) Dead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// Counts returns how many requests the process made at each site by each
// step, up to and including the crash.
func (s *Switch) Counts() map[Path]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Path]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// Trace returns the process's mutating requests in order, each as its
// site and what it wrote.
func (s *Switch) Trace() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.trace...)
}

// Unattributed returns the requests that came from no enumerated site:
// each means the enumeration missed a call path.
func (s *Switch) Unattributed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unattributed...)
}

// admit attributes one mutating request (the caller's caller's) and
// decides it: run says whether it is carried out, crash whether the
// process is dead after it (its answer lost).
func (s *Switch) admit(call, what string) (run, crash bool) {
	at := s.table.Caller(call)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return false, true
	}
	site := at.Site
	if site == "" {
		site = "?"
		s.unattributed = append(s.unattributed, what+" from "+at.Where)
	}
	p := Path{Site: site, Via: at.Via}
	s.counts[p]++
	s.trace = append(s.trace, p.String()+": "+what)
	if s.target.Mode == Record || p != (Path{s.target.Site, s.target.Via}) || s.counts[p] != s.target.Occurrence {
		return true, false
	}
	s.dead = true
	return s.target.Mode == After, true
}

// kill ends the process: its contexts are cancelled and Fired closes.
func (s *Switch) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.fired:
		return
	default:
	}
	for _, c := range s.cancel {
		c()
	}
	close(s.fired)
}

// Bucket wraps b: the process's view of one zone.
func (s *Switch) Bucket(b objstore.Bucket) objstore.Bucket { return &bucket{Bucket: b, s: s} }

// Store wraps st: the process's view of the metastore. Sessions are the
// store's own (a store binds keys only to its own sessions); a session's
// end is the host's to simulate.
func (s *Switch) Store(st metastore.Store) metastore.Store { return &store{Store: st, s: s} }

type bucket struct {
	objstore.Bucket
	s *Switch
}

func (b *bucket) crashed(op, key string) error {
	return &objstore.OpError{Op: op, Bucket: b.Name(), Key: key, Err: objstore.Unavailable(ErrCrashed)}
}

func (b *bucket) Create(ctx context.Context, key string, data []byte) error {
	run, crash := b.s.admit(BucketCreate, "create "+b.Name()+":"+key)
	if !crash {
		return b.Bucket.Create(ctx, key, data)
	}
	if run {
		_ = b.Bucket.Create(context.WithoutCancel(ctx), key, data)
	}
	b.s.kill()
	return b.crashed("create", key)
}

func (b *bucket) Delete(ctx context.Context, key string) error {
	run, crash := b.s.admit(BucketDelete, "delete "+b.Name()+":"+key)
	if !crash {
		return b.Bucket.Delete(ctx, key)
	}
	if run {
		_ = b.Bucket.Delete(context.WithoutCancel(ctx), key)
	}
	b.s.kill()
	return b.crashed("delete", key)
}

func (b *bucket) Get(ctx context.Context, key string) ([]byte, error) {
	if b.s.Dead() {
		return nil, b.crashed("get", key)
	}
	return b.Bucket.Get(ctx, key)
}

func (b *bucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if b.s.Dead() {
		return nil, b.crashed("getrange", key)
	}
	return b.Bucket.GetRange(ctx, key, off, n)
}

func (b *bucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	if b.s.Dead() {
		return nil, b.crashed("list", prefix)
	}
	return b.Bucket.List(ctx, prefix, after, limit)
}

type store struct {
	metastore.Store
	s *Switch
}

func (st *store) Get(ctx context.Context, key string) (metastore.KV, error) {
	if st.s.Dead() {
		return metastore.KV{}, metastore.Unavailable(ErrCrashed)
	}
	return st.Store.Get(ctx, key)
}

func (st *store) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	if st.s.Dead() {
		return nil, 0, metastore.Unavailable(ErrCrashed)
	}
	return st.Store.List(ctx, prefix)
}

func (st *store) Floor(ctx context.Context, prefix, key string) (metastore.KV, error) {
	if st.s.Dead() {
		return metastore.KV{}, metastore.Unavailable(ErrCrashed)
	}
	return metastore.Floor(ctx, st.Store, prefix, key)
}

func (st *store) ReadMany(ctx context.Context, reads []metastore.Read) ([]metastore.ReadResult, error) {
	if st.s.Dead() {
		return nil, metastore.Unavailable(ErrCrashed)
	}
	return metastore.ReadMany(ctx, st.Store, reads)
}

func (st *store) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	what := "txn"
	if len(t.Then) > 0 {
		what = "txn " + t.Then[0].Key
	}
	run, crash := st.s.admit(StoreTxn, what)
	if !crash {
		return st.Store.Txn(ctx, t)
	}
	if run {
		_, _ = st.Store.Txn(context.WithoutCancel(ctx), t)
	}
	st.s.kill()
	return 0, metastore.Unavailable(ErrCrashed)
}

func (st *store) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	run, crash := st.s.admit(StoreNewSession, "new session")
	if !crash {
		return st.Store.NewSession(ctx, ttl)
	}
	if run {
		if sess, err := st.Store.NewSession(context.WithoutCancel(ctx), ttl); err == nil {
			_ = sess.Close(context.WithoutCancel(ctx))
		}
	}
	st.s.kill()
	return nil, metastore.Unavailable(ErrCrashed)
}

func (st *store) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	if st.s.Dead() {
		return func(yield func(metastore.WatchEvent, error) bool) {
			yield(metastore.WatchEvent{}, metastore.Unavailable(ErrCrashed))
		}
	}
	return st.Store.Watch(ctx, prefix, from)
}

// Coverage records which sites were crashed in which mode.
type Coverage map[string]map[Mode]bool

// Add records a crash at site in mode.
func (c Coverage) Add(site string, m Mode) {
	if c[site] == nil {
		c[site] = map[Mode]bool{}
	}
	c[site][m] = true
}

// Uncovered returns the live (not Planted) sites among sites that were not
// crashed both Before and After their request.
func (c Coverage) Uncovered(sites []Site) []Site {
	var out []Site
	for _, s := range sites {
		if s.Planted {
			continue
		}
		if !c[s.Name][Before] || !c[s.Name][After] {
			out = append(out, s)
		}
	}
	return out
}
