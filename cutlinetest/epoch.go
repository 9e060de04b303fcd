package cutlinetest

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
)

// CheckEpoch checks star's fenced epoch ep as it lies in storage, for a
// test that keeps no History: acked are the slots the test knows were
// acknowledged in it. It returns every violation, each with the number of
// the README's guarantee it breaks:
//
//   - 2: an acknowledged slot at or past the published cut, or a reader
//     that serves the cut slot or anything past it;
//   - 3: a fresh fence that returns another cut, a cut slot without poison
//     in B zones, or a dead slot below the cut;
//   - 4: a slot of [trimmed, cut) without W byte-identical verified
//     copies, or a reader that does not serve exactly [trimmed, cut);
//   - 0: an epoch that is not fenced, or a record that does not read: a
//     check that cannot look never passes.
//
// It reads the zones' backends directly (Raw), fences and reads with
// parties of its own, and writes nothing. Check does the same for every
// epoch of a run, and more, from a History.
func (e *Env) CheckEpoch(star string, ep uint64, acked []uint64) Violations {
	c := &checker{ctx: e.T.Context(), run: Run{History: &History{}, Store: e.Store, Root: e.opts.Root, Zones: e.Raw, Locate: e.opts.Locate},
		recs: map[string]map[uint64]*epoch.Record{}, views: map[wire.Addr]view{}}
	if err := c.setup(); err != nil {
		return Violations{{0, fmt.Sprintf("cannot check: %v", err)}}
	}
	rec, err := c.minter.Get(c.ctx, star, ep)
	if err != nil {
		return Violations{{0, fmt.Sprintf("the record of %s/%d: %v", star, ep, err)}}
	}
	if !rec.Fenced() {
		return Violations{{0, fmt.Sprintf("%s/%d is %s: CheckEpoch checks a fenced epoch", star, ep, rec.State)}}
	}
	for _, s := range acked {
		if s >= rec.Cut {
			c.add(2, "slot %d of %s/%d was acknowledged, at or past the cut %d", s, star, ep, rec.Cut)
		}
	}
	c.checkSlots(rec, nil, nil)
	c.checkServed(rec)
	sort.SliceStable(c.out, func(i, j int) bool { return c.out[i].Guarantee < c.out[j].Guarantee })
	return c.out
}

// VerifyEpoch fails the test with every violation CheckEpoch finds, and
// returns the epoch's record.
func (e *Env) VerifyEpoch(star string, ep uint64, acked []uint64) *epoch.Record {
	e.T.Helper()
	Require(e.T, e.CheckEpoch(star, ep, acked))
	return e.Record(star, ep)
}

// checkServed reads rec's fenced epoch through the checker's reader: it
// must serve exactly [trimmed, cut), and nothing at the cut.
func (c *checker) checkServed(rec *epoch.Record) {
	name := fmt.Sprintf("%s/%d", rec.Star, rec.Epoch)
	next := rec.Cursors.Trimmed
	for f, err := range c.reader.Flights(c.ctx, rec.Star, chain.Position{Epoch: rec.Epoch, Slot: next}) {
		if err != nil {
			c.add(4, "the reader stops at slot %d of %s: %v", next, name, err)
			return
		}
		if f.Epoch != rec.Epoch {
			break
		}
		if f.Slot != next {
			c.add(4, "the reader serves slot %d of %s where slot %d is due", f.Slot, name, next)
			return
		}
		next++
	}
	switch {
	case next < rec.Cut:
		c.add(4, "the reader serves %s up to slot %d only, below the cut %d", name, next, rec.Cut)
	case next > rec.Cut:
		c.add(2, "the reader serves %s up to slot %d, past the cut %d", name, next, rec.Cut)
	}
	if _, err := c.reader.Read(c.ctx, rec.Star, chain.Position{Epoch: rec.Epoch, Slot: rec.Cut}); !errors.Is(err, chain.ErrNotCommitted) {
		c.add(2, "reading the cut slot %d of %s answers %v, not chain.ErrNotCommitted", rec.Cut, name, err)
	}
}

// States lists rec's epoch in every zone's backend and returns the State
// row (like "F P E") of each slot that some zone holds an object at. Keys
// under the epoch that name no slot are left out. A zone that does not
// list fails the test.
func (e *Env) States(rec *epoch.Record) map[uint64]string {
	e.T.Helper()
	keys := wire.KeysOf(rec)
	out := map[uint64]string{}
	for _, b := range e.Raw {
		for o, err := range objstore.All(e.T.Context(), b, keys.Epoch(rec.Star, rec.Epoch)) {
			if err != nil {
				e.T.Fatalf("cutlinetest: list %s/%d in %s: %v", rec.Star, rec.Epoch, b.Name(), err)
			}
			if s, ok := keys.ParseSlot(rec.Star, rec.Epoch, o.Key); ok {
				out[s] = ""
			}
		}
	}
	for s := range out {
		out[s] = e.State(rec, s)
	}
	return out
}
