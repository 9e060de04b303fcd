package memstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/metastore/metastoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	metastoretest.Run(t,
		func(t *testing.T) metastore.Store { return &hooked{Store: memstore.New(memstore.Options{})} },
		append(conformanceHooks(),
			metastoretest.WithExpire(func(t *testing.T, s metastore.Store, sess metastore.Session) {
				memOf(s).Expire(sess)
			}))...,
	)
}

func TestConformanceFakeClockExpiry(t *testing.T) {
	// Expiry through the TTL path: suspend, then move the clock past the TTL.
	clk := clock.NewFake(time.Unix(0, 0))
	metastoretest.Run(t,
		func(t *testing.T) metastore.Store { return &hooked{Store: memstore.New(memstore.Options{Clock: clk})} },
		append(conformanceHooks(),
			metastoretest.WithExpire(func(t *testing.T, s metastore.Store, sess metastore.Session) {
				memOf(s).Suspend(sess)
				clk.Advance(sess.TTL())
			}))...,
	)
}

// conformanceHooks are the suite's triggers common to both runs.
func conformanceHooks() []metastoretest.Option {
	return []metastoretest.Option{
		metastoretest.WithDisconnect(func(t *testing.T, s metastore.Store) {
			memOf(s).Partition()
		}),
		metastoretest.WithCompact(func(t *testing.T, s metastore.Store) {
			st := memOf(s)
			st.Compact(st.Revision())
		}),
		// mem reads a List in one step: "between its pages" is when it
		// begins.
		metastoretest.WithBetweenListPages(1, func(t *testing.T, s metastore.Store, f func()) {
			s.(*hooked).beforeNextList(f)
		}),
	}
}

// hooked is a memstore.Store whose next List first runs the functions armed
// with beforeNextList.
type hooked struct {
	*memstore.Store
	mu     sync.Mutex
	before []func()
}

func memOf(s metastore.Store) *memstore.Store { return s.(*hooked).Store }

func (h *hooked) beforeNextList(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before = append(h.before, f)
}

func (h *hooked) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	h.mu.Lock()
	fs := h.before
	h.before = nil
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
	return h.Store.List(ctx, prefix)
}

type fixture struct {
	clk  *clock.Fake
	st   *memstore.Store
	sess metastore.Session
	rev  int64
}

func newFixture(t *testing.T, ttl time.Duration) *fixture {
	t.Helper()
	f := &fixture{clk: clock.NewFake(time.Unix(1000, 0))}
	f.st = memstore.New(memstore.Options{Clock: f.clk})
	var err error
	f.sess, err = f.st.NewSession(t.Context(), ttl)
	require.NoError(t, err)
	f.rev, err = metastore.PutBound(t.Context(), f.st, f.sess, "stars/a", []byte("alive"), 0)
	require.NoError(t, err)
	return f
}

func (f *fixture) ended() bool {
	select {
	case <-f.sess.Done():
		return true
	default:
		return false
	}
}

func (f *fixture) waitEnded(t *testing.T) {
	t.Helper()
	select {
	case <-f.sess.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
}

func TestSuspendedSessionExpiresAfterTTL(t *testing.T) {
	f := newFixture(t, 10*time.Second)
	f.st.Suspend(f.sess)
	f.clk.Advance(9 * time.Second)
	assert.False(t, f.ended(), "one second before the TTL the session lives")
	_, err := f.st.Get(t.Context(), "stars/a")
	require.NoError(t, err)

	f.clk.Advance(time.Second)
	f.waitEnded(t)
	_, err = f.st.Get(t.Context(), "stars/a")
	require.ErrorIs(t, err, metastore.ErrNotFound)
	assert.Greater(t, f.st.Revision(), f.rev, "the expiry deletes at a new revision")
	_, err = metastore.PutBound(t.Context(), f.st, f.sess, "stars/a", []byte("back"), 0)
	require.ErrorIs(t, err, metastore.ErrSessionExpired)
}

func TestResumePreventsExpiry(t *testing.T) {
	f := newFixture(t, 10*time.Second)
	f.st.Suspend(f.sess)
	f.clk.Advance(9 * time.Second)
	f.st.Resume(f.sess)
	assert.Zero(t, f.clk.Waiters(), "resuming stops the expiry timer")
	f.clk.Advance(time.Hour)
	assert.False(t, f.ended())
	kv, err := f.st.Get(t.Context(), "stars/a")
	require.NoError(t, err)
	assert.Equal(t, f.sess.ID(), kv.Session)
	assert.Equal(t, f.rev, f.st.Revision(), "nothing was written")

	// A second suspension starts a full TTL again.
	f.st.Suspend(f.sess)
	f.clk.Advance(9 * time.Second)
	assert.False(t, f.ended())
	f.clk.Advance(time.Second)
	f.waitEnded(t)
}

func TestUnsuspendedSessionNeverExpires(t *testing.T) {
	f := newFixture(t, time.Second)
	f.clk.Advance(24 * time.Hour)
	assert.False(t, f.ended())
	assert.Zero(t, f.clk.Waiters())
}

func TestExpireEndsAtOnce(t *testing.T) {
	f := newFixture(t, time.Hour)
	f.st.Expire(f.sess)
	assert.True(t, f.ended())
	_, err := f.st.Get(t.Context(), "stars/a")
	require.ErrorIs(t, err, metastore.ErrNotFound)
	f.st.Expire(f.sess) // twice is a no-op
	f.st.Resume(f.sess)
	require.NoError(t, f.sess.Close(t.Context()))
}

func TestPartition(t *testing.T) {
	f := newFixture(t, 10*time.Second)
	ctx := t.Context()
	f.st.Partition()
	_, err := f.st.Get(ctx, "stars/a")
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	_, err = metastore.Put(ctx, f.st, "x", []byte("1"), 0)
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	_, _, err = f.st.List(ctx, "")
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	_, err = f.st.NewSession(ctx, time.Second)
	require.ErrorIs(t, err, metastore.ErrUnavailable)

	// The partition suspends sessions; healing in time keeps them.
	f.clk.Advance(5 * time.Second)
	f.st.Heal()
	f.clk.Advance(time.Hour)
	assert.False(t, f.ended())
	_, err = f.st.Get(ctx, "stars/a")
	require.NoError(t, err)

	// A partition longer than the TTL ends them.
	f.st.Partition()
	f.clk.Advance(10 * time.Second)
	f.waitEnded(t)
	f.st.Heal()
	_, err = f.st.Get(ctx, "stars/a")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}

func TestCloseDuringPartitionExpiresLater(t *testing.T) {
	f := newFixture(t, 10*time.Second)
	f.st.Partition()
	err := f.sess.Close(t.Context())
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	assert.True(t, f.ended(), "Done fires at Close even when the revocation is lost")
	f.st.Heal()
	_, err = f.st.Get(t.Context(), "stars/a")
	require.NoError(t, err, "the revocation never reached the store")
	_, err = metastore.PutBound(t.Context(), f.st, f.sess, "stars/b", nil, 0)
	require.ErrorIs(t, err, metastore.ErrSessionExpired, "a closed session binds nothing")
	from := f.st.Revision() + 1
	f.clk.Advance(10 * time.Second)
	// The expiry runs on the clock's goroutine: wait for its delete event.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for ev, err := range f.st.Watch(ctx, "stars/", from) {
		require.NoError(t, err, "the key vanishes one TTL later")
		assert.Equal(t, metastore.EventDelete, ev.Type)
		assert.Equal(t, "stars/a", ev.KV.Key)
		break
	}
	_, err = f.st.Get(t.Context(), "stars/a")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}

