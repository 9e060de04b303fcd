package metastoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

// Option adjusts Run.
type Option func(*config)

type config struct {
	expire       func(t *testing.T, s metastore.Store, sess metastore.Session)
	disconnect   func(t *testing.T, s metastore.Store)
	compact      func(t *testing.T, s metastore.Store)
	pageSize     int
	betweenPages func(t *testing.T, s metastore.Store, f func())
	ttl          time.Duration
	wait         time.Duration
}

// WithExpire gives the suite a way to end a session as if its TTL had run
// out (mem: Store.Expire; etcd: revoke the lease with another client).
// Without it the expiry subtests are skipped.
func WithExpire(f func(t *testing.T, s metastore.Store, sess metastore.Session)) Option {
	return func(c *config) { c.expire = f }
}

// WithDisconnect gives the suite a way to make a store's backend
// unreachable for the rest of a subtest (mem: Store.Partition; etcd: cut
// the connection). Without it the unavailability subtest is skipped.
func WithDisconnect(f func(t *testing.T, s metastore.Store)) Option {
	return func(c *config) { c.disconnect = f }
}

// WithCompact gives the suite a way to discard a store's history up to its
// current revision, as etcd's compaction does (mem: Store.Compact at
// Store.Revision; etcd: Compact through another client). A watch from an
// older revision must then yield ErrCompacted. Without it the compaction
// subtests are skipped.
func WithCompact(f func(t *testing.T, s metastore.Store)) Option {
	return func(c *config) { c.compact = f }
}

// WithBetweenListPages gives the suite a way into the middle of a List:
// arm arranges that f runs once, during the next List on s that reads more
// than one page, after its first page and before its second (etcd: a
// wrapper of the client's KV that runs f when a range response says More).
// pageSize is how many keys one page of the store's List holds; the suite
// lists more than two pages. A backend that reads a List in one step (mem)
// passes any positive pageSize and runs f when the next List begins.
// Without it the subtests that list across pages are skipped.
func WithBetweenListPages(pageSize int, arm func(t *testing.T, s metastore.Store, f func())) Option {
	return func(c *config) {
		c.pageSize = pageSize
		c.betweenPages = arm
	}
}

// WithSessionTTL sets the TTL of the sessions the suite creates (default
// 5 s). The suite never waits for a TTL to run out.
func WithSessionTTL(d time.Duration) Option {
	return func(c *config) { c.ttl = d }
}

// WithWait bounds how long the suite waits for something that must happen
// (a watch event, a session's Done) before it fails (default 20 s). It is a
// guard against hangs, never a delay.
func WithWait(d time.Duration) Option {
	return func(c *config) { c.wait = d }
}

// Run runs the conformance suite. newStore is called once per subtest and
// must return an empty store (or one whose keyspace is private to the
// subtest, such as a fresh root prefix on a shared etcd); the store is not
// closed by the suite.
func Run(t *testing.T, newStore func(t *testing.T) metastore.Store, opts ...Option) {
	c := &config{ttl: 5 * time.Second, wait: 20 * time.Second}
	for _, o := range opts {
		o(c)
	}
	if c.betweenPages != nil && c.pageSize <= 0 {
		t.Fatalf("metastoretest: WithBetweenListPages: page size %d is not positive", c.pageSize)
	}
	s := &suite{c: c, newStore: newStore}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"GetMissing", s.getMissing},
		{"PutCreates", s.putCreates},
		{"PutCreateTwiceConflicts", s.putCreateTwice},
		{"PutStaleRevisionConflicts", s.putStale},
		{"PutMissingWithRevisionConflicts", s.putMissingWithRevision},
		{"DeleteByRevision", s.deleteByRevision},
		{"InvalidKeys", s.invalidKeys},
		{"ValuesAreCopied", s.valuesAreCopied},
		{"TxnAllOrNothing", s.txnAllOrNothing},
		{"TxnReportsFirstFailingCompare", s.txnFirstFailing},
		{"TxnCompareOnly", s.txnCompareOnly},
		{"ConcurrentCASCounter", s.casCounter},
		{"ConcurrentTransfers", s.transfers},
		{"ListPrefixInKeyOrder", s.listPrefix},
		{"RevisionsGrow", s.revisionsGrow},
		{"WatchReplaysFromRevision", s.watchReplay},
		{"WatchFromNow", s.watchFromNow},
		{"WatchEndsOnCancel", s.watchCancel},
		{"SessionBoundKeysVanishOnClose", s.sessionClose},
		{"SessionExpiry", s.sessionExpiry},
		{"SessionExpiredTxnAppliesNothing", s.sessionExpiredTxn},
		{"CanceledContext", s.canceledContext},
		{"UnavailableIsNeverAnAnswer", s.unavailable},
		{"Records", s.records},
		{"ListIsOneSnapshot", func(t *testing.T) { s.listAcrossPages(t, false) }},
		{"ListSurvivesCompaction", func(t *testing.T) { s.listAcrossPages(t, true) }},
		{"WatchCompactedThenList", s.watchCompactedThenList},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

