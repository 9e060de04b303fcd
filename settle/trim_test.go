package settle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
)

func TestTrim(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, p)
	_, err := p.Settler.Settle(ctx, starA, l.ep)
	require.NoError(t, err)

	rep, err := p.Settler.Trim(ctx, starA, l.ep, 6)
	require.NoError(t, err)
	require.Equal(t, uint64(6), rep.Trimmed)
	require.Equal(t, 15, rep.Deleted, "slots 0–5: a and b hold all six, c the three even ones")
	require.Zero(t, rep.Left)
	rec, err := p.Minter.Get(ctx, starA, l.ep)
	require.NoError(t, err)
	require.Equal(t, uint64(6), rec.Cursors.Trimmed)
	for s := range uint64(6) {
		require.Equal(t, "E E E", e.State(rec, s), "slot %d", s)
	}
	_, err = e.Raw[1].Get(ctx, e.Keys.Epoch(starA, l.ep)+"notes")
	require.NoError(t, err, "a key that is not a slot is never trimmed")

	// The reader skips the trimmed slots; a read below is ErrBelowRetention.
	var got []uint64
	for f, err := range p.Reader().Flights(ctx, starA, chain.Position{}) {
		require.NoError(t, err)
		got = append(got, f.Slot)
	}
	require.Equal(t, []uint64{6, 7, 8, 9, 10}, got)
	_, err = p.Reader().Read(ctx, starA, chain.Position{Epoch: l.ep, Slot: 5})
	require.ErrorIs(t, err, cutline.ErrTrimmed)
	p.Env.On(t).VerifyEpoch(starA, l.ep, nil)

	// Past the checkpoint (the cut of a settled epoch): refused, nothing
	// moves. The cut slot's poison always stands.
	_, err = p.Settler.Trim(ctx, starA, l.ep, l.cut+1)
	require.ErrorIs(t, err, epoch.ErrCursorAhead)
	var ce *epoch.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "trimmed", ce.Cursor)

	// Up to the cut: everything below goes, the poison at the cut stays.
	rep, err = p.Settler.Trim(ctx, starA, l.ep, l.cut)
	require.NoError(t, err)
	require.Equal(t, l.cut, rep.Trimmed)
	require.Equal(t, "P P E", e.State(rec, l.cut))
	for s := range l.cut {
		require.Equal(t, "E E E", e.State(rec, s), "slot %d", s)
	}
	ids, _ := settletest.ChainIDs(t, p, starA)
	require.Empty(t, ids)

	// A lower upTo does not move the cursor back.
	rep, err = p.Settler.Trim(ctx, starA, l.ep, 2)
	require.NoError(t, err)
	require.Equal(t, l.cut, rep.Trimmed)
	require.Zero(t, rep.Deleted)
}

// The cursor moves before any object goes: a trim that crashed in between
// (or met an unreachable bucket) leaves objects that the next trim of the
// epoch deletes.
func TestTrimFinishesLeftovers(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, p)
	_, err := p.Settler.Settle(ctx, starA, l.ep)
	require.NoError(t, err)

	e.Zones[2].SetDown(true)
	rep, err := p.Settler.Trim(ctx, starA, l.ep, 4)
	require.NoError(t, err, "an unreachable bucket is not an error: its objects are left for later")
	require.Equal(t, uint64(4), rep.Trimmed)
	require.Equal(t, 8, rep.Deleted)
	require.Equal(t, 1, rep.Left)
	e.Zones[2].SetDown(false)
	require.Equal(t, "E E F", e.State(e.Record(starA, l.ep), 0))

	// A crash between the cursor and the deletes.
	rec, err := p.Minter.Get(ctx, starA, l.ep)
	require.NoError(t, err)
	c := rec.Cursors
	c.Trimmed = 8
	_, err = p.Minter.Advance(ctx, starA, l.ep, c)
	require.NoError(t, err)

	rep, err = p.Settler.Trim(ctx, starA, l.ep, 8)
	require.NoError(t, err)
	require.Equal(t, uint64(8), rep.Trimmed)
	require.Equal(t, 2+8+2, rep.Deleted, "c's leftovers below 4, and slots 4–7 everywhere")
	for s := range uint64(8) {
		require.Equal(t, "E E E", e.State(rec, s), "slot %d", s)
	}
}

