package settle_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// Records in these tests are cutlinetest's "<stream>|<offset>|<id>": the
// stream and offset are what the host's index needs (locate), the id names
// the producer's record so that exactly-once can be checked across a
// takeover, where the successor gives a retried record a new offset.
var (
	record      = cutlinetest.Record
	parseRecord = cutlinetest.ParseRecord
	locate      = cutlinetest.Locate
)

// fenceFast keeps a fencer's undecided backoff short (synctest time).
var fenceFast = fence.Options{Backoff: clock.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}}

const (
	starA  = "star-a"
	starB  = "star-b"
	stream = "s"
)

// env is shared storage: a cutlinetest.Env over one in-memory metastore
// and K zones. Each zone is a backend bucket (raw: mem or fs) wrapped by
// fault injection (zones). Every party (a writer, a successor, a crashing
// incarnation) sees the storage through its own view (party).
type env struct {
	*cutlinetest.Env
	t     testing.TB
	store metastore.Store
	raw   []objstore.Bucket
	zones []*fault.Bucket
	keys  wire.Keys
}

// newEnv makes k in-memory zones named a, b, c…
func newEnv(t testing.TB, k int) *env {
	raw := make([]objstore.Bucket, k)
	for i := range raw {
		raw[i] = memblob.New(string(rune('a' + i)))
	}
	return newEnvOn(t, raw, fault.Options{})
}