type suite struct {
	c        *config
	newStore func(t *testing.T) metastore.Store
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*s.c.wait)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, ctx context.Context, st metastore.Store, key, value string, expect int64) int64 {
	t.Helper()
	rev, err := metastore.Put(ctx, st, key, []byte(value), expect)
	require.NoError(t, err, "put %q expecting revision %d", key, expect)
	require.Positive(t, rev)
	return rev
}

func requireConflict(t *testing.T, err error, key string, expected, current int64) {
	t.Helper()
	require.ErrorIs(t, err, metastore.ErrConflict)
	var ce *metastore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, key, ce.Key, "conflict key")
	assert.Equal(t, expected, ce.Expected, "conflict expected revision")
	assert.Equal(t, current, ce.Revision, "conflict current revision")
}

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

func (s *suite) txnAllOrNothing(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	ra := put(t, ctx, st, "a", "a1", 0)
	rc := put(t, ctx, st, "c", "c1", 0)

	// The compare on b (must not exist) fails: nothing at all is applied.
	put(t, ctx, st, "b", "b1", 0)
	_, err := st.Txn(ctx, metastore.Txn{
		If: []metastore.Compare{{Key: "a", Revision: ra}, {Key: "b", Revision: 0}},
		Then: []metastore.Op{
			{Key: "a", Value: []byte("a2")},
			{Key: "d", Value: []byte("d1")},
			{Key: "c", Delete: true},
		},
	})
	require.ErrorIs(t, err, metastore.ErrConflict)
	kv, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "a1", string(kv.Value))
	_, err = st.Get(ctx, "d")
	require.ErrorIs(t, err, metastore.ErrNotFound)
	_, err = st.Get(ctx, "c")
	require.NoError(t, err)

	// Every compare holds: every op is applied at one revision.
	rev, err := st.Txn(ctx, metastore.Txn{
		If: []metastore.Compare{{Key: "a", Revision: ra}, {Key: "c", Revision: rc}, {Key: "d", Revision: 0}},
		Then: []metastore.Op{
			{Key: "a", Value: []byte("a2")},
			{Key: "d", Value: []byte("d1")},
			{Key: "c", Delete: true},
		},
	})
	require.NoError(t, err)
	for key, want := range map[string]string{"a": "a2", "d": "d1"} {
		kv, err := st.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, string(kv.Value), key)
		assert.Equal(t, rev, kv.Revision, "all ops of a txn share its revision (%s)", key)
	}
	_, err = st.Get(ctx, "c")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}

func (s *suite) txnFirstFailing(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	ra := put(t, ctx, st, "a", "x", 0)
	rb := put(t, ctx, st, "b", "x", 0)
	rc := put(t, ctx, st, "c", "x", 0)
	_, err := st.Txn(ctx, metastore.Txn{
		If:   []metastore.Compare{{Key: "a", Revision: ra}, {Key: "b", Revision: rb + 1000}, {Key: "c", Revision: 0}},
		Then: []metastore.Op{{Key: "a", Value: []byte("y")}},
	})
	requireConflict(t, err, "b", rb+1000, rb)
	_, err = st.Txn(ctx, metastore.Txn{
		If:   []metastore.Compare{{Key: "c", Revision: 0}, {Key: "b", Revision: 0}},
		Then: []metastore.Op{{Key: "a", Value: []byte("y")}},
	})
	requireConflict(t, err, "c", 0, rc)
}

