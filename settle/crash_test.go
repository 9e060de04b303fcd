package settle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/settle"
)

// settleEnd is what a settlement must converge to, whoever finishes it.
type settleEnd struct {
	state      epoch.State
	cut        uint64
	checkpoint uint64
	refs       []settle.Ref
	// the poison and foreign objects of every slot that holds some, as
	// rows like "P P E" with flights read as E: flights are compared by
	// quorum, because a crash during a repair may leave a committed slot
	// with W copies where an uninterrupted fence makes K.
	standing map[uint64]string
}

func observeSettleEnd(t testing.TB, p *settletest.Party, ep uint64) settleEnd {
	t.Helper()
	rec, err := p.Minter.Get(context.Background(), starA, ep)
	require.NoError(t, err)
	end := settleEnd{state: rec.State, cut: rec.Cut, checkpoint: rec.Cursors.Checkpoint, refs: settletest.RefsOf(t, p.Refs, stream)}
	end.standing = map[uint64]string{}
	for s, row := range p.Env.On(t).States(rec) {
		if row = strings.ReplaceAll(row, string(cutlinetest.Flight), string(cutlinetest.Empty)); strings.Trim(row, "E ") != "" {
			end.standing[s] = row
		}
	}
	return end
}

// The host covered [0, 4) and moved its checkpoint there before its writer
// died.
func layCoveredDeadEpoch(t testing.TB, e *settletest.Env) deadLayout {
	t.Helper()
	ctx := context.Background()
	host := e.NewParty("host", settletest.PartyOptions{})
	l := layDeadEpoch(t, e, host)
	for s := range uint64(4) {
		require.NoError(t, host.Refs.Cover(ctx, starA, flight(l.ep, s, record(stream, s, fmt.Sprintf("r%d", s)))))
	}
	_, err := l.claim.Advance(ctx, 4)
	require.NoError(t, err)
	return l
}

// Layer 5 for settlement: the settler crashes at each of its mutating
// requests in turn (poison and repair creates, the cut's publication,
// garbage deletes, coverage writes, the settled mark), once before the
// request arrives and once after it landed with its answer lost. Another
// settler instance then runs Settle again and must reach the end state of
// an uninterrupted settlement, with guarantees 1–5 holding.
func TestSettleCrashPoints(t *testing.T) {
	var want settleEnd
	synctest.Test(t, func(t *testing.T) {
		e := settletest.NewMem(t, 3)
		l := layCoveredDeadEpoch(t, e)
		p := e.NewParty("settler", settletest.PartyOptions{})
		_, err := p.Settler.Settle(context.Background(), starA, l.ep)
		require.NoError(t, err)
		want = observeSettleEnd(t, p, l.ep)
	})
	require.Equal(t, epoch.StateSettled, want.state)
	require.Equal(t, uint64(11), want.cut)

	for _, lost := range []bool{false, true} {
		points := 0
		for at := 1; ; at++ {
			var fired bool
			var what string
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				e := settletest.NewMem(t, 3)
				l := layCoveredDeadEpoch(t, e)
				k := settletest.NewKillSwitch(at, lost)
				crashing := e.NewParty("settler-1", settletest.PartyOptions{Kill: k})
				_, err := crashing.Settler.Settle(k.Bind(ctx), starA, l.ep)
				fired, what = k.Report()
				if !fired {
					require.NoError(t, err)
				}
				repro := fmt.Sprintf("crash at request %d (%s), lost answer %v: settle returned %v", at, what, lost, err)

				// Recovery: another instance runs Settle again.
				successor := e.NewParty("settler-2", settletest.PartyOptions{})
				rep, err := successor.Settler.Settle(ctx, starA, l.ep)
				require.NoError(t, err, repro)
				require.Equal(t, want.cut, rep.Cut, repro)
				got := observeSettleEnd(t, successor, l.ep)
				require.Equal(t, want, got, repro)
				successor.Env.On(t).VerifyEpoch(starA, l.ep, l.acked)
				require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10"}, settletest.CheckStream(t, successor, stream), repro)
			})
			if !fired {
				break
			}
			points++
		}
		t.Logf("lost answer %v: %d crash points", lost, points)
		// Repair 2, poison 2, publish 1, deletes 3, one cover of the
		// seven flights (a transaction), mark 1.
		require.GreaterOrEqual(t, points, 10, "lost=%v: every step must have been crashed", lost)
	}
}