func TestWatchEndsOnPartition(t *testing.T) {
	st := memstore.New(memstore.Options{})
	rev, err := metastore.Put(t.Context(), st, "k", []byte("1"), 0)
	require.NoError(t, err)
	var events []metastore.WatchEvent
	var last error
	delivered := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range st.Watch(t.Context(), "", rev) {
			if err != nil {
				last = err
				continue
			}
			events = append(events, ev)
			close(delivered)
		}
	}()
	<-delivered
	st.Partition()
	<-done
	require.Len(t, events, 1)
	require.ErrorIs(t, last, metastore.ErrUnavailable)
}

func TestHistoryCompaction(t *testing.T) {
	st := memstore.New(memstore.Options{HistoryLimit: 8})
	ctx := t.Context()
	var rev int64
	for i := range 20 {
		var err error
		rev, err = metastore.Put(ctx, st, "k", []byte{byte(i)}, rev)
		require.NoError(t, err)
	}
	n := 0
	for _, err := range st.Watch(ctx, "", 1) {
		require.ErrorIs(t, err, metastore.ErrCompacted)
		n++
	}
	assert.Equal(t, 1, n)

	// The newest HistoryLimit events are always available.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got []int64
	for ev, err := range st.Watch(wctx, "", rev-7) {
		require.NoError(t, err)
		got = append(got, ev.KV.Revision)
		if len(got) == 8 {
			break
		}
	}
	assert.Equal(t, rev, got[7])
}

func TestEmptyTxnConsumesNoRevision(t *testing.T) {
	st := memstore.New(memstore.Options{})
	ctx := t.Context()
	rev, err := metastore.Put(ctx, st, "k", []byte("1"), 0)
	require.NoError(t, err)
	got, err := st.Txn(ctx, metastore.Txn{Then: []metastore.Op{{Key: "absent", Delete: true}}})
	require.NoError(t, err)
	assert.Equal(t, rev, got)
	assert.Equal(t, rev, st.Revision())
}

// TestCompact: Compact(rev) drops the history before rev, as etcd does: a
// watch from below rev yields ErrCompacted, a watch from rev replays it; a
// revision past the current one compacts up to the current one, an older
// one than the last compaction does nothing; List is not affected.
func TestCompact(t *testing.T) {
	ctx := t.Context()
	st := memstore.New(memstore.Options{})
	var revs []int64
	for i := range 4 {
		rev, err := metastore.Put(ctx, st, fmt.Sprintf("k/%d", i), []byte("v"), 0)
		require.NoError(t, err)
		revs = append(revs, rev)
	}
	firstErr := func(from int64) (metastore.WatchEvent, error) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for ev, err := range st.Watch(wctx, "k/", from) {
			return ev, err
		}
		return metastore.WatchEvent{}, nil
	}
	st.Compact(revs[2])
	_, err := firstErr(revs[1])
	require.ErrorIs(t, err, metastore.ErrCompacted)
	ev, err := firstErr(revs[2])
	require.NoError(t, err)
	assert.Equal(t, "k/2", ev.KV.Key)

	st.Compact(revs[0]) // older: nothing changes
	ev, err = firstErr(revs[2])
	require.NoError(t, err)
	assert.Equal(t, revs[2], ev.KV.Revision)

	st.Compact(revs[3] + 100) // past the current revision: up to it
	_, err = firstErr(revs[2])
	require.ErrorIs(t, err, metastore.ErrCompacted)
	ev, err = firstErr(revs[3])
	require.NoError(t, err)
	assert.Equal(t, "k/3", ev.KV.Key)

	kvs, rev, err := st.List(ctx, "k/")
	require.NoError(t, err)
	assert.Len(t, kvs, 4)
	assert.Equal(t, revs[3], rev)
}