func (s *suite) txnCompareOnly(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	ra := put(t, ctx, st, "a", "x", 0)
	rev, err := st.Txn(ctx, metastore.Txn{If: []metastore.Compare{{Key: "a", Revision: ra}, {Key: "b"}}})
	require.NoError(t, err, "a txn without ops checks its compares")
	assert.GreaterOrEqual(t, rev, ra)
	_, err = st.Txn(ctx, metastore.Txn{If: []metastore.Compare{{Key: "a", Revision: 0}}})
	requireConflict(t, err, "a", 0, ra)
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

// transfers: concurrent two-key txns move units between accounts. The sum
// is invariant in every snapshot a List returns.
func (s *suite) transfers(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	const accounts, initial, workers, rounds = 4, 100, 8, 30
	key := func(i int) string { return fmt.Sprintf("acct/%d", i) }
	for i := range accounts {
		put(t, ctx, st, key(i), strconv.Itoa(initial), 0)
	}
	sum := func(kvs []metastore.KV) (int, error) {
		total := 0
		for _, kv := range kvs {
			n, err := strconv.Atoi(string(kv.Value))
			if err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil
	}
	var (
		mu        sync.Mutex
		failures  []error
		committed int
	)
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			kvs, _, err := st.List(ctx, "acct/")
			if err != nil {
				fail(err)
				return
			}
			if total, err := sum(kvs); err != nil || total != accounts*initial || len(kvs) != accounts {
				fail(fmt.Errorf("snapshot of %d accounts sums to %d (err %v), want %d", len(kvs), total, err, accounts*initial))
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				from, to := (w+r)%accounts, (w+r+1+w%(accounts-1))%accounts
				if from == to {
					to = (to + 1) % accounts
				}
				a, err := st.Get(ctx, key(from))
				if err != nil {
					fail(err)
					return
				}
				b, err := st.Get(ctx, key(to))
				if err != nil {
					fail(err)
					return
				}
				na, _ := strconv.Atoi(string(a.Value))
				nb, _ := strconv.Atoi(string(b.Value))
				_, err = st.Txn(ctx, metastore.Txn{
					If: []metastore.Compare{{Key: a.Key, Revision: a.Revision}, {Key: b.Key, Revision: b.Revision}},
					Then: []metastore.Op{
						{Key: a.Key, Value: []byte(strconv.Itoa(na - 7))},
						{Key: b.Key, Value: []byte(strconv.Itoa(nb + 7))},
					},
				})
				switch {
				case err == nil:
					mu.Lock()
					committed++
					mu.Unlock()
				case errors.Is(err, metastore.ErrConflict):
				default:
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	require.Empty(t, failures)
	kvs, _, err := st.List(ctx, "acct/")
	require.NoError(t, err)
	total, err := sum(kvs)
	require.NoError(t, err)
	assert.Equal(t, accounts*initial, total)
	assert.Positive(t, committed)
}

func (s *suite) listPrefix(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	var last int64
	for _, k := range []string{"p/b/c", "q", "p/a", "p", "p/b", "o/p/x"} {
		last = put(t, ctx, st, k, "v:"+k, 0)
	}
	kvs, rev, err := st.List(ctx, "p/")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rev, last)
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
		assert.Equal(t, "v:"+kv.Key, string(kv.Value))
		assert.Positive(t, kv.Revision)
		assert.LessOrEqual(t, kv.Revision, rev)
	}
	assert.Equal(t, []string{"p/a", "p/b", "p/b/c"}, keys)

	kvs, _, err = st.List(ctx, "")
	require.NoError(t, err)
	keys = keys[:0]
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	assert.Equal(t, []string{"o/p/x", "p", "p/a", "p/b", "p/b/c", "q"}, keys)

	kvs, rev, err = st.List(ctx, "none/")
	require.NoError(t, err)
	assert.Empty(t, kvs)
	assert.GreaterOrEqual(t, rev, last)
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

// collect ranges over seq until n events arrived, and fails on an error.
func (s *suite) collect(t *testing.T, cancel context.CancelFunc, seq func(func(metastore.Event, error) bool), n int) []metastore.Event {
	t.Helper()
	guard := time.AfterFunc(s.c.wait, cancel)
	defer guard.Stop()
	var got []metastore.Event
	for ev, err := range seq {
		require.NoError(t, err, "watch failed after %d events", len(got))
		got = append(got, ev)
		if len(got) == n {
			break
		}
	}
	require.Len(t, got, n)
	return got
}

func (s *suite) watchReplay(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	r1 := put(t, ctx, st, "w/a", "1", 0)
	put(t, ctx, st, "x/outside", "1", 0)
	r2 := put(t, ctx, st, "w/b", "1", 0)
	r3 := put(t, ctx, st, "w/a", "2", r1)
	require.NoError(t, metastore.Delete(ctx, st, "w/b", r2))
	_, err := st.Txn(ctx, metastore.Txn{Then: []metastore.Op{{Key: "w/c", Value: []byte("1")}, {Key: "w/d", Value: []byte("1")}}})
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := s.collect(t, cancel, st.Watch(wctx, "w/", r1), 6)
	want := []struct {
		typ metastore.EventType
		key string
		val string
	}{
		{metastore.EventPut, "w/a", "1"},
		{metastore.EventPut, "w/b", "1"},
		{metastore.EventPut, "w/a", "2"},
		{metastore.EventDelete, "w/b", ""},
		{metastore.EventPut, "w/c", "1"},
		{metastore.EventPut, "w/d", "1"},
	}
	var prev int64
	for i, ev := range events {
		assert.Equal(t, want[i].typ, ev.Type, "event %d", i)
		assert.Equal(t, want[i].key, ev.KV.Key, "event %d", i)
		assert.Equal(t, want[i].val, string(ev.KV.Value), "event %d", i)
		assert.GreaterOrEqual(t, ev.KV.Revision, prev, "events come in revision order")
		prev = ev.KV.Revision
	}
	assert.Equal(t, r1, events[0].KV.Revision)
	assert.Equal(t, r3, events[2].KV.Revision)
	assert.Equal(t, r1, events[2].KV.CreateRevision)
	assert.Equal(t, events[4].KV.Revision, events[5].KV.Revision, "ops of one txn share a revision")

	// A watch from a later revision sees only the later events, then live
	// ones.
	wctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	done := make(chan []metastore.Event, 1)
	go func() {
		var got []metastore.Event
		for ev, err := range st.Watch(wctx2, "w/", r3) {
			if err != nil {
				break
			}
			got = append(got, ev)
			if len(got) == 5 {
				break
			}
		}
		done <- got
	}()
	rLive := put(t, ctx, st, "w/e", "live", 0)
	var got []metastore.Event
	select {
	case got = <-done:
	case <-time.After(s.c.wait):
		cancel2()
		got = <-done
	}
	require.Len(t, got, 5)
	assert.Equal(t, "w/a", got[0].KV.Key)
	assert.Equal(t, r3, got[0].KV.Revision)
	assert.Equal(t, metastore.EventDelete, got[1].Type)
	assert.Equal(t, "w/e", got[4].KV.Key)
	assert.Equal(t, rLive, got[4].KV.Revision)
}

// watchFromNow: a watch from 0 sees only changes made after it started; the
// writer keeps writing until the watcher reports an event, since the moment
// a watch is established is not observable from outside.
func (s *suite) watchFromNow(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	before := put(t, ctx, st, "n/old", "x", 0)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		evs []metastore.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for ev, err := range st.Watch(wctx, "n/", 0) {
			if err != nil {
				r.err = err
				break
			}
			r.evs = append(r.evs, ev)
			if len(r.evs) == 3 {
				break
			}
		}
		done <- r
	}()
	deadline := time.After(s.c.wait)
	var r result
	rev := before
	for i := 0; ; i++ {
		select {
		case r = <-done:
		case <-deadline:
			cancel()
			r = <-done
		default:
			var err error
			rev, err = metastore.Put(ctx, st, "n/old", []byte(strconv.Itoa(i)), rev)
			require.NoError(t, err)
			continue
		}
		break
	}
	require.NoError(t, r.err)
	require.Len(t, r.evs, 3)
	prev := before
	for _, ev := range r.evs {
		assert.Greater(t, ev.KV.Revision, prev, "a watch from now sees no history and events in order")
		prev = ev.KV.Revision
	}
}

func (s *suite) watchCancel(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	wctx, cancel := context.WithCancel(ctx)
	type result struct {
		errs   []error
		events int
	}
	done := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		var r result
		close(started)
		for ev, err := range st.Watch(wctx, "c/", 0) {
			if err != nil {
				r.errs = append(r.errs, err)
				continue // the iterator must stop by itself after the error
			}
			_ = ev
			r.events++
		}
		done <- r
	}()
	<-started
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(s.c.wait):
		t.Fatal("watch did not end after its context was canceled")
	}
	require.Len(t, r.errs, 1, "the context's error is yielded exactly once")
	assert.ErrorIs(t, r.errs[0], context.Canceled)
}