// An open epoch can be trimmed below its checkpoint: the host covered and
// (say) compacted those slots while its writer keeps appending.
func TestTrimOpenEpoch(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := p.Mint(ctx, starA, e.Constants(2, 4))
	w := p.Writer(rec, chain.WriterOptions{})
	for i := range uint64(6) {
		_, err := w.Append(ctx, record(stream, i, "x"))
		require.NoError(t, err)
	}
	_, err := p.Settler.Trim(ctx, starA, rec.Epoch, 3)
	require.ErrorIs(t, err, epoch.ErrCursorAhead, "the checkpoint is still 0: trimming past it is not a regression")
	require.NotErrorIs(t, err, epoch.ErrCursorRegression)
	_, err = w.Checkpoint(ctx, 4)
	require.NoError(t, err)
	rep, err := p.Settler.Trim(ctx, starA, rec.Epoch, 3)
	require.NoError(t, err)
	require.Equal(t, uint64(3), rep.Trimmed)
	_, err = w.Append(ctx, record(stream, 6, "x"))
	require.NoError(t, err)
	var got []uint64
	for f, err := range p.Reader().Flights(ctx, starA, chain.Position{}) {
		require.NoError(t, err)
		got = append(got, f.Slot)
	}
	require.Equal(t, []uint64{3, 4, 5, 6}, got)
	require.NoError(t, w.Close(ctx))

	_, err = p.Settler.Trim(ctx, starA, rec.Epoch+1, 0)
	require.ErrorIs(t, err, epoch.ErrNoRecord)
}

// TrimUnneeded trims up to the lowest slot a retained ref needs: nothing
// while every stream starts at 0, up to the slowest stream's retention
// point, up to the checkpoint once no ref needs a flight.
func TestTrimUnneeded(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 40, true)

	tr, err := p.Settler.TrimUnneeded(ctx, p.Refs, starA, rec.Epoch)
	require.NoError(t, err)
	require.Zero(t, tr.Trimmed, "every stream needs slot 0")
	require.Zero(t, tr.Deleted)

	for _, st := range bundleStreams {
		_, err := p.Refs.Retain(ctx, st, 30)
		require.NoError(t, err)
	}
	_, err = p.Refs.Retain(ctx, "s0", 10) // never moves back
	require.NoError(t, err)
	tr, err = p.Settler.TrimUnneeded(ctx, p.Refs, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(30), tr.Trimmed, "slot s holds record s of each stream")
	require.Equal(t, 3*30, tr.Deleted)

	for _, st := range bundleStreams {
		_, err := p.Refs.Retain(ctx, st, 40)
		require.NoError(t, err)
	}
	tr, err = p.Settler.TrimUnneeded(ctx, p.Refs, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(40), tr.Trimmed, "no ref needs a flight: up to the checkpoint, 40")
	require.Equal(t, 3*10, tr.Deleted)

	_, err = p.Settler.TrimUnneeded(ctx, nil, starA, rec.Epoch)
	var cerr *cutline.ConfigError
	require.ErrorAs(t, err, &cerr)
}

// A stale writer's flight landing past the cut after settlement swept
// there is deleted by the next Trim of the settled epoch; poison past the
// cut and the cut's own poison stay.
func TestTrimSweepsLateFlights(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, p)
	_, err := p.Settler.Settle(ctx, starA, l.ep)
	require.NoError(t, err)
	rec, err := p.Minter.Get(ctx, starA, l.ep)
	require.NoError(t, err)

	e.PutFlight(0, starA, l.ep, l.cut+2, []byte("late"))
	e.PutFlight(2, starA, l.ep, l.cut+2, []byte("late"))
	e.PutFlight(1, starA, l.ep, l.cut+40, []byte("later"))
	e.PutPoison(0, starA, l.ep, l.cut+7)
	require.Equal(t, "P P E", e.State(rec, l.cut))
	e.PutFlight(2, starA, l.ep, l.cut, []byte("at the cut"))
	rep, err := p.Settler.Trim(ctx, starA, l.ep, 0)
	require.NoError(t, err)
	require.Equal(t, 4, rep.Late)
	require.Equal(t, 4, rep.Deleted)
	require.Equal(t, "E E E", e.State(rec, l.cut+2))
	require.Equal(t, "E E E", e.State(rec, l.cut+40))
	require.Equal(t, "P E E", e.State(rec, l.cut+7), "poison past the cut is not a flight")
	require.Equal(t, "P P E", e.State(rec, l.cut), "the cut's poison stands")
	p.Env.On(t).VerifyEpoch(starA, l.ep, nil)

	again, err := p.Settler.Trim(ctx, starA, l.ep, 0)
	require.NoError(t, err)
	require.Zero(t, again.Late+again.Deleted)
}
