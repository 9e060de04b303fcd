package takeover_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/roll"
)

// placePoison creates poison at star's slot ep/slot in the given zones, as a
// fencer the writer did not ask for would.
func (p *party) placePoison(t *testing.T, star string, ep, slot uint64, zones ...int) {
	t.Helper()
	for _, z := range zones {
		key := p.s.keys.Slot(star, ep, slot)
		require.NoError(t, p.buckets[z].Create(t.Context(), key, wire.EncodePoison(star, ep, slot, "other-fencer")))
	}
}

// rollerOpts are the options of the rollers of these tests: short retries.
func rollerOpts(rollOnHalt bool) roll.Options {
	return roll.Options{
		RollOnHalt: rollOnHalt,
		Backoff:    clock.Backoff{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond},
		Writer:     chain.WriterOptions{Backoff: clock.Backoff{Min: 5 * time.Millisecond, Max: 100 * time.Millisecond}},
	}
}

// TestRollEtcdS3 rolls a star's chain in process on embedded etcd and three
// versitygw zones. One producer appends 200 records through a
// roll.Roller with RollOnHalt; poison placed ahead of the roller halts
// two of its epochs, and the producer asks for two planned rolls:
//
//	epoch 1  W=2 window 16   records   0–29   poison at slot 30 in zone-a, zone-b: halt, roll
//	epoch 2  W=2 window 16   records  30–79   planned roll to W=3
//	epoch 3  W=3 window 16   records  80–99   poison at slot 20 in zone-c (B=1): halt, roll
//	epoch 4  W=3 window 16   records 100–159  planned roll to W=2, window 8
//	epoch 5  W=2 window 8    records 160–199
//
// The producer sees only acknowledgements, each at exactly that position;
// every epoch settles with guarantees 1–4, and the chain serves the 200
// records once each, in submission order.
func TestRollEtcdS3(t *testing.T) {
	s := newStack(t)
	ctx := within(t, 90*time.Second)
	p := s.party(t, starA, partyOpts{})
	p.verify(t)
	c12, c34, c5 := s.constants(2, 16), s.constants(3, 16), s.constants(2, 8)
	p.placePoison(t, starA, 1, 30, 0, 1)
	p.placePoison(t, starA, 3, 20, 2)

	r, err := roll.Open(ctx, p.settler, starA, c12, rollerOpts(true))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	const n = 200
	apps := make([]*roll.Future, n)
	for i := range n {
		switch i {
		case 80:
			require.NoError(t, r.Roll(ctx, c34))
		case 160:
			require.NoError(t, r.Roll(ctx, c5))
		}
		apps[i], err = r.Submit(ctx, record(uint64(i), fmt.Sprintf("r%d", i)))
		require.NoError(t, err, "submit r%d", i)
	}
	// Where each record must land: [first record, epoch).
	bounds := []struct {
		from int
		ep   uint64
	}{{0, 1}, {30, 2}, {80, 3}, {100, 4}, {160, 5}}
	perEpoch := map[uint64][]uint64{}
	for i, a := range apps {
		pos, err := a.Wait(ctx)
		require.NoError(t, err, "the producer sees only acknowledgements: r%d", i)
		b := bounds[0]
		for _, bb := range bounds {
			if i >= bb.from {
				b = bb
			}
		}
		require.Equal(t, chain.Position{Epoch: b.ep, Slot: uint64(i - b.from)}, pos, "r%d", i)
		perEpoch[pos.Epoch] = append(perEpoch[pos.Epoch], pos.Slot)
	}
	require.NoError(t, r.Close(ctx))
	require.Equal(t, uint64(5), r.Epoch().Epoch)

	// The chain: every epoch settled with guarantees 1–4 and the expected
	// constants and cut; the records in order, once each.
	_, err = p.settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	wantConst := []epoch.Constants{c12, c12, c34, c34, c5}
	wantCut := []uint64{30, 50, 20, 60, 40}
	eps := 0
	for rec, err := range p.minter.Epochs(ctx, starA) {
		require.NoError(t, err)
		require.Equal(t, epoch.StateSettled, rec.State, "epoch %d", rec.Epoch)
		require.Equal(t, wantConst[rec.Epoch-1], rec.Constants, "epoch %d", rec.Epoch)
		require.Equal(t, wantCut[rec.Epoch-1], rec.Cut, "epoch %d", rec.Epoch)
		p.env(t).VerifyEpoch(starA, rec.Epoch, perEpoch[rec.Epoch])
		eps++
	}
	require.Equal(t, 5, eps)
	ids, poss := p.chainIDs(t, starA)
	require.Len(t, ids, n)
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("r%d", i), id)
		pos, err := apps[i].Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, pos, poss[i])
	}
}
