package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/metastore"
)

// mvccKV is a clientv3.KV that serves range reads the way etcd does: at the
// current revision or at an older one, paged by the request's limit, and
// refused with ErrCompacted below the compacted revision. Only Get is
// implemented. afterPage runs after each page that has more to come, with
// the number of that page (counted from 1 per call of List) and may call
// put and compact.
type mvccKV struct {
	clientv3.KV // nil: any other call panics

	mu        sync.Mutex
	states    map[int64]map[string]*mvccpb.KeyValue // revision → keys at that revision
	rev       int64
	compacted int64
	gets      int
	afterPage func(page int)
	page      int
}

func newMVCCKV() *mvccKV {
	return &mvccKV{states: map[int64]map[string]*mvccpb.KeyValue{1: {}}, rev: 1}
}

// put writes (or, with a nil value, deletes) keys at one new revision.
func (m *mvccKV) put(kvs map[string][]byte) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := make(map[string]*mvccpb.KeyValue, len(m.states[m.rev]))
	for k, v := range m.states[m.rev] {
		next[k] = v
	}
	m.rev++
	for k, v := range kvs {
		if v == nil {
			delete(next, k)
			continue
		}
		create := m.rev
		if old, ok := next[k]; ok {
			create = old.CreateRevision
		}
		next[k] = &mvccpb.KeyValue{Key: []byte(k), Value: v, ModRevision: m.rev, CreateRevision: create}
	}
	m.states[m.rev] = next
	return m.rev
}

// compact discards every revision below the current one.
func (m *mvccKV) compact() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for r := range m.states {
		if r < m.rev {
			delete(m.states, r)
		}
	}
	m.compacted = m.rev
}

func (m *mvccKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	op := clientv3.OpGet(key, opts...)
	m.mu.Lock()
	m.gets++
	rev := op.Rev()
	if rev == 0 {
		rev = m.rev
		m.page = 0
	}
	if rev < m.compacted {
		m.mu.Unlock()
		return nil, rpctypes.ErrCompacted
	}
	var keys []string
	for k := range m.states[rev] {
		if k >= key && (len(op.RangeBytes()) == 0 || k < string(op.RangeBytes())) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	resp := &clientv3.GetResponse{Header: &pb.ResponseHeader{Revision: m.rev}, Count: int64(len(keys))}
	if limit := int(op.Limit()); limit > 0 && len(keys) > limit {
		keys, resp.More = keys[:limit], true
	}
	for _, k := range keys {
		kv := m.states[rev][k]
		resp.Kvs = append(resp.Kvs, &mvccpb.KeyValue{Key: kv.Key, Value: kv.Value, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision})
	}
	m.page++
	page, hook := m.page, m.afterPage
	m.mu.Unlock()
	if resp.More && hook != nil {
		hook(page)
	}
	return resp, nil
}

func (m *mvccKV) getCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

// pagedStore is a Store with pages of 3 keys on an mvccKV holding p/0 … p/6
// (values "v0" … "v6") and a key outside the prefix.
func pagedStore(t *testing.T) (*Store, *mvccKV) {
	kv := newMVCCKV()
	init := map[string][]byte{"/r/q": []byte("outside")}
	for i := range 7 {
		init[fmt.Sprintf("/r/p/%d", i)] = fmt.Appendf(nil, "v%d", i)
	}
	kv.put(init)
	cli := offlineClient(t)
	cli.KV = kv
	st, err := New(cli, Options{Root: "/r/", ListPageSize: 3})
	require.NoError(t, err)
	return st, kv
}

// snapshot renders a List result as key=value@revision lines.
func snapshot(kvs []metastore.KV) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s=%s@%d ", kv.Key, kv.Value, kv.Revision)
	}
	return b.String()
}

