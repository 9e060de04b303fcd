package benchfix

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// RaggedEpoch describes the epoch LayRaggedEpoch lays out: what a writer
// of three zones (W=2) that died with a full window in flight leaves
// behind.
type RaggedEpoch struct {
	Star   string
	Prefix string // the key prefix of the epoch's constants
	// Committed is the number of committed slots, two copies each.
	Committed int
	// Window is the epoch's window; the ragged tail fills it.
	Window int
	// Lag is how many of the committed slots, the last ones, the host
	// acknowledged but had not covered nor checkpointed yet.
	Lag int
	// Seed chooses the copies of the tail past its fixed first slots.
	Seed uint64
	// Record is the payload of the flight at slot; the RefIndex's Locator
	// must read it.
	Record func(slot uint64) []byte
	// Laid is how many of the first committed slots the zones hold
	// already (a synthetic prefix, say): LayRaggedEpoch writes no copy
	// below it.
	Laid int
	// CoverPrefix, when set, covers the first covered slots of epoch ep
	// in refs in place of LayRaggedEpoch, which otherwise covers each of
	// their flights with refs.Cover.
	CoverPrefix func(ctx context.Context, refs *settle.RefIndex, ep, covered uint64) error
}

func (l RaggedEpoch) validate(raw []objstore.Bucket) error {
	switch {
	case len(raw) != 3:
		return &cutline.ConfigError{Field: "buckets", Value: len(raw), Reason: "a ragged epoch is laid in exactly 3 zones"}
	case l.Window < 5:
		return &cutline.ConfigError{Field: "Window", Value: l.Window, Reason: "the ragged tail needs a window of at least 5"}
	case l.Committed < 0 || l.Lag < 0 || l.Lag > l.Committed:
		return &cutline.ConfigError{Field: "Lag", Value: l.Lag, Reason: fmt.Sprintf("must be in [0, Committed=%d]", l.Committed)}
	case l.Laid < 0 || l.Laid > l.Committed:
		return &cutline.ConfigError{Field: "Laid", Value: l.Laid, Reason: fmt.Sprintf("must be in [0, Committed=%d]", l.Committed)}
	case l.Record == nil:
		return &cutline.ConfigError{Field: "Record", Value: nil, Reason: "required"}
	}
	return nil
}

// LayRaggedEpoch mints an epoch of l.Star over the three raw zones and
// lays out a dead writer's epoch in them: l.Committed slots with two
// copies each, then a ragged pipelined tail of a full window. With n the
// number of committed slots, slot n has one copy (it holds the release
// point), n+1 two, n+2 three, n+3 one, n+4 none (the cut), and n+5 …
// n+window−1 a random number of copies each (from l.Seed). The host covered (in refs) and checkpointed every committed
// slot but the last l.Lag. It returns the epoch's number.
//
// A successor's settlement of this epoch covers l.Lag+4 flights: the
// uncovered committed slots and the four tail slots before the hole. With
// l.Laid and l.CoverPrefix, a caller lays out the committed prefix itself
// (synthetic buckets that answer for any number of slots, refs written as
// a few long spans), so that an epoch of a million slots costs what one
// of a thousand does.
func LayRaggedEpoch(ctx context.Context, m *epoch.Minter, refs *settle.RefIndex, raw []objstore.Bucket, l RaggedEpoch) (uint64, error) {
	if err := l.validate(raw); err != nil {
		return 0, err
	}
	rec, err := m.Mint(ctx, l.Star, epoch.Constants{Class: "standard", Buckets: chain.Names(raw...), W: 2, Window: l.Window, Prefix: l.Prefix})
	if err != nil {
		return 0, err
	}
	keys := wire.KeysOf(rec)
	put := func(slot uint64, zones ...int) error {
		data := wire.EncodeFlight(l.Star, rec.Epoch, slot, l.Record(slot))
		for _, z := range zones {
			if err := raw[z].Create(ctx, keys.Slot(l.Star, rec.Epoch, slot), data); err != nil {
				return err
			}
		}
		return nil
	}
	for s := uint64(l.Laid); s < uint64(l.Committed); s++ {
		if err := put(s, int(s%3), int(s+1)%3); err != nil {
			return 0, err
		}
	}
	tail := uint64(l.Committed)
	err = errors.Join(put(tail, 0), put(tail+1, 1, 2), put(tail+2, 0, 1, 2), put(tail+3, 2))
	rng := rand.New(rand.NewPCG(l.Seed, l.Seed))
	for s := tail + 5; s < tail+uint64(l.Window); s++ {
		var zs []int
		for z := range 3 {
			if rng.IntN(2) == 0 {
				zs = append(zs, z)
			}
		}
		err = errors.Join(err, put(s, zs...))
	}
	if err != nil {
		return 0, err
	}
	covered := uint64(l.Committed - l.Lag)
	if l.CoverPrefix != nil {
		if err := l.CoverPrefix(ctx, refs, rec.Epoch, covered); err != nil {
			return 0, err
		}
	} else {
		for s := range covered {
			if err := refs.Cover(ctx, l.Star, chain.Flight{Position: chain.Position{Epoch: rec.Epoch, Slot: s}, Payload: l.Record(s)}); err != nil {
				return 0, err
			}
		}
	}
	cl, err := rec.Claim() // the laid epoch's writer
	if err != nil {
		return 0, err
	}
	if _, err := cl.Advance(ctx, covered); err != nil {
		return 0, err
	}
	return rec.Epoch, nil
}
