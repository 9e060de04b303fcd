package metastoretest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

func (s *suite) getMissing(t *testing.T) {
	st := s.newStore(t)
	_, err := st.Get(s.ctx(t), "missing")
	require.ErrorIs(t, err, metastore.ErrNotFound)
	assert.NotErrorIs(t, err, metastore.ErrUnavailable)
}

func (s *suite) putCreates(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	rev := put(t, ctx, st, "a", "one", 0)
	kv, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "a", kv.Key)
	assert.Equal(t, "one", string(kv.Value))
	assert.Equal(t, rev, kv.Revision)
	assert.Equal(t, rev, kv.CreateRevision)
	assert.Zero(t, kv.Session)

	// An empty value is a value: the key exists.
	rev = put(t, ctx, st, "empty", "", 0)
	kv, err = st.Get(ctx, "empty")
	require.NoError(t, err)
	assert.Empty(t, kv.Value)
	assert.Equal(t, rev, kv.Revision)
}

func (s *suite) putCreateTwice(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	rev := put(t, ctx, st, "a", "first", 0)
	_, err := metastore.Put(ctx, st, "a", []byte("second"), 0)
	requireConflict(t, err, "a", 0, rev)
	kv, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "first", string(kv.Value), "a lost CAS must write nothing")
	assert.Equal(t, rev, kv.Revision)
}

func (s *suite) putStale(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	r1 := put(t, ctx, st, "a", "v1", 0)
	r2 := put(t, ctx, st, "a", "v2", r1)
	require.Greater(t, r2, r1)
	_, err := metastore.Put(ctx, st, "a", []byte("stale"), r1)
	requireConflict(t, err, "a", r1, r2)
	r3 := put(t, ctx, st, "a", "v3", r2)
	require.Greater(t, r3, r2)
	kv, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "v3", string(kv.Value))
	assert.Equal(t, r3, kv.Revision)
	assert.Equal(t, r1, kv.CreateRevision, "an update keeps the create revision")
}

func (s *suite) putMissingWithRevision(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	r := put(t, ctx, st, "other", "x", 0)
	_, err := metastore.Put(ctx, st, "a", []byte("v"), r)
	requireConflict(t, err, "a", r, 0)
	_, err = st.Get(ctx, "a")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}

func (s *suite) deleteByRevision(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	r1 := put(t, ctx, st, "a", "v1", 0)
	r2 := put(t, ctx, st, "a", "v2", r1)

	err := metastore.Delete(ctx, st, "a", r1)
	requireConflict(t, err, "a", r1, r2)
	_, err = st.Get(ctx, "a")
	require.NoError(t, err, "a lost delete must delete nothing")

	require.NoError(t, metastore.Delete(ctx, st, "a", r2))
	_, err = st.Get(ctx, "a")
	require.ErrorIs(t, err, metastore.ErrNotFound)

	err = metastore.Delete(ctx, st, "a", r2)
	requireConflict(t, err, "a", r2, 0)

	// Recreating a deleted key starts a new life: a new create revision.
	r3 := put(t, ctx, st, "a", "v3", 0)
	kv, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, r3, kv.CreateRevision)
	assert.Greater(t, r3, r2)
}

func (s *suite) invalidKeys(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	for _, key := range []string{"", "a\x00b", "line\nbreak", string(bytes.Repeat([]byte("k"), 1025))} {
		_, err := st.Get(ctx, key)
		require.ErrorIs(t, err, metastore.ErrInvalidKey, "get %q", key)
		_, err = metastore.Put(ctx, st, key, []byte("v"), 0)
		require.ErrorIs(t, err, metastore.ErrInvalidKey, "put %q", key)
		_, err = st.Txn(ctx, metastore.Txn{If: []metastore.Compare{{Key: key}}})
		require.ErrorIs(t, err, metastore.ErrInvalidKey, "compare %q", key)
	}
	_, err := st.Txn(ctx, metastore.Txn{Then: []metastore.Op{{Key: "dup", Value: []byte("1")}, {Key: "dup", Delete: true}}})
	require.ErrorIs(t, err, metastore.ErrInvalidKey, "two ops on one key")
	_, err = st.Get(ctx, "dup")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}

