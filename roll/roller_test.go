package roll_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// producer submits records pipelined through a roller and collects the
// outcomes in submission order.
type producer struct {
	name string
	apps []*roll.Future
	ids  []string
}

func (pr *producer) run(t testing.TB, ctx context.Context, r *roll.Roller, n int, off *offsets, each func(i int)) {
	for i := range n {
		id := fmt.Sprintf("%s%d", pr.name, i)
		a, err := off.submit(func(o uint64) (*roll.Future, error) { return r.Submit(ctx, record(stream, o, id)) })
		if err != nil {
			t.Errorf("submit %s: %v", id, err)
			return
		}
		pr.apps = append(pr.apps, a)
		pr.ids = append(pr.ids, id)
		if each != nil {
			each(i)
		}
	}
}

// check waits for every append: each must be acknowledged (a delayed ack,
// never an error), at strictly increasing positions in submission order.
func (pr *producer) check(t testing.TB, ctx context.Context) map[string]chain.Position {
	t.Helper()
	out := map[string]chain.Position{}
	var last chain.Position
	for i, a := range pr.apps {
		pos, err := a.Wait(ctx)
		require.NoError(t, err, "append %s", pr.ids[i])
		if i > 0 {
			require.True(t, last.Less(pos), "append %s at %v after %v", pr.ids[i], pos, last)
		}
		last = pos
		out[pr.ids[i]] = pos
	}
	return out
}

// offsets hands out stream offsets in chain order: a record takes the
// stream's next offset and is submitted in one step, so that the stream's
// refs tile it in chain order however many producers submit at once. The
// token is a channel, not a mutex, so that producers waiting for it are
// durably blocked in a synctest bubble.
type offsets struct {
	token chan struct{}
	next  uint64
}

func newOffsets() *offsets { return &offsets{token: make(chan struct{}, 1)} }

// submit calls sub with the next offset, which is used when sub succeeds.
func (o *offsets) submit(sub func(offset uint64) (*roll.Future, error)) (*roll.Future, error) {
	o.token <- struct{}{}
	defer func() { <-o.token }()
	a, err := sub(o.next)
	if err == nil {
		o.next++
	}
	return a, err
}

// verifyChain checks a star's chain after the rolls: every epoch settled
// with guarantees 1–4, every acknowledged record read exactly once at its
// acknowledged position (guarantee 5), nothing else in the chain.
func verifyChain(t testing.TB, p *settletest.Party, acked map[string]chain.Position) []string {
	t.Helper()
	ctx := context.Background()
	_, err := p.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	perEpoch := map[uint64][]uint64{}
	for _, pos := range acked {
		perEpoch[pos.Epoch] = append(perEpoch[pos.Epoch], pos.Slot)
	}
	for rec, err := range p.Minter.Epochs(ctx, starA) {
		require.NoError(t, err)
		require.Equal(t, epoch.StateSettled, rec.State)
		p.Env.On(t).VerifyEpoch(starA, rec.Epoch, perEpoch[rec.Epoch])
	}
	ids, poss := settletest.ChainIDs(t, p, starA)
	settletest.RequireUnique(t, ids, "chain")
	require.Len(t, ids, len(acked))
	for i, id := range ids {
		require.Equal(t, acked[id], poss[i], "%s", id)
	}
	return ids
}

// Planned rolls change every constant in turn: W, the window, the bucket
// set and the class, while a producer keeps appending.
func TestRollerPlannedRolls(t *testing.T) {
	for _, be := range settletest.Backends {
		t.Run(be.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { plannedRolls(t, be.New(t, 4)) })
		})
	}
}

