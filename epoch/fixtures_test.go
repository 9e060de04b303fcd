package epoch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// t0 is the fake clock's start; records stamp times from it.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func standard() epoch.Constants {
	return epoch.Constants{Class: "standard", Buckets: []string{"zone-a", "zone-b", "zone-c"}, W: 2, Window: 8}
}

func express() epoch.Constants {
	return epoch.Constants{Class: "express", Buckets: []string{"fast-a"}, W: 1, Window: 4}
}

// env is a Minter over an in-memory store seen through a faultStore, with a
// fake clock.
type env struct {
	mem    *memstore.Store
	store  *faultStore
	clock  *clock.Fake
	m      *epoch.Minter
	claims map[string]*epoch.Claim // by star/epoch, taken by mint
}

func newEnv(t testing.TB) *env {
	t.Helper()
	fc := clock.NewFake(t0)
	ms := memstore.New(memstore.Options{Clock: fc})
	fs := &faultStore{Store: ms}
	m, err := epoch.NewMinter(fs, epoch.Options{Clock: fc, Identity: "test-writer"})
	require.NoError(t, err)
	return &env{mem: ms, store: fs, clock: fc, m: m, claims: map[string]*epoch.Claim{}}
}

// mint mints an epoch and keeps its claim, as a writer would, so that
// checkpoint can move the open epoch's checkpoint.
func (e *env) mint(t *testing.T, star string, c epoch.Constants) *epoch.Record {
	t.Helper()
	r, err := e.m.Mint(context.Background(), star, c)
	require.NoError(t, err)
	cl, err := r.Claim()
	require.NoError(t, err)
	e.claims[fmt.Sprintf("%s/%d", star, r.Epoch)] = cl
	return r
}

// checkpoint moves an open epoch's checkpoint through its claim, then the
// other cursors to c through the minter.
func (e *env) checkpoint(t *testing.T, star string, n uint64, c epoch.Cursors) {
	t.Helper()
	cl := e.claims[fmt.Sprintf("%s/%d", star, n)]
	require.NotNil(t, cl, "minted by this env")
	_, err := cl.Advance(context.Background(), c.Checkpoint)
	require.NoError(t, err)
	_, err = e.m.Advance(context.Background(), star, n, c)
	require.NoError(t, err)
}

// requireSameRecord compares records as stored: their JSON and revision (a
// minted record also carries its claim, which is not stored).
func requireSameRecord(t *testing.T, want, got *epoch.Record) {
	t.Helper()
	wj, err := json.Marshal(want)
	require.NoError(t, err)
	gj, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(wj), string(gj))
	require.Equal(t, want.Revision, got.Revision)
}

func (e *env) get(t *testing.T, star string, n uint64) *epoch.Record {
	t.Helper()
	r, err := e.m.Get(context.Background(), star, n)
	require.NoError(t, err)
	return r
}

// keys lists every key of the store (under any root).
func (e *env) keys(t *testing.T) []string {
	t.Helper()
	kvs, _, err := e.mem.List(context.Background(), "")
	require.NoError(t, err)
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out
}

// raw returns the stored value at key as a JSON object.
func (e *env) raw(t *testing.T, key string) (map[string]any, int64) {
	t.Helper()
	kv, err := e.mem.Get(context.Background(), key)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(kv.Value, &v))
	return v, kv.Revision
}

// overwrite replaces the value at key whatever it holds (or creates it).
func (e *env) overwrite(t *testing.T, key string, value []byte) {
	t.Helper()
	ctx := context.Background()
	var rev int64
	if kv, err := e.mem.Get(ctx, key); err == nil {
		rev = kv.Revision
	} else {
		require.ErrorIs(t, err, metastore.ErrNotFound)
	}
	_, err := metastore.Put(ctx, e.mem, key, value, rev)
	require.NoError(t, err)
}

func (e *env) remove(t *testing.T, key string) {
	t.Helper()
	kv, err := e.mem.Get(context.Background(), key)
	require.NoError(t, err)
	require.NoError(t, metastore.Delete(context.Background(), e.mem, key, kv.Revision))
}

// putChain writes star's counter by hand, as a restore or a crash would
// leave it.
func (e *env) putChain(t *testing.T, star string, next uint64, heads map[string]uint64) {
	t.Helper()
	v, err := metastore.EncodeRecord(&epoch.CounterRecord{
		RecordHeader: metastore.RecordHeader{Kind: "chain", Format: 1},
		Star:         star, Next: next, Heads: heads,
	})
	require.NoError(t, err)
	e.overwrite(t, e.m.ChainKey(star), v)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// faultStore wraps a Store: it counts calls and can fail them, and can run a
// hook before each Txn.
type faultStore struct {
	metastore.Store

	mu        sync.Mutex
	gets      int
	lists     int
	txns      int   // Txn calls that reached the backend
	applied   int   // Txn calls that returned a revision
	failGet   error // returned by Get instead of calling the backend
	failList  error
	failTxn   error // returned by Txn instead of calling the backend
	loseTxn   error // Txn is applied, then this is returned instead
	beforeTxn func(metastore.Txn)
}

func (f *faultStore) Get(ctx context.Context, key string) (metastore.KV, error) {
	f.mu.Lock()
	f.gets++
	err := f.failGet
	f.mu.Unlock()
	if err != nil {
		return metastore.KV{}, err
	}
	return f.Store.Get(ctx, key)
}

func (f *faultStore) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	f.mu.Lock()
	f.lists++
	err := f.failList
	f.mu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	return f.Store.List(ctx, prefix)
}

func (f *faultStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	f.mu.Lock()
	fail, lose, hook := f.failTxn, f.loseTxn, f.beforeTxn
	f.mu.Unlock()
	if fail != nil {
		return 0, fail
	}
	if hook != nil {
		hook(t)
	}
	f.mu.Lock()
	f.txns++
	f.mu.Unlock()
	rev, err := f.Store.Txn(ctx, t)
	if err == nil {
		f.mu.Lock()
		f.applied++
		f.mu.Unlock()
	}
	if err == nil && lose != nil {
		return 0, lose
	}
	return rev, err
}

// counts returns (txns reaching the backend, txns applied).
func (f *faultStore) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.txns, f.applied
}

func (f *faultStore) set(fn func(f *faultStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

var errDown = errors.New("connection refused")
