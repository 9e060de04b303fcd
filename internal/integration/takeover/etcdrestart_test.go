package takeover_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/roll"
)

// stopBeforeTxn is a metastore.Store that runs stop right before it
// forwards its first Txn: the etcd member dies at that exact step.
type stopBeforeTxn struct {
	metastore.Store
	once sync.Once
	stop func()
}

func (s *stopBeforeTxn) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	s.once.Do(s.stop)
	return s.Store.Txn(ctx, t)
}

// TestEtcdRestartDuringAppends stops the single etcd member while a Roller
// appends and a fence runs, and restarts it:
//
//  1. star A appends through a Roller; its host covers each acknowledged
//     record and advances the checkpoint.
//  2. a fencer of star Z's epoch walks the slots and poisons the frontier;
//     the etcd member is stopped right before it publishes the cut, so the
//     publication fails with metastore.ErrUnavailable.
//  3. during the outage every metastore read and write fails with
//     ErrUnavailable (a record that exists and a key that does not are
//     indistinguishable; neither reads as "not found"), while A's appends
//     keep being acknowledged: writing a chain needs no metastore.
//  4. a roll requested during the outage retries its mint until etcd is
//     restarted, then completes; the producer only waits.
//  5. the fence retried after the restart publishes the cut the first walk
//     decided (its poison is found standing; nothing new is poisoned).
//
// Afterwards every epoch of A settles with guarantees 1–4, every
// acknowledged record is served exactly once through the RefIndex and in
// chain order, and cutlinetest.Check finds no violation in the History the
// host recorded.
func TestEtcdRestartDuringAppends(t *testing.T) {
	const starZ = "star-z"
	s := newStack(t)
	ctx := within(t, 120*time.Second)
	p := s.party(t, starA, partyOpts{requestTimeout: time.Second})
	p.verify(t)

	// Star Z's epoch: 20 records, then its writer stops; the epoch is open.
	recZ, err := p.minter.Mint(ctx, starZ, s.constants(2, 8))
	require.NoError(t, err)
	wz := p.writer(t, recZ, chain.WriterOptions{})
	for i := range 20 {
		_, err := wz.Append(ctx, recordIn("audit", uint64(i), fmt.Sprintf("z%d", i)))
		require.NoError(t, err)
	}
	require.NoError(t, wz.Close(ctx))

	rollFailed := make(chan struct{})
	ro := rollerOpts(false)
	ro.Logger = slog.New(&logSignal{match: "roll step failed", ch: rollFailed})
	r, err := roll.Open(ctx, p.settler, starA, s.constants(2, 16), ro)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	// A's host covers each acknowledged record and advances the
	// checkpoint; while the metastore is unreachable it records each
	// refused write and tries again at the next acknowledgement.
	hist := &cutlinetest.History{}
	h := cutlinetest.StartRoller(p.harness(t), r, cutlinetest.HostOptions{Name: starA, Stream: stream, History: hist})
	credit := make(chan struct{}, maxRecords)
	allow := func(n int) { // lets the producer send n more records
		for range n {
			credit <- struct{}{}
		}
	}
	pctx, stopProducer := context.WithCancel(ctx)
	produced := produce(pctx, h, "e", credit)
	allow(60)
	require.NoError(t, h.WaitAcked(ctx, 40)) // and up to 20 more in flight

	// The fence of Z takes etcd down when it publishes.
	f := s.party(t, "fencer", partyOpts{requestTimeout: time.Second, wrapStore: func(st metastore.Store) metastore.Store {
		return &stopBeforeTxn{Store: st, stop: s.member.Stop}
	}})
	rep, err := f.fencer.FenceReport(ctx, starZ, recZ.Epoch)
	require.ErrorIs(t, err, metastore.ErrUnavailable, "publishing the cut with etcd down")
	require.NotErrorIs(t, err, epoch.ErrNoRecord)
	require.NotErrorIs(t, err, fence.ErrUndecided)
	require.False(t, s.member.Running())
	require.Equal(t, int64(2), rep.Poisoned, "the walk poisoned slot 20 in two zones before the publication")
	require.Equal(t, 2, strings.Count(p.env(t).State(recZ, 20), string(cutlinetest.Poison)), "the walk's decision stands in the zones")
	outageAcks := h.Acked()
	t.Logf("etcd stopped while fencing %s: %d acknowledgements so far", starZ, outageAcks)

	// During the outage: unknown, never absent.
	outage := map[string]func() error{
		"get an existing key": func() error { _, err := p.store.Get(ctx, "chains/"+starZ); return err },
		"get a missing key":   func() error { _, err := p.store.Get(ctx, "no/such/key"); return err },
		"put":                 func() error { _, err := metastore.Put(ctx, p.store, "outage/probe", []byte("x"), 0); return err },
		"list":                func() error { _, _, err := p.store.List(ctx, "chains/"); return err },
		"epoch record":        func() error { _, err := p.minter.Get(ctx, starZ, recZ.Epoch); return err },
		"missing epoch":       func() error { _, err := p.minter.Get(ctx, starZ, 99); return err },
		"ref lookup":          func() error { _, err := p.refs.Lookup(ctx, stream, 0); return err },
		"stream end":          func() error { _, err := p.refs.Next(ctx, stream); return err },
		"fence":               func() error { _, err := p.fencer.Fence(ctx, starZ, recZ.Epoch); return err },
		"settle":              func() error { _, err := p.settler.Settle(ctx, starZ, recZ.Epoch); return err },
		"read a flight":       func() error { _, err := p.reader.Read(ctx, starA, chain.Position{Epoch: 1}); return err },
	}
	errs := make(map[string]error, len(outage))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, call := range outage {
		wg.Go(func() {
			err := call()
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, err := range errs {
		assert.ErrorIs(t, err, metastore.ErrUnavailable, "%s during the outage", name)
		assert.NotErrorIs(t, err, metastore.ErrNotFound, "%s during the outage", name)
		assert.NotErrorIs(t, err, epoch.ErrNoRecord, "%s during the outage", name)
		assert.NotErrorIs(t, err, chain.ErrNotCommitted, "%s during the outage", name)
	}

	// Appends need no metastore.
	allow(40)
	require.NoError(t, h.WaitAcked(ctx, 100))

	// A roll asked for now retries its mint until etcd is back.
	rollRes := make(chan error, 1)
	allow(20) // appended before the roll, or waiting for it
	go func() { rollRes <- r.Roll(ctx, s.constants(3, 8)) }()
	select {
	case <-rollFailed:
	case err := <-rollRes:
		t.Fatalf("the roll finished with etcd down: %v", err)
	case <-ctx.Done():
		t.Fatalf("the roll met no failure: %v", ctx.Err())
	}
	s.member.Restart(t)
	t.Logf("etcd restarted; %d acknowledgements so far", h.Acked())
	select {
	case err := <-rollRes:
		require.NoError(t, err, "the roll completes after the restart")
	case <-ctx.Done():
		t.Fatalf("the roll did not complete after the restart: %v", ctx.Err())
	}
	rolledTo := r.Epoch()
	require.Equal(t, s.constants(3, 8), rolledTo.Constants)

	// The fence retried after the restart publishes the same cut.
	g := s.party(t, "fencer-again", partyOpts{})
	rep, err = g.fencer.FenceReport(ctx, starZ, recZ.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(20), rep.Cut)
	require.False(t, rep.AlreadyFenced, "the first publication never landed")
	require.Zero(t, rep.Poisoned, "the first walk's poison is found standing")
	srep, err := p.settler.Settle(ctx, starZ, recZ.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(20), srep.Cut)
	require.Equal(t, 20, srep.Covered)
	p.env(t).VerifyEpoch(starZ, recZ.Epoch, seq(20))

	// Appends go on in the new epoch.
	allow(40)
	require.NoError(t, h.WaitAcked(ctx, 160))
	stopProducer()
	<-produced
	// Close waits until every submitted append is decided and absorbed as
	// far as the metastore lets it, and closes the roller.
	closeErr := h.Close(ctx)
	require.Equal(t, h.Err(), closeErr, "the roller closes; the host's errors are its metastore writes'")
	o := outcomeOf(hist, starA)
	require.Empty(t, o.failed, "the producer sees only acknowledgements")
	require.Len(t, o.acked, 160)
	for attempt := 0; h.Flush() != nil; attempt++ {
		require.Less(t, attempt, 20, "the host could not cover its records after the restart: %v", h.Err())
	}
	unavailable := 0
	for _, err := range h.Errors() {
		switch {
		case errors.Is(err, metastore.ErrUnavailable):
			unavailable++
		case errors.Is(err, epoch.ErrCursorRegression):
		default:
			t.Errorf("the host's metastore writes may fail only as unavailable: %v", err)
		}
	}
	t.Logf("%d records acknowledged; the host's metastore writes failed %d times as unavailable", len(o.acked), unavailable)
	require.Positive(t, unavailable, "the host wrote during the outage")

	// Every epoch of A settles with guarantees 1–4; an epoch whose mint
	// answer was lost at the restart holds nothing.
	_, err = p.settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	perEpoch := map[uint64][]uint64{}
	for _, pos := range o.acked {
		perEpoch[pos.Epoch] = append(perEpoch[pos.Epoch], pos.Slot)
	}
	for rec, err := range p.minter.Epochs(ctx, starA) {
		require.NoError(t, err)
		require.Equal(t, epoch.StateSettled, rec.State)
		p.env(t).VerifyEpoch(starA, rec.Epoch, perEpoch[rec.Epoch])
		if len(perEpoch[rec.Epoch]) == 0 {
			require.Zero(t, rec.Cut, "epoch %d holds nothing acknowledged", rec.Epoch)
		}
	}
	require.Contains(t, perEpoch, uint64(1))
	require.Contains(t, perEpoch, rolledTo.Epoch)

	// Guarantee 5, in chain order and through the host's index.
	ids, poss := p.chainIDs(t, starA)
	require.Len(t, ids, len(o.submitted))
	for i, id := range o.submitted {
		require.Equal(t, id, ids[i])
		require.Equal(t, o.acked[id], poss[i], "%s", id)
	}
	require.Equal(t, ids, p.streamIDs(t))

	// The six guarantees over the run the producer saw.
	p.verifyRun(t, hist)
}

// seq returns 0, 1, …, n−1.
func seq(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}