func plannedRolls(t *testing.T, e *settletest.Env) {
	ctx := context.Background()
	p := e.NewParty("host", settletest.PartyOptions{})
	c := []epoch.Constants{
		{Class: "standard", Buckets: []string{"a", "b", "c"}, W: 2, Window: 8, Prefix: e.Keys.Prefix},
		{Class: "standard", Buckets: []string{"a", "b", "c"}, W: 3, Window: 8, Prefix: e.Keys.Prefix},
		{Class: "standard", Buckets: []string{"a", "b", "c"}, W: 3, Window: 3, Prefix: e.Keys.Prefix},
		{Class: "standard", Buckets: []string{"b", "c", "d"}, W: 2, Window: 3, Prefix: e.Keys.Prefix},
		{Class: "express", Buckets: []string{"b", "c", "d"}, W: 2, Window: 16, Prefix: e.Keys.Prefix},
		{Class: "express", Buckets: []string{"d"}, W: 1, Window: 4, Prefix: e.Keys.Prefix},
	}
	r, err := roll.Open(ctx, p.Settler, starA, c[0], roll.Options{})
	require.NoError(t, err)
	off := newOffsets()
	pr := &producer{name: "r"}
	pr.run(t, ctx, r, 150, off, func(i int) {
		if i%25 == 24 && i/25+1 < len(c) {
			// Up to a window of appends are in flight.
			require.NoError(t, r.Roll(ctx, c[i/25+1]))
		}
	})
	acked := pr.check(t, ctx)
	require.NoError(t, r.Close(ctx))
	require.Equal(t, uint64(len(c)), r.Epoch().Epoch)

	ids := verifyChain(t, p, acked)
	require.Equal(t, pr.ids, ids, "the chain holds the records in submission order")
	require.Equal(t, pr.ids, settletest.CheckStream(t, p, stream))
	for i, want := range c {
		rec, err := p.Minter.Get(ctx, starA, uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, want, rec.Constants)
	}
	ch, err := p.Minter.Chain(ctx, starA)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"standard": 4, "express": 6}, ch.Heads)

	err = r.Roll(ctx, c[0])
	require.ErrorIs(t, err, roll.ErrClosedForTest)
	_, err = r.Submit(ctx, []byte("late"))
	require.ErrorIs(t, err, roll.ErrClosedForTest)
	require.NoError(t, r.Close(ctx), "Close is idempotent")
}

// A fencer the roller did not ask for (here: poison placed ahead of the
// writer, as a racing fencer would) halts its writer three times, under
// injected latency and transient faults. With RollOnHalt the producers
// only see delayed acknowledgements.
func TestRollerRollOnHaltUnderFaults(t *testing.T) {
	for _, be := range settletest.Backends {
		t.Run(be.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { rollOnHalt(t, be.New(t, 3)) })
		})
	}
}

func rollOnHalt(t *testing.T, e *settletest.Env) {
	ctx := context.Background()
	for _, z := range e.Zones {
		require.NoError(t, z.AddRule(fault.Rule{Probability: 0.04}))
		require.NoError(t, z.AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: 0.04}))
	}
	// Epoch 1 is fenced at slot 15 by someone else before it starts;
	// epochs 2 and 3 are fenced at slots 20 and 25 (or the first slot
	// past them not yet written) while the producers append.
	e.PutPoison(0, starA, 1, 15)
	e.PutPoison(1, starA, 1, 15)
	cuts := map[uint64]uint64{1: 15}
	p := e.NewParty("host", settletest.PartyOptions{
		Wrap: func(i int, b objstore.Bucket) objstore.Bucket {
			return latency.Wrap(b, latency.Options{Seed: uint64(i), Default: latency.Uniform(time.Millisecond, 5*time.Millisecond)})
		},
		Settle: settle.Options{Backoff: clock.Backoff{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond}},
		Fence:  settletest.FenceFast,
	})
	r, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 8), roll.Options{
		RollOnHalt: true,
		Backoff:    clock.Backoff{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond},
		Writer:     chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}},
	})
	require.NoError(t, err)
	prs := []*producer{{name: "x"}, {name: "y"}}
	var wg sync.WaitGroup
	off := newOffsets()
	for _, pr := range prs {
		wg.Go(func() { pr.run(t, ctx, r, 60, off, nil) })
	}
	wg.Go(func() {
		for _, at := range []struct{ ep, slot uint64 }{{2, 20}, {3, 25}} {
			ep, slot := at.ep, at.slot
			for r.Epoch().Epoch < ep {
				time.Sleep(100 * time.Microsecond) // synctest time
			}
			for ; ; slot += 10 {
				created := 0
				for _, z := range e.Raw[:2] {
					if z.Create(ctx, e.Key(starA, ep, slot), wire.EncodePoison(starA, ep, slot, "other")) == nil {
						created++
					}
				}
				if created == 2 {
					cuts[ep] = slot
					break
				}
			}
		}
	})
	wg.Wait()
	acked := map[string]chain.Position{}
	for _, pr := range prs {
		for id, pos := range pr.check(t, ctx) {
			acked[id] = pos
		}
	}
	require.NoError(t, r.Close(ctx))
	require.Equal(t, uint64(4), r.Epoch().Epoch, "three halts, three rolls")
	for _, z := range e.Zones {
		z.ClearRules()
	}
	verifyChain(t, p, acked)
	for ep, cut := range cuts {
		rec, err := p.Minter.Get(ctx, starA, ep)
		require.NoError(t, err)
		require.Equal(t, cut, rec.Cut)
	}
	ids := settletest.CheckStream(t, p, stream)
	require.Len(t, ids, 120)
}