func (s *suite) newSession(t *testing.T, ctx context.Context, st metastore.Store) metastore.Session {
	t.Helper()
	sess, err := st.NewSession(ctx, s.c.ttl)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	assert.NotZero(t, sess.ID())
	assert.GreaterOrEqual(t, sess.TTL(), s.c.ttl)
	select {
	case <-sess.Done():
		t.Fatal("a new session is already done")
	default:
	}
	return sess
}

func (s *suite) waitDone(t *testing.T, sess metastore.Session) {
	t.Helper()
	select {
	case <-sess.Done():
	case <-time.After(s.c.wait):
		t.Fatalf("session %d: Done did not fire", sess.ID())
	}
}

func (s *suite) sessionClose(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	sess := s.newSession(t, ctx, st)
	rev, err := metastore.PutBound(ctx, st, sess, "s/bound", []byte("alive"), 0)
	require.NoError(t, err)
	put(t, ctx, st, "s/free", "stays", 0)
	kv, err := st.Get(ctx, "s/bound")
	require.NoError(t, err)
	assert.Equal(t, sess.ID(), kv.Session)
	assert.Equal(t, rev, kv.Revision)

	require.NoError(t, sess.Close(ctx))
	s.waitDone(t, sess)
	_, err = st.Get(ctx, "s/bound")
	require.ErrorIs(t, err, metastore.ErrNotFound, "a bound key vanishes with its session")
	_, err = st.Get(ctx, "s/free")
	require.NoError(t, err)
	_, err = metastore.PutBound(ctx, st, sess, "s/again", []byte("x"), 0)
	require.ErrorIs(t, err, metastore.ErrSessionExpired)
	_, err = st.Get(ctx, "s/again")
	require.ErrorIs(t, err, metastore.ErrNotFound)
	require.NoError(t, sess.Close(ctx), "closing twice is a no-op")
}

