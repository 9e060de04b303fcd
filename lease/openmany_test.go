package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// manyWorld is a mem Env whose stars count their metastore requests.
type manyWorld struct {
	env   *cutlinetest.Env
	store *metacount.Store
}

func newManyWorld(t *testing.T) *manyWorld {
	env := cutlinetest.NewMem(t, 3)
	return &manyWorld{env: env, store: metacount.Wrap(env.Store)}
}

// star starts a star named name over the counting store; its session
// is returned too.
func (w *manyWorld) star(t *testing.T, name string) (*lease.Star, metastore.Session) {
	t.Helper()
	p := w.env.Party(name)
	sess, err := w.env.Store.NewSession(t.Context(), time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	s, err := lease.Start(t.Context(), lease.Config{Star: name, Store: w.store, Session: sess, Minter: p.Minter,
		Settler: p.Settler, Index: p.Refs, Constants: w.env.Constants(2, 8)}, lease.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Abort)
	return s, sess
}

func streamNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%04d", i)
	}
	return out
}

func requireOpened(t *testing.T, tens []lease.Tenure, errs []error, d lease.Decision) {
	t.Helper()
	for i, err := range errs {
		require.NoError(t, err, "stream %d", i)
		require.Equal(t, d, tens[i].Decision, "stream %d", i)
	}
}

// Fresh streams open at a cost per batch: the leases 128 to a
// transaction, the admissions 32.
func TestOpenManyFresh(t *testing.T) {
	w := newManyWorld(t)
	s, _ := w.star(t, "star-a")
	names := streamNames(300)
	w.store.Reset()
	tens, errs := s.OpenMany(t.Context(), names, lease.OpenOptions{})
	requireOpened(t, tens, errs, lease.Fresh)
	st := w.store.Stats()
	t.Logf("300 fresh opens: %+v", st)
	require.Equal(t, 3+10, st.Txns, "3 lease transactions, 10 admissions")
	for i, ten := range tens {
		require.Equal(t, names[i], ten.Stream)
		require.Zero(t, ten.Next)
	}
	require.Len(t, s.Streams(), 300)
	// Opening them again: each is held already.
	_, errs = s.OpenMany(t.Context(), names[:3], lease.OpenOptions{})
	for _, err := range errs {
		require.ErrorIs(t, err, lease.ErrHeld)
	}
}

// A successor takes over every stream of a dead star: the predecessor's
// epoch is settled once, not once per stream.
func TestOpenManyTakeover(t *testing.T) {
	w := newManyWorld(t)
	a, asess := w.star(t, "star-a")
	names := streamNames(200)
	_, errs := a.OpenMany(t.Context(), names, lease.OpenOptions{})
	for _, err := range errs {
		require.NoError(t, err)
	}
	a.Abort()
	w.env.Store.(*memstore.Store).Expire(asess) // the registry converges on its death
	b, _ := w.star(t, "star-b")
	w.store.Reset()
	tens, errs := b.OpenMany(t.Context(), names, lease.OpenOptions{})
	requireOpened(t, tens, errs, lease.SettledDead)
	st := w.store.Stats()
	t.Logf("takeover of 200 streams: %+v", st)
	// 2 lease transactions, 7 admissions, and one settlement (fence and
	// settle of one epoch: a handful of transactions, not 200).
	require.LessOrEqual(t, st.Txns, 2+7+8)
	for _, ten := range tens {
		require.Equal(t, uint64(2), ten.Tenure)
		require.Equal(t, "star-a", ten.Predecessor.Star)
	}
}

// A live predecessor defers each of its streams, as Open would; the
// others open; a name given twice or invalid is refused on its own.
func TestOpenManyMixed(t *testing.T) {
	w := newManyWorld(t)
	a, _ := w.star(t, "star-a")
	b, _ := w.star(t, "star-b")
	_, errs := a.OpenMany(t.Context(), []string{"held-1", "held-2"}, lease.OpenOptions{})
	for _, err := range errs {
		require.NoError(t, err)
	}
	tens, errs := b.OpenMany(t.Context(), []string{"fresh-1", "held-1", "fresh-2", "held-2", "fresh-1", "bad/name"}, lease.OpenOptions{})
	require.NoError(t, errs[0])
	require.Equal(t, lease.Fresh, tens[0].Decision)
	require.ErrorIs(t, errs[1], lease.ErrDeferred)
	require.NoError(t, errs[2])
	require.ErrorIs(t, errs[3], lease.ErrDeferred)
	require.ErrorIs(t, errs[4], cutline.ErrInvalid, "given twice")
	require.ErrorIs(t, errs[5], cutline.ErrInvalid)
	var de *lease.DeferredError
	require.ErrorAs(t, errs[3], &de)
	require.Equal(t, "held-2", de.Stream)

	// Breaking the leases: the predecessor is alive and unmarked, so each
	// stream is deferred, with its own name.
	_, errs = b.OpenMany(t.Context(), []string{"held-1", "held-2"}, lease.OpenOptions{BreakLease: true})
	for i, err := range errs {
		require.ErrorAs(t, err, &de)
		require.Equal(t, lease.PredecessorAlive, de.Reason)
		require.Equal(t, []string{"held-1", "held-2"}[i], de.Stream)
	}
	// A token refused for one stream only.
	_, err := b.Fence(t.Context(), "tok", lease.Fenced, "secret")
	require.NoError(t, err)
	_, errs = b.OpenMany(t.Context(), []string{"tok", "fresh-3"}, lease.OpenOptions{})
	require.ErrorIs(t, errs[0], lease.ErrStaleToken)
	require.NoError(t, errs[1])
}

// Two stars opening the same streams in bulk at once: each stream is
// admitted by exactly one of them.
func TestOpenManyRace(t *testing.T) {
	w := newManyWorld(t)
	a, _ := w.star(t, "star-a")
	b, _ := w.star(t, "star-b")
	names := streamNames(100)
	var errsA, errsB []error
	var wg sync.WaitGroup
	wg.Go(func() { _, errsA = a.OpenMany(t.Context(), names, lease.OpenOptions{}) })
	wg.Go(func() { _, errsB = b.OpenMany(t.Context(), names, lease.OpenOptions{}) })
	wg.Wait()
	for i := range names {
		require.True(t, (errsA[i] == nil) != (errsB[i] == nil), "stream %s: %v / %v", names[i], errsA[i], errsB[i])
	}
	require.Equal(t, 100, len(a.Streams())+len(b.Streams()))
}