// Without RollOnHalt the appends at and past the dead slot fail with the
// writer's ErrFenced, and so does every later Submit.
func TestRollerWithoutRollOnHalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		e.PutPoison(0, starA, 1, 10)
		e.PutPoison(2, starA, 1, 10)
		p := e.NewParty("host", settletest.PartyOptions{})
		r, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{})
		require.NoError(t, err)
		var apps []*roll.Future
		for i := range 14 {
			a, err := r.Submit(ctx, record(stream, uint64(i), fmt.Sprint(i)))
			if err != nil {
				require.ErrorIs(t, err, chain.ErrFenced)
				break
			}
			apps = append(apps, a)
		}
		for i, a := range apps {
			pos, err := a.Wait(ctx)
			if i < 10 {
				require.NoError(t, err)
				require.Equal(t, chain.Position{Epoch: 1, Slot: uint64(i)}, pos)
				continue
			}
			require.ErrorIs(t, err, chain.ErrFenced)
			var fe *chain.FencedError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, uint64(10), fe.Slot)
		}
		_, err = r.Submit(ctx, []byte("s|99|late"))
		require.ErrorIs(t, err, chain.ErrFenced)
		require.Equal(t, uint64(1), r.Epoch().Epoch, "no roll")
		require.NoError(t, r.Close(ctx))
		reps, err := p.Settler.SettleAll(ctx, starA)
		require.NoError(t, err)
		require.Equal(t, uint64(10), reps[0].Cut)
	})
}

// Many producers and rolls in quick succession: every append is decided
// exactly once, and the chain holds each acknowledged record once.
func TestRollerConcurrentSubmitsAndRolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		p := e.NewParty("host", settletest.PartyOptions{})
		c := e.Constants(2, 4)
		r, err := roll.Open(ctx, p.Settler, starA, c, roll.Options{RollOnHalt: true})
		require.NoError(t, err)
		prs := make([]*producer, 4)
		var wg sync.WaitGroup
		off := newOffsets()
		for i := range prs {
			prs[i] = &producer{name: fmt.Sprintf("p%d-", i)}
			wg.Go(func() { prs[i].run(t, ctx, r, 40, off, nil) })
		}
		for i := range 12 {
			cc := c
			cc.Window = 2 + i%5
			require.NoError(t, r.Roll(ctx, cc))
		}
		wg.Wait()
		acked := map[string]chain.Position{}
		for _, pr := range prs {
			for id, pos := range pr.check(t, ctx) {
				acked[id] = pos
			}
		}
		require.NoError(t, r.Close(ctx))
		require.Len(t, acked, 160)
		verifyChain(t, p, acked)
	})
}

// A roller that cannot finish (every zone down) is closed with a deadline:
// its pending appends fail with the roller's closed error, and the next incarnation
// settles what they left.
func TestRollerCloseGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		p := e.NewParty("host", settletest.PartyOptions{})
		r, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{})
		require.NoError(t, err)
		pos, err := r.Append(ctx, record(stream, 0, "a"))
		require.NoError(t, err)
		for _, z := range e.Zones {
			z.SetDown(true)
		}
		a, err := r.Submit(ctx, record(stream, 1, "b"))
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, r.Close(cctx), context.DeadlineExceeded)
		_, err = a.Wait(ctx)
		require.ErrorIs(t, err, roll.ErrClosedForTest)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		for _, z := range e.Zones {
			z.SetDown(false)
		}
		r2, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{})
		require.NoError(t, err)
		require.Equal(t, uint64(2), r2.Epoch().Epoch)
		require.NoError(t, r2.Close(ctx))
		verifyChain(t, p, map[string]chain.Position{"a": pos})
	})
}