func (s *suite) sessionExpiry(t *testing.T) {
	if s.c.expire == nil {
		t.Skip("no WithExpire hook")
	}
	ctx := s.ctx(t)
	st := s.newStore(t)
	sess := s.newSession(t, ctx, st)
	other := s.newSession(t, ctx, st)
	r1, err := metastore.PutBound(ctx, st, sess, "e/one", []byte("1"), 0)
	require.NoError(t, err)
	_, err = metastore.PutBound(ctx, st, sess, "e/two", []byte("2"), 0)
	require.NoError(t, err)
	_, err = metastore.PutBound(ctx, st, other, "e/other", []byte("3"), 0)
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.c.expire(t, st, sess)
	s.waitDone(t, sess)
	for _, k := range []string{"e/one", "e/two"} {
		_, err := st.Get(ctx, k)
		require.ErrorIs(t, err, metastore.ErrNotFound, "%s bound to an expired session", k)
	}
	_, err = st.Get(ctx, "e/other")
	require.NoError(t, err, "keys of another session stay")
	select {
	case <-other.Done():
		t.Fatal("the other session ended too")
	default:
	}

	// The expiry shows up as delete events.
	events := s.collect(t, cancel, st.Watch(wctx, "e/", r1), 5)
	var deleted []string
	for _, ev := range events[3:] {
		assert.Equal(t, metastore.EventDelete, ev.Type)
		deleted = append(deleted, ev.KV.Key)
	}
	assert.ElementsMatch(t, []string{"e/one", "e/two"}, deleted)

	_, err = metastore.PutBound(ctx, st, sess, "e/late", []byte("x"), 0)
	require.ErrorIs(t, err, metastore.ErrSessionExpired)
	require.NoError(t, sess.Close(ctx), "closing an expired session is a no-op")
}

