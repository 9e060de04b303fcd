package authority

import (
	"context"
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
// star that never minted has the zero frontier.
func RecoverChain(ctx context.Context, minter *epoch.Minter, settler *settle.Settler, star string) (chain.Position, error) {
	if _, err := settler.SettleAll(ctx, star); err != nil {
		return chain.Position{}, fmt.Errorf("authority: recover %s: %w", star, err)
	}
	var frontier chain.Position
	for rec, err := range minter.Epochs(ctx, star) {
		if err != nil {
			return chain.Position{}, fmt.Errorf("authority: recover %s: %w", star, err)
		}
		if rec.State != epoch.StateSettled {
			return chain.Position{}, fmt.Errorf("authority: recover %s: epoch %d is %s after settlement", star, rec.Epoch, rec.State)
		}
		frontier = chain.Position{Epoch: rec.Epoch, Slot: rec.Cut}
	}
	return frontier, nil
}