func TestRollerValidation(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{NoFencer: true})
	_, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid, "a roller fences its own epochs")
	p = e.NewParty("host", settletest.PartyOptions{})
	_, err = roll.Open(ctx, p.Settler, starA, epoch.Constants{Class: "standard", Buckets: []string{"a"}, W: 2, Window: 1, Prefix: e.Keys.Prefix}, roll.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = roll.Open(ctx, p.Settler, starA, epoch.Constants{Class: "standard", Buckets: []string{"zz"}, W: 1, Window: 1, Prefix: e.Keys.Prefix}, roll.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid, "an unknown zone")
	// Nothing was minted for it: the star opens normally afterwards.
	r, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{})
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Epoch().Epoch)
	require.ErrorIs(t, r.Roll(ctx, epoch.Constants{Class: "standard", Buckets: []string{"a", "a"}, W: 1, Window: 1}), cutline.ErrInvalid)
	require.ErrorIs(t, r.Roll(ctx, epoch.Constants{Class: "standard", Buckets: []string{"a", "zz"}, W: 1, Window: 1}), cutline.ErrInvalid)
	// The roller is unharmed by refused rolls.
	pos, err := r.Append(ctx, record(stream, 0, "x"))
	require.NoError(t, err)
	require.Equal(t, chain.Position{Epoch: 1, Slot: 0}, pos)
	require.Equal(t, e.Constants(2, 4), r.Epoch().Constants)
	require.NoError(t, r.Close(ctx))
	ch, err := p.Minter.Chain(ctx, starA)
	require.NoError(t, err)
	require.Equal(t, uint64(2), ch.Next, "refused constants mint nothing")
}

// A blocked slot (objects that are neither flight nor poison in every
// zone) is not rolled past, even with RollOnHalt: the fence of the old
// epoch could not decide it either. The appends there fail with
// ErrBlocked, naming the objects, for an operator to look at.
func TestRollerDoesNotRollPastBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		for z := range 3 {
			require.NoError(t, e.Raw[z].Create(ctx, e.Key(starA, 1, 3), []byte("not a slot object")))
		}
		p := e.NewParty("host", settletest.PartyOptions{})
		r, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 8), roll.Options{RollOnHalt: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close(ctx) })
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var apps []*roll.Future
		for i := range 6 {
			a, err := r.Submit(ctx, record(stream, uint64(i), fmt.Sprint(i)))
			if i >= 3 && err != nil {
				// The writer may have met slot 3 already: a halted
				// writer refuses a Submit at once.
				require.ErrorIs(t, err, chain.ErrNoQuorum, "append %d", i)
				continue
			}
			require.NoError(t, err, "append %d", i)
			apps = append(apps, a)
		}
		require.GreaterOrEqual(t, len(apps), 4, "slot 3 was placed before any halt")
		for i, a := range apps {
			_, err := a.Wait(wctx)
			if i < 3 {
				require.NoError(t, err, "append %d", i)
				continue
			}
			require.ErrorIs(t, err, chain.ErrNoQuorum, "append %d", i)
		}
		_, err = r.Submit(ctx, []byte("s|9|late"))
		require.ErrorIs(t, err, chain.ErrNoQuorum)
		require.Equal(t, uint64(1), r.Epoch().Epoch)
		require.NoError(t, r.Close(ctx))
	})
}

// TestOpenRefusesBeforeActing: bad constants or writer options are
// refused before Open fences, settles or mints anything, so a live
// writer of the star is not halted by a call that was never going to run.
func TestOpenRefusesBeforeActing(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := p.Mint(ctx, starA, e.Constants(2, 4))
	w := p.Writer(rec, chain.WriterOptions{})
	_, err := w.Append(ctx, record(stream, 0, "x"))
	require.NoError(t, err)

	_, err = roll.Open(ctx, nil, starA, e.Constants(2, 4), roll.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	bad := e.Constants(2, 4)
	bad.Window = 0
	_, err = roll.Open(ctx, p.Settler, starA, bad, roll.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{Writer: chain.WriterOptions{Backoff: clock.Backoff{Min: -1}}})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{Backoff: clock.Backoff{Min: -1}})
	require.ErrorIs(t, err, cutline.ErrInvalid)

	got, err := p.Minter.Get(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, epoch.StateOpen, got.State, "nothing was fenced")
	ch, err := p.Minter.Chain(ctx, starA)
	require.NoError(t, err)
	require.Equal(t, rec.Epoch+1, ch.Next, "nothing was minted")
	_, err = w.Append(ctx, record(stream, 1, "y"))
	require.NoError(t, err, "the live writer goes on")
	require.NoError(t, w.Close(ctx))
}
