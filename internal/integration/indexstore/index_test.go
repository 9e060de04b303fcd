package indexstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

func newStore(t *testing.T, root string) metastore.Store {
	t.Helper()
	cli := etcdtest.Start(t)
	st, err := etcd.New(cli, etcd.Options{Root: root, RequestTimeout: 10 * time.Second})
	require.NoError(t, err)
	return st
}

func locateNone([]byte) ([]settle.Span, error) { return nil, fmt.Errorf("no payloads here") }

// A cover of 600 streams in 64 flights on etcd: five transactions (128
// operations each at most), heads read 128 to a request; every offset is
// found where it was covered, a crash-free repeat writes nothing, and
// retention drops pages below its point.
func TestRefIndexOnEtcd(t *testing.T) {
	ctx := t.Context()
	store := metacount.Wrap(newStore(t, "/index/"))
	x, err := settle.NewRefIndex(store, "", locateNone)
	require.NoError(t, err)
	const streams, flights, rounds = 600, 64, 3
	batch := func(round uint64) []settle.Placed {
		out := make([]settle.Placed, flights)
		for f := range flights {
			out[f].Position = chain.Position{Epoch: 1, Slot: round*flights + uint64(f)}
		}
		for s := range streams {
			f := s % flights
			out[f].Spans = append(out[f].Spans, settle.Span{Stream: fmt.Sprintf("s%04d", s), Offset: round, Count: 1, Start: uint64(s), End: uint64(s + 1)})
		}
		return out
	}
	for r := range uint64(rounds) {
		store.Reset()
		require.NoError(t, x.CoverFlights(ctx, "star-a", batch(r)))
		st := store.Stats()
		require.Equal(t, (streams+settle.MaxTxnOps-1)/settle.MaxTxnOps, st.Txns, "round %d: %+v", r, st)
		if r == 0 {
			require.Equal(t, (streams+metastore.MaxReadMany-1)/metastore.MaxReadMany+1, st.Reads(), "heads 128 to a request, the old format looked for once")
		} else {
			require.Zero(t, st.Reads(), "round %d: heads it wrote are not read again", r)
		}
	}
	y, err := settle.NewRefIndex(store, "", locateNone)
	require.NoError(t, err)
	ids := make([]string, streams)
	for s := range ids {
		ids[s] = fmt.Sprintf("s%04d", s)
	}
	nexts, err := y.NextMany(ctx, ids)
	require.NoError(t, err)
	for s, n := range nexts {
		require.Equal(t, uint64(rounds), n, ids[s])
	}
	for r := range uint64(rounds) {
		ref, err := y.Find(ctx, "s0321", r)
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: 1, Slot: r*flights + 321%flights}, ref.Position())
		require.Equal(t, uint64(321), ref.Start)
	}
	require.NoError(t, y.CoverFlights(ctx, "star-a", batch(1)), "covering again is idempotent")

	rep, err := y.Retain(ctx, "s0321", 2)
	require.NoError(t, err)
	require.Equal(t, uint64(2), rep.Start)
	_, err = y.Find(ctx, "s0321", 1)
	require.ErrorIs(t, err, settle.ErrBelowRetention)
}

// A star on etcd opens 500 fresh streams in bulk; another takes them all
// over after it dies, settling its epoch once.
func TestOpenManyOnEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	store := newStore(t, "/openmany/")
	env := cutlinetest.New(t, store, []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}, cutlinetest.Options{})
	start := func(name string) (*lease.Star, metastore.Session) {
		p := env.Party(name)
		sess, err := store.NewSession(ctx, 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sess.Close(context.Background()) })
		s, err := lease.Start(ctx, lease.Config{Star: name, Store: store, Session: sess, Minter: p.Minter,
			Settler: p.Settler, Index: p.Refs, Constants: env.Constants(2, 8)}, lease.Options{})
		require.NoError(t, err)
		t.Cleanup(s.Abort)
		return s, sess
	}
	names := make([]string, 500)
	for i := range names {
		names[i] = fmt.Sprintf("m%03d", i)
	}
	a, asess := start("star-a")
	tens, errs := a.OpenMany(ctx, names, lease.OpenOptions{})
	for i, err := range errs {
		require.NoError(t, err, names[i])
		require.Equal(t, lease.Fresh, tens[i].Decision)
	}
	a.Abort()
	require.NoError(t, asess.Close(ctx)) // its registry entry and leases go with it
	b, _ := start("star-b")
	tens, errs = b.OpenMany(ctx, names, lease.OpenOptions{})
	for i, err := range errs {
		require.NoError(t, err, names[i])
		require.Equal(t, lease.SettledDead, tens[i].Decision, names[i])
		require.Equal(t, uint64(2), tens[i].Tenure)
	}
	require.Len(t, b.Streams(), len(names))
}
