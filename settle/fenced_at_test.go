package settle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/settletest"
)

// closedAtRelease mints an epoch, appends three records through a writer
// that closes cleanly, fences the epoch at its release point and lays a
// flight copy past the cut, as a straggler would: what settlement's
// sweep deletes.
func closedAtRelease(t *testing.T, e *settletest.Env, p *settletest.Party) (ep uint64, fr fence.Report, garbage string) {
	t.Helper()
	ctx := context.Background()
	rec, err := p.Minter.Mint(ctx, starA, e.Constants(2, 8))
	require.NoError(t, err)
	w := p.Writer(rec, chain.WriterOptions{})
	for i := range uint64(3) {
		_, err := w.Append(ctx, record(stream, i, "x"))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close(ctx))
	fr, err = p.Fencer.FenceAt(ctx, starA, rec.Epoch, w.Released())
	require.NoError(t, err)
	require.True(t, fr.AtRelease, "a cleanly closed writer is fenced at its release point")
	e.PutFlight(0, starA, rec.Epoch, fr.Cut+1, record(stream, 9, "straggler"))
	return rec.Epoch, fr, e.Key(starA, rec.Epoch, fr.Cut+1)
}

// SettleFencedAt skips the garbage sweep only for a FenceAt report that
// decided the cut at the release point, and only when the record's cut is
// the report's; every other report settles as Settle does.
func TestSettleFencedAtSkipsSweepOnlyAtRelease(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		edit  func(fr *fence.Report)
		swept bool
	}{
		{"at release", func(*fence.Report) {}, false},
		{"fell back to the full fence", func(fr *fence.Report) { fr.AtRelease = false }, true},
		{"another cut", func(fr *fence.Report) { fr.Cut++ }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := settletest.NewMem(t, 3)
			p := e.NewParty(starA, settletest.PartyOptions{})
			ep, fr, garbage := closedAtRelease(t, e, p)
			tc.edit(&fr)
			rep, err := p.Settler.SettleFencedAt(ctx, fr)
			require.NoError(t, err)
			require.Equal(t, !tc.swept, rep.NoGarbageSweep)
			_, err = e.Raw[0].Get(ctx, garbage)
			if tc.swept {
				require.Error(t, err, "the sweep deletes the flight past the cut")
				require.Equal(t, 1, rep.GarbageDeleted)
			} else {
				require.NoError(t, err, "no sweep: the flight past the cut stands (harmless)")
			}
			rec, err := p.Minter.Get(ctx, starA, ep)
			require.NoError(t, err)
			require.Equal(t, epoch.StateSettled, rec.State)
			require.Equal(t, []string{"x", "x", "x"}, settletest.CheckStream(t, p, stream))
		})
	}
	_, err := settletest.NewMem(t, 3).NewParty(starA, settletest.PartyOptions{}).Settler.SettleFencedAt(ctx, fence.Report{})
	require.ErrorIs(t, err, cutline.ErrInvalid, "a report that names no star")
}
