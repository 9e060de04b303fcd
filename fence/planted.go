package fence

import "github.com/cutline/cutline/chain/wire"

// What the planted variants of package internal/planted do here; reached
// only in builds with the cutline_planted tag (elsewhere the branches that
// call them are compiled out).

// assumePoisoned is PoisonNoReobserve: the slot as the fencer imagines it
// after a poison create, without reading it again (the first empty bucket,
// where poison went, now holds poison, whatever the create answered).
func assumePoisoned(obs []wire.Observation) []wire.Observation {
	out := append([]wire.Observation(nil), obs...)
	for i, o := range out {
		if o.State == wire.SlotEmpty {
			out[i] = wire.Observation{State: wire.SlotPoison}
			break
		}
	}
	return out
}