func (s *suite) sessionExpiredTxn(t *testing.T) {
	if s.c.expire == nil {
		t.Skip("no WithExpire hook")
	}
	ctx := s.ctx(t)
	st := s.newStore(t)
	sess := s.newSession(t, ctx, st)
	s.c.expire(t, st, sess)
	s.waitDone(t, sess)
	_, err := st.Txn(ctx, metastore.Txn{Then: []metastore.Op{
		{Key: "t/free", Value: []byte("x")},
		{Key: "t/bound", Value: []byte("y"), Session: sess},
	}})
	require.ErrorIs(t, err, metastore.ErrSessionExpired)
	assert.NotErrorIs(t, err, metastore.ErrConflict)
	for _, k := range []string{"t/free", "t/bound"} {
		_, err := st.Get(ctx, k)
		require.ErrorIs(t, err, metastore.ErrNotFound, "%s: a refused txn applies nothing", k)
	}
}

func (s *suite) canceledContext(t *testing.T) {
	st := s.newStore(t)
	put(t, s.ctx(t), st, "x", "1", 0)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := st.Get(ctx, "x")
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = st.List(ctx, "")
	require.ErrorIs(t, err, context.Canceled)
	_, err = metastore.Put(ctx, st, "y", []byte("1"), 0)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, metastore.ErrConflict)
	_, err = st.NewSession(ctx, s.c.ttl)
	require.ErrorIs(t, err, context.Canceled)
	n := 0
	for _, err := range st.Watch(ctx, "", 1) {
		n++
		require.ErrorIs(t, err, context.Canceled)
	}
	assert.Equal(t, 1, n, "a watch on a canceled context yields its error once")
}

// unavailable: once the backend cannot be reached, every call fails with
// ErrUnavailable (or the caller's deadline), never with an answer such as
// ErrNotFound or ErrConflict that the store did not give.
func (s *suite) unavailable(t *testing.T) {
	if s.c.disconnect == nil {
		t.Skip("no WithDisconnect hook")
	}
	ctx := s.ctx(t)
	st := s.newStore(t)
	rev := put(t, ctx, st, "u/a", "1", 0)
	sess := s.newSession(t, ctx, st)
	s.c.disconnect(t, st)

	check := func(what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		assert.True(t, errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded),
			"%s: want ErrUnavailable or a deadline, got %v", what, err)
		for _, answer := range []error{metastore.ErrNotFound, metastore.ErrConflict, metastore.ErrSessionExpired, metastore.ErrCompacted} {
			assert.NotErrorIs(t, err, answer, "%s must not be read as an answer", what)
		}
	}
	call := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 3*time.Second)
	}
	// The bound put goes first: a session that gets no keep-alive through
	// for a whole TTL ends, and a store may then refuse the binding locally
	// with ErrSessionExpired, which is a true answer.
	c, cancel := call()
	_, err := metastore.PutBound(c, st, sess, "u/bound", []byte("2"), 0)
	cancel()
	select {
	case <-sess.Done():
		if errors.Is(err, metastore.ErrSessionExpired) {
			break
		}
		check("bound put", err)
	default:
		check("bound put", err)
	}
	c, cancel = call()
	_, err = st.Get(c, "u/missing")
	cancel()
	check("get of a missing key", err)
	c, cancel = call()
	_, _, err = st.List(c, "u/")
	cancel()
	check("list", err)
	c, cancel = call()
	_, err = metastore.Put(c, st, "u/a", []byte("2"), rev+1000)
	cancel()
	check("put with a stale revision", err)
	c, cancel = call()
	_, err = metastore.Put(c, st, "u/new", []byte("2"), 0)
	cancel()
	check("create", err)
	c, cancel = call()
	_, err = st.NewSession(c, s.c.ttl)
	cancel()
	check("new session", err)
	c, cancel = call()
	n := 0
	for _, err := range st.Watch(c, "u/", rev) {
		if err == nil {
			continue // history may have been delivered before the cut
		}
		check("watch", err)
		n++
	}
	cancel()
	assert.Equal(t, 1, n, "the watch ends with one error")
}

