package lease_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// hookStore runs a hook before every transaction that writes a stream's
// snapshot, then passes it on.
type hookStore struct {
	metastore.Store
	hook atomic.Pointer[func()]
}

func (h *hookStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	for _, op := range t.Then {
		if strings.HasSuffix(op.Key, "/snapshot") {
			if f := h.hook.Swap(nil); f != nil {
				(*f)()
			}
		}
	}
	return h.Store.Txn(ctx, t)
}

// snapStar is one star of a snapshot test, over its own view of the
// env's store.
type snapStar struct {
	t    *testing.T
	star *lease.Star
	sess metastore.Session
}

func startSnapStar(t *testing.T, env *cutlinetest.Env, name string, store metastore.Store, opts lease.Options) *snapStar {
	t.Helper()
	p := env.Party(name)
	sess, err := env.Store.NewSession(bounded(t), time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	star, err := lease.Start(bounded(t), lease.Config{Star: name, Store: store, Session: sess, Minter: p.Minter, Settler: p.Settler,
		Index: p.Refs, Constants: env.Constants(2, 16)}, opts)
	require.NoError(t, err)
	t.Cleanup(star.Abort)
	return &snapStar{t: t, star: star, sess: sess}
}

// appendN appends count records to stream and waits for each.
func (s *snapStar) appendN(stream string, count int) {
	s.t.Helper()
	for i := range count {
		next, err := s.star.Next(stream)
		require.NoError(s.t, err)
		f, err := s.star.Submit(bounded(s.t), cutlinetest.Record(stream, next, s.star.Name()+"-"+string(rune('a'+i%26))))
		require.NoError(s.t, err)
		_, err = f.Wait(bounded(s.t))
		require.NoError(s.t, err)
	}
}

func requireSnapshotErr(t *testing.T, err, sentinel error) *lease.SnapshotError {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	se, ok := errors.AsType[*lease.SnapshotError](err)
	require.True(t, ok, "a *SnapshotError: %v", err)
	return se
}

// A holder saves and loads its stream's snapshot; an equal offset
// replaces it, a lower one is refused, and the stored one stays.
func TestSnapshotSaveLoad(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	a := startSnapStar(t, env, "star-a", env.Store, lease.Options{})
	ctx := bounded(t)
	_, err := a.star.Open(ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)

	sn, err := a.star.LoadSnapshot(ctx, "orders")
	require.NoError(t, err)
	require.Zero(t, sn.Revision, "none yet")
	require.Zero(t, sn.Offset)
	require.Empty(t, sn.Data)

	a.appendN("orders", 3)
	require.NoError(t, a.star.Absorb(ctx))
	require.NoError(t, a.star.SaveSnapshot(ctx, "orders", 3, []byte("state after 3")))
	sn, err = a.star.LoadSnapshot(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, uint64(3), sn.Offset)
	require.Equal(t, []byte("state after 3"), sn.Data)
	require.Equal(t, "star-a", sn.Star)
	require.Equal(t, uint64(1), sn.Tenure)
	require.NotZero(t, sn.Revision)

	// The same offset replaces it; a lower one is refused.
	require.NoError(t, a.star.SaveSnapshot(ctx, "orders", 3, []byte("state after 3, again")))
	err = a.star.SaveSnapshot(ctx, "orders", 2, []byte("state after 2"))
	se := requireSnapshotErr(t, err, lease.ErrSnapshotBackwards)
	require.Equal(t, uint64(2), se.Offset)
	sn, err = lease.ReadSnapshot(ctx, env.Store, "", "orders")
	require.NoError(t, err)
	require.Equal(t, uint64(3), sn.Offset)
	require.Equal(t, []byte("state after 3, again"), sn.Data)

	// A stream the star does not hold takes no snapshot.
	require.ErrorIs(t, a.star.SaveSnapshot(ctx, "payments", 0, nil), lease.ErrNotHeld)
	require.ErrorIs(t, a.star.SaveSnapshot(ctx, "bad/name", 0, nil), cutline.ErrInvalid)
}

// A snapshot may claim only records the index covers: what is
// acknowledged but not absorbed yet, or not appended at all, is refused.
func TestSnapshotBeyondCoverageRefused(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	a := startSnapStar(t, env, "star-a", env.Store, lease.Options{AbsorbEvery: 64})
	ctx := bounded(t)
	_, err := a.star.Open(ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	a.appendN("orders", 2)

	se := requireSnapshotErr(t, a.star.SaveSnapshot(ctx, "orders", 2, []byte("x")), lease.ErrSnapshotUncovered)
	require.Equal(t, uint64(2), se.Offset)
	requireSnapshotErr(t, a.star.SaveSnapshot(ctx, "orders", 3, []byte("x")), lease.ErrSnapshotUncovered)
	sn, err := a.star.LoadSnapshot(ctx, "orders")
	require.NoError(t, err)
	require.Zero(t, sn.Revision, "nothing stored")

	require.NoError(t, a.star.Absorb(ctx))
	require.NoError(t, a.star.SaveSnapshot(ctx, "orders", 2, []byte("x")))
	requireSnapshotErr(t, a.star.SaveSnapshot(ctx, "orders", 3, []byte("x")), lease.ErrSnapshotUncovered)
}

// The host bytes are bounded by Options.MaxSnapshot, itself bounded.
func TestSnapshotTooBigRefused(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	a := startSnapStar(t, env, "star-a", env.Store, lease.Options{MaxSnapshot: 16})
	ctx := bounded(t)
	_, err := a.star.Open(ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	se := requireSnapshotErr(t, a.star.SaveSnapshot(ctx, "orders", 0, bytes.Repeat([]byte("x"), 17)), lease.ErrSnapshotTooBig)
	require.Contains(t, se.Error(), "17 bytes")
	require.NoError(t, a.star.SaveSnapshot(ctx, "orders", 0, bytes.Repeat([]byte("x"), 16)))

	p := env.Party("star-b")
	sess, err := env.Store.NewSession(ctx, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	cfg := lease.Config{Star: "star-b", Store: env.Store, Session: sess, Minter: p.Minter, Settler: p.Settler, Index: p.Refs, Constants: env.Constants(2, 16)}
	for _, max := range []int{-1, lease.MaxSnapshotLimit + 1} {
		_, err := lease.Start(ctx, cfg, lease.Options{MaxSnapshot: max})
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, "MaxSnapshot %d", max)
		require.Equal(t, "MaxSnapshot", ce.Field)
	}
}

// A holder whose tenure is taken over while it saves is refused by the
// compare on its tenure's records: the successor's snapshot state is
// what the stale holder left before, never what it tried to write after.
func TestSnapshotStaleHolderRefused(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	ctx := bounded(t)
	hs := &hookStore{Store: env.Store}
	a := startSnapStar(t, env, "star-a", hs, lease.Options{AbsorbEvery: 1})
	_, err := a.star.Open(ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	a.appendN("orders", 2)
	require.NoError(t, a.star.Absorb(ctx))
	require.NoError(t, a.star.SaveSnapshot(ctx, "orders", 2, []byte("a at 2")))
	a.appendN("orders", 2)
	require.NoError(t, a.star.Absorb(ctx))

	// star-a stalls just before its next save lands; meanwhile its
	// session expires and star-b takes the stream over.
	b := startSnapStar(t, env, "star-b", env.Store, lease.Options{})
	var ten lease.Tenure
	var openErr error
	takeover := func() {
		env.Store.(*memstore.Store).Expire(a.sess)
		ten, openErr = b.star.Open(ctx, "orders", lease.OpenOptions{})
	}
	hs.hook.Store(&takeover)
	err = a.star.SaveSnapshot(ctx, "orders", 4, []byte("a at 4"))
	require.NoError(t, openErr)
	require.Equal(t, uint64(2), ten.Tenure)
	require.ErrorIs(t, err, lease.ErrTenureLost)

	sn, err := b.star.LoadSnapshot(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, uint64(2), sn.Offset)
	require.Equal(t, []byte("a at 2"), sn.Data)
	require.Equal(t, uint64(1), sn.Tenure)
	require.LessOrEqual(t, sn.Offset, ten.Next)

	// The successor saves; the stale holder, now knowing it lost the
	// stream, is refused outright.
	require.NoError(t, b.star.SaveSnapshot(ctx, "orders", ten.Next, []byte("b at next")))
	require.Error(t, a.star.SaveSnapshot(ctx, "orders", 4, []byte("a at 4")))
	sn, err = lease.ReadSnapshot(ctx, env.Store, "", "orders")
	require.NoError(t, err)
	require.Equal(t, "star-b", sn.Star)
	require.Equal(t, []byte("b at next"), sn.Data)
}

// A snapshot saved in the release flush lands before the clean-release
// mark: the successor's open continues exactly where it ends, with
// nothing to replay.
func TestSnapshotInReleaseFlush(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	ctx := bounded(t)
	var a *snapStar
	flush := func(ctx context.Context, stream string) error {
		next, err := a.star.Next(stream)
		if err != nil {
			return err
		}
		return a.star.SaveSnapshot(ctx, stream, next, []byte("final"))
	}
	a = startSnapStar(t, env, "star-a", env.Store, lease.Options{Flush: flush})
	_, err := a.star.Open(ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	a.appendN("orders", 5)
	require.NoError(t, a.star.Finish(ctx, "orders", lease.ReasonHandoff))

	b := startSnapStar(t, env, "star-b", env.Store, lease.Options{})
	ten, err := b.star.Open(ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, lease.MarkConsumed, ten.Decision)
	sn, err := b.star.LoadSnapshot(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, uint64(5), ten.Next)
	require.Equal(t, ten.Next, sn.Offset)
	require.Equal(t, []byte("final"), sn.Data)
	require.ErrorIs(t, a.star.SaveSnapshot(ctx, "orders", 5, nil), lease.ErrNotHeld)
}

// A snapshot record that does not decode, fails its checksum or claims
// records past the coverage is refused with ErrBadSnapshot; a save
// replaces it.
func TestSnapshotCorrupt(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	ctx := bounded(t)
	a := startSnapStar(t, env, "star-a", env.Store, lease.Options{AbsorbEvery: 1})
	_, err := a.star.Open(ctx, "orders", lease.OpenOptions{})
	require.NoError(t, err)
	a.appendN("orders", 2)
	require.NoError(t, a.star.Absorb(ctx))
	const key = "streams/orders/snapshot"
	put := func(v []byte) {
		t.Helper()
		kv, err := env.Store.Get(ctx, key)
		rev := kv.Revision
		if err != nil {
			require.ErrorIs(t, err, metastore.ErrNotFound)
			rev = 0
		}
		_, err = metastore.Put(ctx, env.Store, key, v, rev)
		require.NoError(t, err)
	}
	record := func(off uint64, data []byte, sum uint32) []byte {
		v, err := metastore.EncodeRecord(&lease.Snapshot{RecordHeader: metastore.RecordHeader{Kind: "stream-snapshot", Format: 1}, Stream: "orders",
			Star: "star-a", Tenure: 1, Offset: off, Size: len(data), Sum: sum, Data: data})
		require.NoError(t, err)
		return v
	}
	crc := func(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

	put([]byte("\x00 not a record"))
	_, err = a.star.LoadSnapshot(ctx, "orders")
	requireSnapshotErr(t, err, lease.ErrBadSnapshot)
	require.ErrorIs(t, err, metastore.ErrBadRecord)

	put(record(1, []byte("state"), crc([]byte("statf"))))
	_, err = lease.ReadSnapshot(ctx, env.Store, "", "orders")
	requireSnapshotErr(t, err, lease.ErrBadSnapshot)

	put(record(100, []byte("state"), crc([]byte("state"))))
	sn, err := lease.ReadSnapshot(ctx, env.Store, "", "orders")
	require.NoError(t, err, "the record itself is sound")
	require.Equal(t, uint64(100), sn.Offset)
	_, err = a.star.LoadSnapshot(ctx, "orders")
	se := requireSnapshotErr(t, err, lease.ErrBadSnapshot)
	require.Equal(t, uint64(100), se.Offset)

	// A corrupt record holds nothing a save must respect.
	put([]byte("{}"))
	require.NoError(t, a.star.SaveSnapshot(ctx, "orders", 1, []byte("good")))
	sn, err = a.star.LoadSnapshot(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, []byte("good"), sn.Data)
}
