package fence

import (
	"context"

	"github.com/cutline/cutline/chain/wire"
)

func hasFlight(obs []wire.Observation) bool {
	for _, o := range obs {
		if o.State == wire.SlotFlight {
			return true
		}
	}
	return false
}

// estimate finds roughly where the chain ends: the highest slot it sees
// holding a flight in some bucket. It probes from the checkpoint, growing
// the step by doubling until a probe finds nothing, then narrows with a
// k-ary search, Fanout probes per round in parallel. An unreachable bucket
// reads as "no flight", which can only lower the estimate: the walk then
// starts lower, which is always safe.
func (w *walk) estimate(ctx context.Context) (uint64, bool) {
	lo := w.rec.Cursors.Checkpoint
	k := w.f.opts.Fanout
	// Grow: probe lo+2^e for the next k exponents per round until one is
	// empty; hi is the first empty probe, lo the present one before it.
	// The first round probes the checkpoint itself beside the first k−1
	// exponents (the checkpoint alone when k is 1): without a flight there,
	// there is no estimate.
	var hi uint64
	found, first := false, true
	for e := 0; !found && e < 64; {
		probes := make([]uint64, 0, k)
		if first {
			probes = append(probes, lo)
		}
		for ; len(probes) < k && e < 64; e++ {
			d := uint64(1) << e
			if lo > ^uint64(0)-d {
				e = 64
				break
			}
			probes = append(probes, lo+d)
		}
		if len(probes) == 0 {
			break
		}
		obs := w.observe(ctx, probes, false)
		if first && !hasFlight(obs[0]) {
			return 0, false
		}
		prev := lo
		for i, p := range probes {
			if !hasFlight(obs[i]) {
				lo, hi, found = prev, p, true
				break
			}
			prev = p
		}
		if !found {
			lo = prev
		}
		first = false
		if err := ctx.Err(); err != nil {
			return lo, true
		}
	}
	if !found {
		return lo, true
	}
	// Narrow: lo holds a flight, hi does not; split (lo, hi) into k+1 parts.
	for hi-lo > 1 {
		gap := hi - lo
		var probes []uint64
		for i := 1; i <= k; i++ {
			p := lo + gap*uint64(i)/uint64(k+1)
			if p > lo && p < hi && (len(probes) == 0 || p > probes[len(probes)-1]) {
				probes = append(probes, p)
			}
		}
		if len(probes) == 0 {
			probes = []uint64{lo + gap/2}
		}
		obs := w.observe(ctx, probes, false)
		next := hi
		for i, p := range probes {
			if !hasFlight(obs[i]) {
				next = p
				break
			}
			lo = p
		}
		hi = next
		if err := ctx.Err(); err != nil {
			break
		}
	}
	return lo, true
}

// aroundEstimate is how many slots from the estimate x on are read with
// it: the cut of a writer that stopped lies at most a slot or two past x
// (x+1 held no flight when probed), so they usually end the walk.
const aroundEstimate = 4

// readAround reads, in one round trip, the estimate x whole (it must
// verify before the walk may start at x − window), the slots just past
// it, and the walk's first span (from x − window, or from the checkpoint
// when that is higher), up to x, and returns x's
// observation. Whatever the outcome, the walk uses the rest as read
// ahead: an observation is a fact about storage whenever it was made (a
// committed or dead slot stays so; anything else is acted on and read
// again).
func (w *walk) readAround(ctx context.Context, x uint64) []wire.Observation {
	start := w.rec.Cursors.Checkpoint
	if win := uint64(w.rec.Constants.Window); x >= win {
		start = max(start, x-win)
	}
	span := uint64(w.f.opts.Span)
	var slots []uint64
	for s := start; s < start+span && s < x && s >= start; s++ {
		slots = append(slots, s)
	}
	if span == 1 {
		slots = nil // the literal walk reads one slot per round trip
	}
	for s := x; s < x+aroundEstimate && s >= x; s++ {
		slots = append(slots, s)
		if span == 1 {
			break
		}
	}
	obs := w.observe(ctx, slots, true)
	if w.ahead == nil {
		w.ahead = make(map[uint64][]wire.Observation, len(slots))
	}
	var at []wire.Observation
	for i, s := range slots {
		w.ahead[s] = obs[i]
		if s == x {
			at = obs[i]
		}
	}
	return at
}
