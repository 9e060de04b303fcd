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
	if !hasFlight(w.observe(ctx, []uint64{lo}, false)[0]) {
		return 0, false
	}
	k := w.f.opts.Fanout
	// Grow: probe lo+2^e for the next k exponents per round until one is
	// empty; hi is the first empty probe, lo the present one before it.
	var hi uint64
	found := false
	for e := 0; !found && e < 64; e += k {
		var probes []uint64
		for i := e; i < e+k && i < 64; i++ {
			d := uint64(1) << i
			if lo > ^uint64(0)-d {
				break
			}
			probes = append(probes, lo+d)
		}
		if len(probes) == 0 {
			break
		}
		obs := w.observe(ctx, probes, false)
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
