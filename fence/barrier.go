package fence

import (
	"context"

	"github.com/cutline/cutline/chain/wire"
)

// BarrierSuffix ends the fencer identity written into barrier poison: poison
// a fencer puts ahead of a writer that is still appending (see
// Report.Barriers). Barrier poison lies past the cut; like all poison it
// stands until the star is decommissioned.
const BarrierSuffix = " (barrier)"

// barrier tries to kill slot b ahead of a live writer: it poisons b's empty
// buckets one at a time while no flight shows there. It gives up (false) as
// soon as a flight appears (the writer is there already) or a bucket does
// not answer: a barrier is an accelerator, never a reason to block. Poison
// in an empty bucket can never displace a flight, so a barrier is as safe
// as any poison: a slot that reaches W copies anyway is simply committed.
func (w *walk) barrier(ctx context.Context, b uint64) bool {
	w.rep.BarrierAttempts++
	failed := make([]bool, len(w.buckets))
	var after []wire.Observation // the slot as the last create proves it
	for range w.rec.Constants.B() + 2 {
		if ctx.Err() != nil {
			return false
		}
		obs := after
		if obs == nil || classify(obs, w.rec.Constants.W) != dead {
			obs = w.observe(ctx, []uint64{b}, true)[0]
		}
		switch classify(obs, w.rec.Constants.W) {
		case dead:
			w.rep.Barriers++
			w.f.opts.Logger.InfoContext(ctx, "fence planted a barrier ahead of a live writer", "star", w.rec.Star, "epoch", w.rec.Epoch, "slot", b)
			return true
		case poison:
			var ok bool
			if ok, after = w.poison(ctx, b, obs, failed, w.f.opts.Identity+BarrierSuffix); !ok {
				return false
			}
		default:
			return false
		}
	}
	return false
}
