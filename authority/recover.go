package authority

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/settle"
)

// RecoverChain is a candidate's recovery with this library: it fences and
// settles every epoch of star (the last holder) that is not settled yet,
// oldest first, and returns the frontier: the last epoch's cut, past
// which star's chain holds nothing acknowledged, with every acknowledged
// flight below it covered. The host builds minter and settler over a
// store guarded with the recovery placement's revision (Guard), so that
// the recovery's writes are authoritative only while the placement stands.
//
// The frontier is continuous: every epoch up to it is settled, in order. A
// star that never minted has the zero frontier. The reports are those of
// the epochs this call settled (Settler.SettleAll), for a host's metrics.
func RecoverChain(ctx context.Context, minter *epoch.Minter, settler *settle.Settler, star string) (chain.Position, []settle.SettleReport, error) {
	reps, err := settler.SettleAll(ctx, star)
	if err != nil {
		return chain.Position{}, reps, fmt.Errorf("authority: recover %s: %w", star, err)
	}
	// Every epoch is settled now: none from the settlement cursor on is
	// open or fenced. The frontier is the cut of the newest record, found
	// from the counter down (past burned numbers), never by listing the
	// star's history.
	for rec, err := range minter.Unsettled(ctx, star) {
		if err != nil {
			return chain.Position{}, reps, fmt.Errorf("authority: recover %s: %w", star, err)
		}
		return chain.Position{}, reps, fmt.Errorf("authority: recover %s: epoch %d is %s after settlement", star, rec.Epoch, rec.State)
	}
	ch, err := minter.Chain(ctx, star)
	if err != nil {
		return chain.Position{}, reps, fmt.Errorf("authority: recover %s: %w", star, err)
	}
	for e := ch.Next - 1; e >= 1; e-- {
		rec, err := minter.Get(ctx, star, e)
		if errors.Is(err, epoch.ErrNoRecord) {
			continue // a burned number
		}
		if err != nil {
			return chain.Position{}, reps, fmt.Errorf("authority: recover %s: %w", star, err)
		}
		return chain.Position{Epoch: rec.Epoch, Slot: rec.Cut}, reps, nil
	}
	return chain.Position{}, reps, nil
}
