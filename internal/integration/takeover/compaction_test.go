package takeover_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// TestTakeoverAcrossCompaction runs a takeover while etcd compacts its
// history in the middle of the successor's paged reads, as a production
// etcd does on its schedule:
//
//  1. star A appends 10 records in each of epochs 1 and 2 and settles
//     them itself; in epoch 3 it submits 12 more, 8 of them acknowledged
//     and covered, and dies;
//  2. star B's store reads Lists in pages of 2 keys, and a compaction of
//     etcd is armed for the first page boundary of any List;
//  3. B's SettleAll succeeds and settles epoch 3 (guarantees 1–4 hold)
//     without listing anything: it reads A's epochs by number, from the
//     settlement cursor, so the compaction does not fire there;
//  4. B reads the stream's refs (a List in many pages) and the compaction
//     fires between two pages: every acknowledged record is served once,
//     and the refs cover the stream without holes.
//
// Before List started over after a compaction, a List caught this way
// failed with "metastore: revision compacted" (SettleAll listed A's epoch
// records then).
func TestTakeoverAcrossCompaction(t *testing.T) {
	s := newStack(t)
	ctx := within(t, 90*time.Second)
	admin := s.etcd.Client(t)
	a := s.party(t, starA, partyOpts{})
	a.verify(t)

	var acked []string
	for i := range 2 {
		rec, err := a.minter.Mint(ctx, starA, s.constants(2, 16))
		require.NoError(t, err)
		var ids []string
		for j := range 10 {
			ids = append(ids, fmt.Sprintf("e%d-%d", rec.Epoch, j))
		}
		appendAll(t, ctx, a, a.writer(t, rec, chain.WriterOptions{}), uint64(10*i), ids, nil)
		acked = append(acked, ids...)
		reps, err := a.settler.SettleAll(ctx, starA)
		require.NoError(t, err)
		require.Len(t, reps, 1)
	}
	rec3, err := a.minter.Mint(ctx, starA, s.constants(2, 16))
	require.NoError(t, err)
	acked = append(acked, dieMidFlight(t, ctx, a, rec3, 20, 12, 8)...)

	// B's store: pages of 2 keys, and a hook in its client's KV that
	// compacts etcd between two pages when armed.
	var pages *etcdtest.PageHook
	b := s.party(t, starB, partyOpts{wrapStore: func(metastore.Store) metastore.Store {
		cli := etcdtest.NewClient(t, s.etcd.Endpoints()...)
		pages = etcdtest.HookPages(cli)
		st, err := etcd.New(cli, etcd.Options{Root: s.root, RequestTimeout: 2 * time.Second, ListPageSize: 2})
		require.NoError(t, err)
		return st
	}})
	var (
		mu          sync.Mutex // the hook runs on the goroutine of the List
		compactions []int64
		compactErr  error
	)
	compactBetweenPages := func() {
		pages.Once(func() {
			rev, err := etcdtest.Compact(ctx, admin)
			mu.Lock()
			defer mu.Unlock()
			compactions = append(compactions, rev)
			compactErr = errors.Join(compactErr, err)
		})
	}
	compacted := func() ([]int64, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(compactions), compactErr
	}

	compactBetweenPages()
	reps, err := b.settler.SettleAll(ctx, starA)
	revs, cerr := compacted()
	require.NoError(t, cerr)
	require.Empty(t, revs, "SettleAll lists nothing: it reads A's epochs by number")
	require.NoError(t, err)
	require.Len(t, reps, 1, "epochs 1 and 2 were settled by A")
	rep := reps[0]
	require.Equal(t, rec3.Epoch, rep.Epoch)
	require.GreaterOrEqual(t, rep.Cut, uint64(8), "the acknowledged slots lie below the cut")
	t.Logf("epoch %d fenced at cut %d", rec3.Epoch, rep.Cut)

	ackedSlots := []uint64{0, 1, 2, 3, 4, 5, 6, 7}
	got := b.env(t).VerifyEpoch(starA, rec3.Epoch, ackedSlots)
	require.Equal(t, epoch.StateSettled, got.State)

	ids := b.streamIDs(t) // the compaction armed before SettleAll fires here
	revs, cerr = compacted()
	require.NoError(t, cerr)
	require.Len(t, revs, 1, "etcd was compacted between two pages of the list of refs")
	require.Len(t, ids, 20+int(rep.Cut), "the stream is epochs 1 and 2, then epoch 3 up to its cut")
	inStream := counts(ids)
	for _, id := range acked {
		require.Equal(t, 1, inStream[id], "acknowledged %s must be in the stream once", id)
	}
}

// dieMidFlight writes n records at offsets from… in rec's epoch through a
// pipelined writer, waits for the first k acknowledgements and covers
// them, and aborts the writer with the rest in flight, as a star that dies
// would. It returns the ids of the acknowledged records.
func dieMidFlight(t *testing.T, ctx context.Context, p *party, rec *epoch.Record, from uint64, n, k int) []string {
	t.Helper()
	w := p.writer(t, rec, chain.WriterOptions{})
	var fs []*chain.Future
	var payloads [][]byte
	var ids []string
	for i := range n {
		id := fmt.Sprintf("e%d-%d", rec.Epoch, i)
		payload := record(from+uint64(i), id)
		f, err := w.Submit(ctx, payload)
		require.NoError(t, err)
		fs, payloads, ids = append(fs, f), append(payloads, payload), append(ids, id)
	}
	for i := range k {
		pos, err := fs[i].Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: rec.Epoch, Slot: uint64(i)}, pos)
		require.NoError(t, p.refs.Cover(ctx, rec.Star, chain.Flight{Position: pos, Payload: payloads[i]}))
	}
	w.Abort()
	return ids[:k]
}