// newFSEnv makes k filesystem zones under a temporary directory.
func newFSEnv(t testing.TB, k int) *env {
	dir := t.TempDir()
	raw := make([]objstore.Bucket, k)
	for i := range raw {
		name := string(rune('a' + i))
		b, err := fs.New(filepath.Join(dir, name), fs.Options{Name: name, NoSync: true, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		raw[i] = b
	}
	return newEnvOn(t, raw, fault.Options{})
}

// newEnvOn wraps the backend buckets raw in fault injection fo (zone i
// seeded fo.Seed+i+1).
func newEnvOn(t testing.TB, raw []objstore.Bucket, fo fault.Options) *env {
	ce := cutlinetest.New(t, memstore.New(memstore.Options{}), raw, cutlinetest.Options{Fault: fo})
	return &env{Env: ce, t: t, store: ce.Store, raw: ce.Raw, zones: ce.Zones, keys: wire.Keys{Prefix: "chains"}}
}

// backend names the two backends the main scenarios run on.
var backends = []struct {
	name string
	make func(t testing.TB, k int) *env
}{{"mem", newEnv}, {"fs", newFSEnv}}

func (e *env) constants(w, window int) epoch.Constants { return e.Constants(w, window) }

// on is the cutlinetest.Env failing t (a subtest's or a bubble's): its
// VerifyEpoch checks an epoch as it lies in storage (the README's
// guarantees 2–4), its State and States read the zones directly.
func (e *env) on(t testing.TB) *cutlinetest.Env {
	c := *e.Env
	c.T = t
	return &c
}

// party is one process's view of the storage, with its own minter, fencer,
// index and settler. With a kill switch, every request passes through it.
type party struct {
	e       *env
	kill    *killSwitch
	store   metastore.Store
	buckets []objstore.Bucket
	zones   chain.Zones
	minter  *epoch.Minter
	fencer  *fence.Fencer
	refs    *settle.RefIndex
	settler *settle.Settler
}

type partyOpts struct {
	kill     *killSwitch
	noFencer bool
	settle   settle.Options
	fence    fence.Options
	wrap     func(i int, b objstore.Bucket) objstore.Bucket
}

func (e *env) party(name string, o partyOpts) *party {
	t := e.t
	t.Helper()
	p := &party{e: e, kill: o.kill, store: e.store}
	if o.kill != nil {
		p.store = &crashStore{Store: e.store, k: o.kill}
	}
	for i, z := range e.zones {
		var b objstore.Bucket = z
		if o.wrap != nil {
			b = o.wrap(i, b)
		}
		if o.kill != nil {
			b = &crashBucket{Bucket: b, k: o.kill}
		}
		p.buckets = append(p.buckets, b)
	}
	p.zones = chain.MustZones(p.buckets...)
	var err error
	p.minter, err = epoch.NewMinter(p.store, epoch.Options{Identity: name})
	require.NoError(t, err)
	fo := o.fence
	fo.Identity = name
	p.fencer, err = fence.New(p.minter, p.zones, fo)
	require.NoError(t, err)
	p.refs, err = settle.NewRefIndex(p.store, "", locate)
	require.NoError(t, err)
	so := o.settle
	if !o.noFencer {
		so.Fencer = p.fencer
	}
	p.settler, err = settle.New(p.minter, p.zones, p.refs, so)
	require.NoError(t, err)
	return p
}

// harness is the party as cutlinetest's host and checker see it.
func (p *party) harness(name string) *cutlinetest.Party {
	return &cutlinetest.Party{Name: name, Env: p.e.Env, Zones: p.zones, Minter: p.minter, Fencer: p.fencer,
		Refs: p.refs, Settler: p.settler, Reader: p.reader()}
}

// harnessOn is the party as cutlinetest sees it, failing t.
func (p *party) harnessOn(t testing.TB) *cutlinetest.Party {
	h := p.harness("checker")
	h.Env = p.e.on(t)
	return h
}

func (p *party) reader() *chain.Reader {
	r, err := chain.NewReader(p.minter, p.zones, chain.ReaderOptions{})
	require.NoError(p.e.t, err)
	return r
}

// writer makes a writer for rec over the party's buckets; it is aborted at
// the end of the test unless the test ended it.
func (p *party) writer(rec *epoch.Record, opts chain.WriterOptions) *chain.Writer {
	bs, err := p.zones.Resolve(rec.Constants.Buckets)
	require.NoError(p.e.t, err)
	w, err := chain.NewWriter(rec, chain.MustZones(bs...), opts)
	require.NoError(p.e.t, err)
	p.e.t.Cleanup(w.Abort)
	return w
}

// --- direct object placement (bypassing every wrapper) ---

func (e *env) key(star string, ep, slot uint64) string { return e.keys.Slot(star, ep, slot) }

func (e *env) putFlight(zone int, star string, ep, slot uint64, payload []byte) {
	e.t.Helper()
	require.NoError(e.t, e.raw[zone].Create(context.Background(), e.key(star, ep, slot), wire.EncodeFlight(star, ep, slot, payload)))
}

func (e *env) putPoison(zone int, star string, ep, slot uint64) {
	e.t.Helper()
	err := e.raw[zone].Create(context.Background(), e.key(star, ep, slot), wire.EncodePoison(star, ep, slot, "test"))
	if !errors.Is(err, objstore.ErrExists) {
		require.NoError(e.t, err)
	}
}

// --- observing the end state ---

// refsOf lists a stream's refs.
func refsOf(t testing.TB, x *settle.RefIndex, stream string) []settle.Ref {
	t.Helper()
	var out []settle.Ref
	for r, err := range x.Refs(context.Background(), stream) {
		require.NoError(t, err)
		r.Header = metastore.Header{}
		out = append(out, r)
	}
	return out
}

func collect[T any](t testing.TB, seq iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// checkStream checks the host's index of stream after any takeover or
// roll (cutlinetest's StreamIDs): the refs cover [0, next) without holes
// or overlaps, every ref's flight is readable and carries exactly the
// offset the ref claims, and it returns the record ids in offset order.
func checkStream(t testing.TB, p *party, stream string) []string {
	t.Helper()
	return p.harnessOn(t).StreamIDs(stream)
}

// chainIDs reads a star's whole chain and returns the record ids in chain
// order with their positions (cutlinetest's ChainIDs).
func chainIDs(t testing.TB, p *party, star string) ([]string, []chain.Position) {
	t.Helper()
	return p.harnessOn(t).ChainIDs(star)
}

// requireUnique fails if an id occurs twice.
func requireUnique(t testing.TB, ids []string, what string) {
	t.Helper()
	seen := map[string]int{}
	for i, id := range ids {
		if j, ok := seen[id]; ok {
			t.Fatalf("%s: record %s appears twice (at %d and %d)", what, id, j, i)
		}
		seen[id] = i
	}
}

// --- crashes ---

// errCrashed is what a crashed process's requests answer.
var errCrashed = errors.New("process crashed")

// killSwitch crashes a process at its Nth mutating request (a metastore
// Txn, an object Create or Delete): with lost set, that request is carried
// out and its answer lost; otherwise it never arrives. From then on every
// request of the process fails, and its context is cancelled, as if the
// process had died there.
type killSwitch struct {
	at   int
	lost bool

	mu     sync.Mutex
	n      int
	dead   bool
	what   []string
	cancel context.CancelFunc
	fired  chan struct{}
}

func newKillSwitch(at int, lost bool) *killSwitch {
	return &killSwitch{at: at, lost: lost, fired: make(chan struct{})}
}

// bind makes ctx the process's context: the switch cancels it when it
// fires.
func (k *killSwitch) bind(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	k.mu.Lock()
	k.cancel = cancel
	k.mu.Unlock()
	return ctx
}

// mutate admits one mutating request: crash tells whether the process is
// dead (now or already), run whether the request is carried out anyway
// (its answer lost).
func (k *killSwitch) mutate(what string) (run bool, crash bool) {
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

func (k *killSwitch) isDead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead
}

// report tells whether the switch fired, and the request it fired at.
func (k *killSwitch) report() (bool, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.dead {
		return false, ""
	}
	return true, k.what[len(k.what)-1]
}

type crashStore struct {
	metastore.Store
	k *killSwitch
}

func (s *crashStore) Get(ctx context.Context, key string) (metastore.KV, error) {
	if s.k.isDead() {
		return metastore.KV{}, metastore.Unavailable(errCrashed)
	}
	return s.Store.Get(ctx, key)
}

func (s *crashStore) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	if s.k.isDead() {
		return nil, 0, metastore.Unavailable(errCrashed)
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
	return 0, metastore.Unavailable(errCrashed)
}

// fireOnce cancels the process and signals the test, the first time a
// crash is answered.
func (k *killSwitch) fireOnce() {
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

type crashBucket struct {
	objstore.Bucket
	k *killSwitch
}

func (b *crashBucket) crashed(op, key string) error {
	return &objstore.OpError{Op: op, Bucket: b.Name(), Key: key, Err: objstore.Unavailable(errCrashed)}
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
	if b.k.isDead() {
		return nil, b.crashed("get", key)
	}
	return b.Bucket.Get(ctx, key)
}

func (b *crashBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if b.k.isDead() {
		return nil, b.crashed("getrange", key)
	}
	return b.Bucket.GetRange(ctx, key, off, n)
}

func (b *crashBucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	if b.k.isDead() {
		return nil, b.crashed("list", prefix)
	}
	return b.Bucket.List(ctx, prefix, after, limit)
}