type testRecord struct {
	metastore.Header
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (s *suite) records(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	in := testRecord{Header: metastore.Header{Kind: "test", Format: 1}, Name: "n", Count: 3}
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

// listAcrossPages writes more than two pages of keys under lc/ and, between
// the first and the second page of a List, changes them in one txn (a
// value, a delete, a new key) and, with compact, discards the store's
// history up to then. The List must succeed (never ErrCompacted) with one
// snapshot that matches its revision: every key and value from before the
// txn when the revision is below the txn's, every one from after it
// otherwise, never a mix.
func (s *suite) listAcrossPages(t *testing.T, compact bool) {
	if s.c.betweenPages == nil {
		t.Skip("no WithBetweenListPages hook")
	}
	if compact && s.c.compact == nil {
		t.Skip("no WithCompact hook")
	}
	ctx := s.ctx(t)
	st := s.newStore(t)
	n := 2*s.c.pageSize + 2
	key := func(i int) string { return fmt.Sprintf("lc/%04d", i) }
	before := map[string]string{}
	var r0 int64
	for i := range n {
		rev := put(t, ctx, st, key(i), fmt.Sprintf("v%d", i), 0)
		if i == 0 {
			r0 = rev
		}
		before[key(i)] = fmt.Sprintf("v%d", i)
	}
	put(t, ctx, st, "lc-outside", "x", 0)
	after := maps.Clone(before)
	after[key(0)] = "new"
	delete(after, key(1))
	after["lc/9999"] = "new"

	var (
		fired   int
		changed int64
		ferr    error
	)
	s.c.betweenPages(t, st, func() {
		fired++
		changed, ferr = st.Txn(ctx, metastore.Txn{
			If: []metastore.Compare{{Key: key(0), Revision: r0}},
			Then: []metastore.Op{
				{Key: key(0), Value: []byte("new")},
				{Key: key(1), Delete: true},
				{Key: "lc/9999", Value: []byte("new")},
			},
		})
		if ferr == nil && compact {
			s.c.compact(t, st)
		}
	})
	kvs, rev, err := st.List(ctx, "lc/")
	require.NoError(t, ferr, "the txn between the pages")
	require.Equal(t, 1, fired, "the hook runs once, inside the List")
	require.NoError(t, err, "a List across a change (compact=%v) must succeed", compact)
	want := before
	if rev >= changed {
		want = after
	}
	got := map[string]string{}
	var keys []string
	for _, kv := range kvs {
		got[kv.Key] = string(kv.Value)
		keys = append(keys, kv.Key)
		assert.LessOrEqual(t, kv.Revision, rev, "%s was written after the revision of the List", kv.Key)
	}
	assert.True(t, slices.IsSorted(keys), "keys in order: %v", keys)
	assert.Equal(t, want, got, "one snapshot at revision %d (the txn is at %d)", rev, changed)

	// The store's state now is the changed one, whatever the List saw.
	kvs, rev, err = st.List(ctx, "lc/")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rev, changed)
	assert.Len(t, kvs, len(after))
}

// watchCompactedThenList follows the advice for a watcher whose start
// revision was compacted away: the watch yields ErrCompacted once and ends;
// a List gives the current state and its revision; a watch from that
// revision plus one yields exactly the changes made after it.
func (s *suite) watchCompactedThenList(t *testing.T) {
	if s.c.compact == nil {
		t.Skip("no WithCompact hook")
	}
	ctx := s.ctx(t)
	st := s.newStore(t)
	r1 := put(t, ctx, st, "wc/a", "1", 0)
	put(t, ctx, st, "wc/b", "1", 0)
	r3 := put(t, ctx, st, "wc/a", "2", r1)
	s.c.compact(t, st)

	wctx, cancel := context.WithCancel(ctx)
	guard := time.AfterFunc(s.c.wait, cancel)
	var errs []error
	for ev, err := range st.Watch(wctx, "wc/", r1) {
		if err == nil {
			t.Errorf("a watch from the compacted revision %d yielded %v %s", r1, ev.Type, ev.KV.Key)
			continue
		}
		errs = append(errs, err)
	}
	guard.Stop()
	cancel()
	require.Len(t, errs, 1, "the watch ends with one error")
	require.ErrorIs(t, errs[0], metastore.ErrCompacted)
	assert.NotErrorIs(t, errs[0], metastore.ErrUnavailable)

	kvs, rev, err := st.List(ctx, "wc/")
	require.NoError(t, err)
	require.GreaterOrEqual(t, rev, r3)
	require.Len(t, kvs, 2)
	assert.Equal(t, "2", string(kvs[0].Value))
	r4 := put(t, ctx, st, "wc/c", "1", 0)
	wctx, cancel = context.WithCancel(ctx)
	defer cancel()
	events := s.collect(t, cancel, st.Watch(wctx, "wc/", rev+1), 1)
	assert.Equal(t, "wc/c", events[0].KV.Key, "the first change after the List's revision")
	assert.Equal(t, r4, events[0].KV.Revision)
}