// TestListPagesAtOneRevision: writes between two pages do not show; the
// result is the prefix at the first page's revision.
func TestListPagesAtOneRevision(t *testing.T) {
	st, kv := pagedStore(t)
	kv.afterPage = func(page int) {
		if page == 1 {
			kv.put(map[string][]byte{"/r/p/0": []byte("new"), "/r/p/6": nil, "/r/p/9": []byte("new")})
		}
	}
	kvs, rev, err := st.List(t.Context(), "p/")
	require.NoError(t, err)
	assert.Equal(t, int64(2), rev)
	assert.Equal(t, "p/0=v0@2 p/1=v1@2 p/2=v2@2 p/3=v3@2 p/4=v4@2 p/5=v5@2 p/6=v6@2 ", snapshot(kvs))
	assert.Equal(t, 3, kv.getCount(), "three pages of at most 3 keys")
}

// TestListStartsOverAfterCompaction: a compaction past the revision of the
// first page makes the next page fail with ErrCompacted; List drops what it
// read and reads the prefix again at the current revision, so that the
// result is one snapshot, the newer one.
func TestListStartsOverAfterCompaction(t *testing.T) {
	st, kv := pagedStore(t)
	compactions := 0
	kv.afterPage = func(page int) {
		if page == 1 && compactions == 0 {
			compactions++
			kv.put(map[string][]byte{"/r/p/0": []byte("new"), "/r/p/6": nil, "/r/p/9": []byte("new")})
			kv.compact()
		}
	}
	kvs, rev, err := st.List(t.Context(), "p/")
	require.NoError(t, err)
	assert.Equal(t, int64(3), rev)
	assert.Equal(t, "p/0=new@3 p/1=v1@2 p/2=v2@2 p/3=v3@2 p/4=v4@2 p/5=v5@2 p/9=new@3 ", snapshot(kvs))
	assert.Equal(t, 1+1+3, kv.getCount(), "one page, the compacted page, then three pages again")
}

// TestListGivesUpUnderCompactions: when every attempt is overtaken, List
// stops after maxListAttempts with an error that is retryable
// (ErrUnavailable) and is not ErrCompacted, which a watcher would answer
// with another List.
func TestListGivesUpUnderCompactions(t *testing.T) {
	st, kv := pagedStore(t)
	kv.afterPage = func(page int) {
		kv.put(map[string][]byte{"/r/q": []byte("tick")})
		kv.compact()
	}
	_, _, err := st.List(t.Context(), "p/")
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	assert.NotErrorIs(t, err, metastore.ErrCompacted)
	assert.ErrorContains(t, err, fmt.Sprintf("compacted during each of %d attempts", maxListAttempts))
	assert.ErrorContains(t, err, `"p/"`)
	assert.Equal(t, 2*maxListAttempts, kv.getCount(), "each attempt: a first page, then a compacted page")
}

// TestListStopsWhenCanceledBetweenAttempts: the caller's context ends while
// a list is overtaken; List returns its error and makes no further request.
func TestListStopsWhenCanceledBetweenAttempts(t *testing.T) {
	st, kv := pagedStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	kv.afterPage = func(page int) {
		kv.put(map[string][]byte{"/r/q": []byte("tick")})
		kv.compact()
		cancel()
	}
	_, _, err := st.List(ctx, "p/")
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, metastore.ErrUnavailable)
	assert.LessOrEqual(t, kv.getCount(), 2)
}

// TestListOtherErrorsEndIt: only a compaction starts a list over; any other
// failure of a later page is returned.
func TestListOtherErrorsEndIt(t *testing.T) {
	st, kv := pagedStore(t)
	boom := errors.New("boom")
	failing := &failingKV{mvccKV: kv, err: rpctypes.ErrGRPCNoLeader, after: 1}
	st.client.KV = failing
	_, _, err := st.List(t.Context(), "p/")
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	assert.Equal(t, 2, kv.getCount())
	failing.err, failing.after, kv.gets = boom, 1, 0
	_, _, err = st.List(t.Context(), "p/")
	require.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, metastore.ErrUnavailable)
}

// failingKV fails every Get after the first `after` ones with err.
type failingKV struct {
	*mvccKV
	err   error
	after int
}

func (f *failingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if f.after == 0 {
		f.mvccKV.mu.Lock()
		f.mvccKV.gets++
		f.mvccKV.mu.Unlock()
		return nil, f.err
	}
	f.after--
	return f.mvccKV.Get(ctx, key, opts...)
}
