package roll

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// These tests pin down interleavings that are too narrow to hit by
// chance: a Submit that has its slot in the current writer but has not
// recorded its append yet, while a roll or Close takes the pending list.
// They play that Submit by hand, holding the submission token.

func newInternalRoller(t *testing.T, wrap func(objstore.Bucket) objstore.Bucket) (*Roller, []*fault.Bucket) {
	return newInternalRollerOpts(t, wrap, Options{})
}

func newInternalRollerOpts(t *testing.T, wrap func(objstore.Bucket) objstore.Bucket, opts Options) (*Roller, []*fault.Bucket) {
	t.Helper()
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	require.NoError(t, err)
	fbs := []*fault.Bucket{fault.Wrap(memblob.New("a"), fault.Options{}), fault.Wrap(memblob.New("b"), fault.Options{}), fault.Wrap(memblob.New("c"), fault.Options{})}
	var bs []objstore.Bucket
	for _, b := range fbs {
		if wrap != nil {
			bs = append(bs, wrap(b))
		} else {
			bs = append(bs, b)
		}
	}
	zones := chain.MustZones(bs...)
	f, err := fence.New(m, zones, fence.Options{})
	require.NoError(t, err)
	refs, err := settle.NewRefIndex(store, "", func(p []byte) ([]settle.Span, error) {
		var off uint64
		_, err := fmt.Sscanf(string(p), "s|%d", &off)
		return []settle.Span{{Stream: "s", Offset: off, Count: 1, End: uint64(len(p))}}, err
	})
	require.NoError(t, err)
	s, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	require.NoError(t, err)
	r, err := Open(context.Background(), s, "star", epoch.Constants{Class: "standard", Buckets: []string{"a", "b", "c"}, W: 2, Window: 4, Prefix: "c"}, opts)
	require.NoError(t, err)
	return r, fbs
}

// halfSubmit does the first half of a Submit: it takes the token and gets
// a slot in the current writer. finish records the append and returns the
// token, as Submit does.
func halfSubmit(t *testing.T, r *Roller, payload []byte) (finish func() *Future) {
	t.Helper()
	r.sub <- struct{}{}
	r.mu.Lock()
	w := r.w
	r.mu.Unlock()
	wf, err := w.Submit(context.Background(), payload)
	require.NoError(t, err)
	return func() *Future {
		a := &Future{payload: payload, wf: wf, ep: w.Record().Epoch, done: make(chan struct{})}
		r.mu.Lock()
		r.pend = append(r.pend, a)
		r.mu.Unlock()
		<-r.sub
		r.poke()
		return a
	}
}

// A roll waits for a submission in progress: the append it records is
// decided by the roll (acknowledged at its old position), never dropped.
func TestRollWaitsForSubmissionInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		// The roll's fence poisons slot 2 of epoch 1: hold that create
		// until the half-done Submit has recorded its append.
		gate := make(chan struct{})
		r, _ := newInternalRoller(t, func(b objstore.Bucket) objstore.Bucket {
			return &gateBucket{Bucket: b, key: "c/star/00000000000000000001/00000000000000000002", open: gate}
		})
		first, err := r.Submit(ctx, []byte("s|0"))
		require.NoError(t, err)
		finish := halfSubmit(t, r, []byte("s|1"))
		c := r.Epoch().Constants
		c.Window = 2
		rolled := make(chan error, 1)
		go func() { rolled <- r.Roll(ctx, c) }()
		synctest.Wait() // the roll has aborted the old writer and waits for the token
		a := finish()
		synctest.Wait()
		close(gate)
		select {
		case err := <-rolled:
			require.NoError(t, err)
		case <-time.After(time.Minute): // the bubble's time: a roll retrying a failing step for ever
			stopped, stop := context.WithCancel(ctx)
			stop()
			_ = r.Close(stopped)
			t.Fatal("the roll did not end within a minute")
		}
		pos, err := a.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: 1, Slot: 1}, pos)
		pos, err = first.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: 1, Slot: 0}, pos)
		third, err := r.Append(ctx, []byte("s|2"))
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: 2, Slot: 0}, third)
		require.NoError(t, r.Close(ctx))
	})
}

// Close waits for a submission in progress too, and reports an append
// whose slot was acknowledged as acknowledged.
func TestCloseWaitsForSubmissionInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r, _ := newInternalRoller(t, nil)
		finish := halfSubmit(t, r, []byte("s|0"))
		closed := make(chan error, 1)
		go func() { closed <- r.Close(ctx) }()
		synctest.Wait() // Close has stopped the writer and waits for the token
		a := finish()
		require.NoError(t, <-closed)
		pos, err := a.Wait(ctx)
		require.NoError(t, err, "the slot was acknowledged before the writer stopped")
		require.Equal(t, chain.Position{Epoch: 1, Slot: 0}, pos)
	})
}

// A Submit waiting behind another one that waits for window space still
// honours its own context.
func TestSubmitWaitingForTokenHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r, zones := newInternalRoller(t, nil)
		// Fill the window with slots that cannot commit: every zone is down.
		for _, z := range zones {
			z.SetDown(true)
		}
		for i := range 4 {
			_, err := r.Submit(ctx, fmt.Appendf(nil, "s|%d", i))
			require.NoError(t, err)
		}
		blocked := make(chan error, 1)
		go func() {
			_, err := r.Submit(ctx, []byte("s|4")) // waits for window space, holding the token
			blocked <- err
		}()
		synctest.Wait()
		tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		_, err := r.Submit(tctx, []byte("s|5"))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer ccancel()
		require.ErrorIs(t, r.Close(cctx), context.DeadlineExceeded)
		require.ErrorIs(t, <-blocked, errClosed)
	})
}

// gateBucket holds creates of one key until open is closed.
type gateBucket struct {
	objstore.Bucket
	key  string
	open chan struct{}
}

func (g *gateBucket) Create(ctx context.Context, key string, data []byte) error {
	if key == g.key {
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Bucket.Create(ctx, key, data)
}

// A roller on a fake clock that nobody advances: Close must notice that
// the pending appends are decided without waiting on the clock, and a
// Submit that meets the halt must notice the roll the same way.
func TestRollerOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fake := clock.NewFake(time.Now())
		r, zones := newInternalRollerOpts(t, nil, Options{Clock: fake, RollOnHalt: true})
		ep := r.Epoch().Epoch
		for _, z := range zones[:2] {
			require.NoError(t, z.Inner().Create(ctx, fmt.Sprintf("c/star/%020d/%020d", ep, 6), wire.EncodePoison("star", ep, 6, "other")))
		}
		var apps []*Future
		for i := range 40 {
			a, err := r.Submit(ctx, fmt.Appendf(nil, "s|%d", i))
			require.NoError(t, err)
			apps = append(apps, a)
		}
		require.NoError(t, r.Close(ctx))
		var last chain.Position
		for i, a := range apps {
			pos, err := a.Wait(ctx)
			require.NoError(t, err)
			if i > 0 {
				require.True(t, last.Less(pos))
			}
			last = pos
		}
		require.Equal(t, ep+1, r.Epoch().Epoch)
	})
}
