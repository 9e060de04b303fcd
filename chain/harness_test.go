package chain_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	memstore "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const star = "star-a"

// env is one star's storage: a metastore with a minter and K mem buckets,
// each wrapped in a hookBucket so tests can intercept requests.
type env struct {
	t       testing.TB
	store   *memstore.Store
	minter  *epoch.Minter
	mems    []*mem.Bucket
	faults  []*fault.Bucket
	hooks   []*hookBucket
	buckets []objstore.Bucket
	keys    wire.Keys
}

// newEnv makes k zones, each a mem bucket wrapped by fault injection, then
// by wrap (if any, e.g. latency), then by a hookBucket.
func newEnv(t testing.TB, k int, wrap ...func(i int, b objstore.Bucket) objstore.Bucket) *env {
	t.Helper()
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{Identity: "test"})
	require.NoError(t, err)
	e := &env{t: t, store: store, minter: m, keys: wire.Keys{Prefix: "chains"}}
	for i := range k {
		mb := mem.New(fmt.Sprintf("zone-%c", 'a'+i))
		fb := fault.Wrap(mb, fault.Options{Seed: uint64(i + 1)})
		var inner objstore.Bucket = fb
		for _, w := range wrap {
			inner = w(i, inner)
		}
		h := &hookBucket{Bucket: inner}
		e.mems = append(e.mems, mb)
		e.faults = append(e.faults, fb)
		e.hooks = append(e.hooks, h)
		e.buckets = append(e.buckets, h)
	}
	return e
}

func (e *env) constants(w, window int) epoch.Constants {
	return epoch.Constants{Class: "standard", Buckets: chain.Names(e.buckets...), W: w, Window: window, Prefix: e.keys.Prefix}
}

func (e *env) mint(w, window int) *epoch.Record {
	e.t.Helper()
	rec, err := e.minter.Mint(context.Background(), star, e.constants(w, window))
	require.NoError(e.t, err)
	return rec
}

// writer makes a writer that is aborted at the end of the test if the test
// did not close it.
func (e *env) writer(rec *epoch.Record, opts chain.WriterOptions) *chain.Writer {
	e.t.Helper()
	w, err := chain.NewWriter(rec, chain.MustZones(e.buckets...), opts)
	require.NoError(e.t, err)
	e.t.Cleanup(w.Abort)
	return w
}

func (e *env) record(rec *epoch.Record) *epoch.Record {
	e.t.Helper()
	r, err := e.minter.Get(context.Background(), rec.Star, rec.Epoch)
	require.NoError(e.t, err)
	return r
}

func (e *env) reader() *chain.Reader {
	e.t.Helper()
	r, err := chain.NewReader(e.minter, chain.MustZones(e.buckets...), chain.ReaderOptions{})
	require.NoError(e.t, err)
	return r
}

func (e *env) key(rec *epoch.Record, slot uint64) string {
	return e.keys.Slot(rec.Star, rec.Epoch, slot)
}

// put stores raw bytes in bucket i at slot, bypassing the hooks.
func (e *env) put(i int, rec *epoch.Record, slot uint64, data []byte) {
	e.t.Helper()
	require.NoError(e.t, e.mems[i].Create(context.Background(), e.key(rec, slot), data))
}

func (e *env) poison(i int, rec *epoch.Record, slot uint64) {
	e.put(i, rec, slot, wire.EncodePoison(rec.Star, rec.Epoch, slot, "fencer-1"))
}

// readAll collects every flight the reader yields from from.
func readAll(t testing.TB, r *chain.Reader, from chain.Position) ([]chain.Flight, error) {
	t.Helper()
	var out []chain.Flight
	for f, err := range r.Flights(context.Background(), star, from) {
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

// await blocks until n creates have arrived at the gate.
func (g *gate) await(n int) {
	for range n {
		<-g.arrived
	}
}
