package metastoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

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