func (s *suite) valuesAreCopied(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	in := []byte("original")
	put(t, ctx, st, "a", string(in), 0)
	rev, err := metastore.Put(ctx, st, "b", in, 0)
	require.NoError(t, err)
	in[0] = 'X'
	kv, err := st.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "original", string(kv.Value), "the store must not retain the caller's slice")
	assert.Equal(t, rev, kv.Revision)
	kv.Value[0] = 'Y'
	kv, err = st.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "original", string(kv.Value), "returned slices belong to the caller")
}

// casCounter: goroutines increment one counter by CAS. No update may be lost
// and no expected revision may win twice.
func (s *suite) casCounter(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	put(t, ctx, st, "counter", "0", 0)
	const workers, attempts = 16, 50
	var (
		mu        sync.Mutex
		successes int
		won       = map[int64]bool{}
		failures  []error
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range attempts {
				kv, err := st.Get(ctx, "counter")
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				n, err := strconv.Atoi(string(kv.Value))
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				_, err = metastore.Put(ctx, st, "counter", []byte(strconv.Itoa(n+1)), kv.Revision)
				mu.Lock()
				switch {
				case err == nil:
					successes++
					if won[kv.Revision] {
						failures = append(failures, fmt.Errorf("two CAS expecting revision %d both succeeded", kv.Revision))
					}
					won[kv.Revision] = true
				case errors.Is(err, metastore.ErrConflict):
				default:
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, failures)
	kv, err := st.Get(ctx, "counter")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(successes), string(kv.Value), "counter value == successful CAS")
	assert.Positive(t, successes)
}

func (s *suite) revisionsGrow(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	var prev int64
	revs := map[string]int64{}
	for i := range 20 {
		k := fmt.Sprintf("k%d", i%3)
		rev, err := metastore.Put(ctx, st, k, []byte(strconv.Itoa(i)), revs[k])
		require.NoError(t, err)
		require.Greater(t, rev, prev, "revision of write %d", i)
		prev = rev
		revs[k] = rev
	}
	_, listRev, err := st.List(ctx, "")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, listRev, prev)
	require.NoError(t, metastore.Delete(ctx, st, "k0", revs["k0"]))
	rev := put(t, ctx, st, "k0", "again", 0)
	assert.Greater(t, rev, prev+1, "a delete consumes a revision")
}

type testRecord struct {
	metastore.RecordHeader
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (s *suite) records(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	in := testRecord{RecordHeader: metastore.RecordHeader{Kind: "test", Format: 1}, Name: "n", Count: 3}
	data, err := metastore.EncodeRecord(in)
	require.NoError(t, err)
	put(t, ctx, st, "r/good", string(data), 0)
	kv, err := st.Get(ctx, "r/good")
	require.NoError(t, err)
	var out testRecord
	require.NoError(t, metastore.DecodeRecord(kv.Key, kv.Value, "test", 1, &out))
	assert.Equal(t, in, out)

	bad := map[string]string{
		"newer major format": `{"kind":"test","format":2,"name":"n"}`,
		"format zero":        `{"kind":"test","name":"n"}`,
		"another kind":       `{"kind":"epoch","format":1}`,
		"corrupt JSON":       `{"kind":"test","format":1,`,
		"empty":              ``,
		"wrong field type":   `{"kind":"test","format":1,"count":"three"}`,
	}
	for name, value := range bad {
		key := "r/" + name
		put(t, ctx, st, key, value, 0)
		kv, err := st.Get(ctx, key)
		require.NoError(t, err)
		err = metastore.DecodeRecord(kv.Key, kv.Value, "test", 1, &out)
		require.ErrorIs(t, err, metastore.ErrBadRecord, name)
		var re *metastore.RecordError
		require.ErrorAs(t, err, &re, name)
		assert.Equal(t, key, re.Key, name)
		assert.Contains(t, err.Error(), key, name)
	}
}
