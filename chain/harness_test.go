package chain_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const star = "star-a"

// env is one star's storage: a cutlinetest.Env over an in-memory
// metastore and K memblob zones, each fault zone wrapped (by wrap, e.g.
// latency, then) by a hookBucket so tests can intercept requests, and one
// party ("test") whose minter, writers and readers see the hooks.
type env struct {
	*cutlinetest.Env
	t       testing.TB
	party   *cutlinetest.Party
	store   metastore.Store
	minter  *epoch.Minter
	mems    []*memblob.Bucket // the backends (Env.Raw)
	faults  []*fault.Bucket   // fault injection over them (Env.Zones)
	hooks   []*hookBucket     // over the fault zones, and any wrap
	buckets []objstore.Bucket // the hooks: what the party sees
	keys    wire.Keys
}

// newEnv makes k zones, each a memblob bucket wrapped by fault injection, then
// by wrap (if any, e.g. latency), then by a hookBucket.
func newEnv(t testing.TB, k int, wrap ...func(i int, b objstore.Bucket) objstore.Bucket) *env {
	t.Helper()
	e := &env{t: t, keys: wire.Keys{Prefix: "chains"}}
	raw := make([]objstore.Bucket, k)
	for i := range raw {
		e.mems = append(e.mems, memblob.New(fmt.Sprintf("zone-%c", 'a'+i)))
		raw[i] = e.mems[i]
	}
	e.Env = cutlinetest.New(t, memstore.New(memstore.Options{}), raw, cutlinetest.Options{
		Prefix: e.keys.Prefix,
		Wrap: func(i int, b objstore.Bucket) objstore.Bucket {
			for _, w := range wrap {
				b = w(i, b)
			}
			h := &hookBucket{Bucket: b}
			e.hooks = append(e.hooks, h)
			e.buckets = append(e.buckets, h)
			return h
		},
	})
	e.party = e.Party("test")
	e.store, e.minter, e.faults = e.Store, e.party.Minter, e.Zones
	return e
}

func (e *env) constants(w, window int) epoch.Constants { return e.Constants(w, window) }

func (e *env) mint(w, window int) *epoch.Record { return e.party.Mint(star, e.Constants(w, window)) }

// writer makes a writer that is aborted at the end of the test if the test
// did not close it.
func (e *env) writer(rec *epoch.Record, opts chain.WriterOptions) *chain.Writer {
	return e.party.Writer(rec, opts)
}

func (e *env) record(rec *epoch.Record) *epoch.Record { return e.Record(rec.Star, rec.Epoch) }

// reader makes a new reader (with nothing cached) over the hooks.
func (e *env) reader() *chain.Reader {
	e.t.Helper()
	r, err := chain.NewReader(e.minter, e.party.Zones, chain.ReaderOptions{})
	require.NoError(e.t, err)
	return r
}

func (e *env) key(rec *epoch.Record, slot uint64) string { return cutlinetest.Slot(rec, slot).Key() }

// put stores raw bytes in bucket i at slot, bypassing the hooks.
func (e *env) put(i int, rec *epoch.Record, slot uint64, data []byte) {
	e.t.Helper()
	require.NoError(e.t, e.mems[i].Create(bounded(e.t), e.key(rec, slot), data))
}

// poison poisons slot in bucket i, bypassing the hooks.
func (e *env) poison(i int, rec *epoch.Record, slot uint64) { e.Put(i, rec, slot, cutlinetest.Poison) }

// readAll collects every flight the reader yields from from.
func readAll(t testing.TB, r *chain.Reader, from chain.Position) ([]chain.Flight, error) {
	t.Helper()
	var out []chain.Flight
	for f, err := range r.Flights(bounded(t), star, from) {
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

func payload(i int) []byte { return []byte("payload-" + strconv.Itoa(i)) }

// slotOf parses the slot number of a slot key.
func slotOf(key string) uint64 {
	n, err := strconv.ParseUint(key[strings.LastIndexByte(key, '/')+1:], 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// hookBucket lets a test intercept creates and reads of one bucket. A nil
// hook passes the call through.
type hookBucket struct {
	objstore.Bucket
	mu     sync.Mutex
	create func(ctx context.Context, key string, data []byte, next func() error) error
	read   func(ctx context.Context, key string, next func() ([]byte, error)) ([]byte, error)
}

func (h *hookBucket) setCreate(f func(ctx context.Context, key string, data []byte, next func() error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.create = f
}

func (h *hookBucket) setRead(f func(ctx context.Context, key string, next func() ([]byte, error)) ([]byte, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.read = f
}

func (h *hookBucket) Create(ctx context.Context, key string, data []byte) error {
	h.mu.Lock()
	f := h.create
	h.mu.Unlock()
	next := func() error { return h.Bucket.Create(ctx, key, data) }
	if f == nil {
		return next()
	}
	return f(ctx, key, data, next)
}

func (h *hookBucket) Get(ctx context.Context, key string) ([]byte, error) {
	h.mu.Lock()
	f := h.read
	h.mu.Unlock()
	next := func() ([]byte, error) { return h.Bucket.Get(ctx, key) }
	if f == nil {
		return next()
	}
	return f(ctx, key, next)
}

func (h *hookBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	h.mu.Lock()
	f := h.read
	h.mu.Unlock()
	next := func() ([]byte, error) { return h.Bucket.GetRange(ctx, key, off, n) }
	if f == nil {
		return next()
	}
	return f(ctx, key, next)
}

var errZoneDown = objstore.Unavailable(fmt.Errorf("zone down"))

func down(ctx context.Context, key string, data []byte, next func() error) error { return errZoneDown }

func downRead(ctx context.Context, key string, next func() ([]byte, error)) ([]byte, error) {
	return nil, errZoneDown
}

// gate blocks the creates it matches until opened (or the request's ctx
// ends), counting how many are waiting.
type gate struct {
	open    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	waiting int
	arrived chan struct{} // receives one value per blocked create
}

func newGate() *gate {
	return &gate{open: make(chan struct{}), arrived: make(chan struct{}, 1<<16)}
}

func (g *gate) Open() { g.once.Do(func() { close(g.open) }) }

func (g *gate) hook(match func(key string) bool) func(ctx context.Context, key string, data []byte, next func() error) error {
	return func(ctx context.Context, key string, data []byte, next func() error) error {
		if match != nil && !match(key) {
			return next()
		}
		g.arrived <- struct{}{}
		select {
		case <-g.open:
			return next()
		case <-ctx.Done():
			return objstore.Unavailable(ctx.Err())
		}
	}
}

// await blocks until n creates have arrived at the gate, at most
// waitBound: under a bug that sends fewer, the test fails with a message.
func (g *gate) await(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(waitBound)
	for i := range n {
		select {
		case <-g.arrived:
		case <-deadline:
			t.Fatalf("%d of %d creates arrived at the gate within %v", i, n, waitBound)
		}
	}
}
