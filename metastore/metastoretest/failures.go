package metastoretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

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
