package cutlinetest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// Violation is one guarantee found broken. Guarantee is the number of the
// README's guarantee (1–6), or 0 when part of the run could not be checked
// at all (a store or zone that does not answer): a check that cannot look
// never passes.
type Violation struct {
	Guarantee int
	Msg       string
}

func (v Violation) Error() string { return fmt.Sprintf("guarantee %d: %s", v.Guarantee, v.Msg) }

// Is makes errors.Is match cutline.ErrCorrupt: a broken guarantee, or a
// run that could not be checked, is never a transient failure.
func (v Violation) Is(target error) bool { return target == cutline.ErrCorrupt }

// Violations are every violation a Check found, by guarantee.
type Violations []Violation

// Err joins the violations, or is nil when there are none.
func (vs Violations) Err() error {
	errs := make([]error, len(vs))
	for i, v := range vs {
		errs[i] = v
	}
	return errors.Join(errs...)
}

// Of returns the violations of guarantee g.
func (vs Violations) Of(g int) Violations {
	var out Violations
	for _, v := range vs {
		if v.Guarantee == g {
			out = append(out, v)
		}
	}
	return out
}

// Require fails t, listing every violation, unless vs is empty.
func Require(t testing.TB, vs Violations) {
	t.Helper()
	if len(vs) == 0 {
		return
	}
	lines := make([]string, len(vs))
	for i, v := range vs {
		lines[i] = "  " + v.Error()
	}
	t.Fatalf("%d violations of cutline's guarantees:\n%s", len(vs), strings.Join(lines, "\n"))
}

// Run is a finished run to check: its history, and the storage it ran on.
type Run struct {
	History *History
	Store   metastore.Store
	// Root is the metastore root of the run's minters and RefIndex.
	Root string
	// Zones are the zones' buckets, read directly: not through the fault
	// injection the parties saw.
	Zones []objstore.Bucket
	// Locate is the RefIndex's Locator. Nil means Locate. Whatever the
	// Locator, Bundle payloads are checked record by record.
	Locate settle.Locator
	// Lossy names the zones that may have lost objects since they were
	// written: a server restarted without its newest writes, as a zone
	// that lost its disk. An empty answer from one says nothing, like an
	// unreachable zone: a slot is short of W copies only when it would be
	// even if every such zone held one (see Check).
	Lossy []string
}

// Check checks the README's six guarantees over a finished run and returns
// every violation, never only the first. A run is finished when every host
// was closed, or killed and its epochs settled by a successor. Check
// writes nothing.
//
//  1. Every acknowledged slot below its epoch's cut holds W byte-identical
//     verified copies of the acknowledged payload. Where zones are
//     unreachable or lossy (Run.Lossy) the check counts each of them as
//     a possible copy: a slot is short only when the zones that answered
//     prove it, and at least one verified copy must be readable.
//  2. Nothing at or past a published cut was acknowledged.
//  3. A fresh fence of each fenced epoch returns the published cut, and
//     the zones agree: the cut slot holds poison in B zones, no slot
//     below it does.
//  4. Every slot of [trimmed, cut) of a fenced epoch, and of
//     [trimmed, checkpoint) of an open one, holds W byte-identical
//     verified copies, read from every zone with wire.ObserveObject and
//     counted as in 1.
//  5. Every acknowledged payload is found exactly once through the index
//     (each stream read with settle.StreamReader from its retention
//     point, from segments and from flights read whole and verified) and exactly once in chain
//     order, until its retention: one below its stream's retention point
//     may be gone from the index, one in a trimmed slot from the chain,
//     and is found at most once there; a Bundle counts record by record, so every record of an
//     acknowledged bundle is found exactly once through the refs of its
//     stream; refs cover their streams without gaps, each at a span its
//     flight's Locator reads, its bytes holding the records it claims, and
//     each stream continues (RefIndex.Next) where its refs end; no record
//     id is found twice, except copies of submissions whose outcome was
//     unknown (at-least-once for what was never acknowledged); nothing is
//     found that failed definitely or that no host submitted.
//  6. Epoch records moved only forward: in the store's history of each
//     record (while the store keeps it) states never went back, a cut
//     never changed, cursors never moved back, constants never changed;
//     in the final state every record decodes (trimmed ≤ checkpoint ≤
//     cut), a settled epoch's checkpoint is its cut, an open epoch's
//     checkpoint does not pass what its host acknowledged, and every
//     epoch lies below its star's counter and class head.
func Check(ctx context.Context, run Run) Violations {
	c := &checker{ctx: ctx, run: run, recs: map[string]map[uint64]*epoch.Record{}, views: map[wire.Addr]view{}}
	if run.Locate == nil {
		c.run.Locate = Locate
	}
	if err := c.setup(); err != nil {
		return Violations{{0, fmt.Sprintf("cannot check: %v", err)}}
	}
	evs := run.History.Events()
	answers := map[int]HistoryEvent{}
	var stars []string
	for i, ev := range evs {
		if ev.Star != "" && !slices.Contains(stars, ev.Star) {
			stars = append(stars, ev.Star)
		}
		if ev.Op != Acked && ev.Op != Failed {
			continue
		}
		if ev.Of < 0 || ev.Of >= i || evs[ev.Of].Op != Submitted {
			c.add(5, "event %d (%s %q) answers no submission (Of %d)", i, ev.Op, ev.ID, ev.Of)
			continue
		}
		if prev, ok := answers[ev.Of]; !ok || prev.Op != Acked {
			answers[ev.Of] = ev
		}
	}
	for _, star := range stars {
		c.load(star)
	}
	c.checkAcks(evs, answers)
	for _, star := range stars {
		for _, rec := range c.sorted(star) {
			c.checkSlots(rec, evs, answers)
		}
		c.checkRecords(star)
	}
	c.checkReads(evs, answers, stars)
	sort.SliceStable(c.out, func(i, j int) bool { return c.out[i].Guarantee < c.out[j].Guarantee })
	return c.out
}

type checker struct {
	ctx    context.Context
	run    Run
	minter *epoch.Minter
	zones  chain.Zones
	reader *chain.Reader
	// streams reads the index's refs where their bytes are now.
	streams *settle.StreamReader
	fencer  *fence.Fencer
	refs    *settle.RefIndex
	recs    map[string]map[uint64]*epoch.Record
	views   map[wire.Addr]view
	out     Violations
}

// view is what every zone holds at one slot, read whole.
type view struct {
	t   wire.Tally
	obs []wire.Observation
	// lost counts the empty answers of lossy zones (Run.Lossy).
	lost int
}

// short reports whether the zones prove the slot holds fewer than w
// verified copies, or none is readable: a zone that did not answer, or a
// lossy one that answered empty, may hold a copy the check cannot see.
func (v view) short(w int) bool {
	return v.t.Copies == 0 || v.t.Copies+v.t.Unreachable+v.lost < w
}

func (c *checker) add(g int, format string, args ...any) {
	c.out = append(c.out, Violation{g, fmt.Sprintf(format, args...)})
}

func (c *checker) setup() (err error) {
	if c.run.History == nil || c.run.Store == nil {
		return errors.New("a Run needs a History and a Store")
	}
	if c.zones, err = chain.NewZones(c.run.Zones...); err != nil {
		return err
	}
	if c.minter, err = epoch.NewMinter(c.run.Store, epoch.Options{Root: c.run.Root}); err != nil {
		return err
	}
	if c.reader, err = chain.NewReader(c.minter, c.zones, chain.ReaderOptions{}); err != nil {
		return err
	}
	if c.fencer, err = fence.New(c.minter, c.zones, fence.Options{Identity: "cutlinetest-checker"}); err != nil {
		return err
	}
	if c.refs, err = settle.NewRefIndex(c.run.Store, c.run.Root, c.run.Locate); err != nil {
		return err
	}
	c.streams, err = settle.NewStreamReader(c.minter, c.zones, c.refs, settle.StreamReaderOptions{})
	return err
}

// load reads star's epoch records; one that does not decode (cursors out
// of order, a checkpoint past the cut) broke guarantee 6.
func (c *checker) load(star string) {
	c.recs[star] = map[uint64]*epoch.Record{}
	for rec, err := range c.minter.Epochs(c.ctx, star) {
		if err != nil {
			c.add(6, "an epoch record of %s is refused: %v", star, err)
			continue
		}
		c.recs[star][rec.Epoch] = rec
	}
}

func (c *checker) sorted(star string) []*epoch.Record {
	var out []*epoch.Record
	for _, rec := range c.recs[star] {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b *epoch.Record) int { return cmp.Compare(a.Epoch, b.Epoch) })
	return out
}

// view reads slot s of rec's epoch whole in every zone, once.
func (c *checker) view(rec *epoch.Record, s uint64) view {
	slot := Slot(rec, s)
	if v, ok := c.views[slot]; ok {
		return v
	}
	buckets, err := c.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		c.add(0, "%s/%d: %v", rec.Star, rec.Epoch, err)
	}
	v := view{obs: make([]wire.Observation, len(buckets))}
	for i, b := range buckets {
		v.obs[i] = wire.ObserveObject(c.ctx, b, slot)
	}
	v.t = wire.TallySlot(v.obs)
	for i, o := range v.obs {
		if o.State == wire.SlotEmpty && i < len(buckets) && slices.Contains(c.run.Lossy, buckets[i].Name()) {
			v.lost++
		}
	}
	c.views[slot] = v
	return v
}

// payload is the flight the tally's largest group holds.
func (v view) payload() []byte {
	if v.t.Copies == 0 {
		return nil
	}
	o := v.obs[v.t.Holders[0]]
	return o.Data[o.Header.Len():]
}

func (v view) describe() string {
	d := fmt.Sprintf("%d verified copies, %d poison, %d empty, %d foreign, %d unreachable",
		v.t.Copies, v.t.Poisons, v.t.Empty, v.t.Foreign, v.t.Unreachable)
	if v.lost > 0 {
		d += fmt.Sprintf(" (%d of the empty in lossy zones)", v.lost)
	}
	return d
}

// checkAcks checks guarantees 1 and 2 for every acknowledgement.
func (c *checker) checkAcks(evs []HistoryEvent, answers map[int]HistoryEvent) {
	for _, of := range slices.Sorted(maps.Keys(answers)) {
		a := answers[of]
		if a.Op != Acked {
			continue
		}
		rec := c.recs[a.Star][a.Pos.Epoch]
		at := fmt.Sprintf("record %q acknowledged at %s/%v", a.ID, a.Star, a.Pos)
		switch {
		case rec == nil:
			c.add(1, "%s: the epoch has no record", at)
		case rec.Fenced() && a.Pos.Slot >= rec.Cut:
			c.add(2, "%s: at or past the cut %d", at, rec.Cut)
		case a.Pos.Slot < rec.Cursors.Trimmed:
			// Trimmed: its copies were deleted on purpose.
		default:
			v := c.view(rec, a.Pos.Slot)
			if v.short(rec.Constants.W) {
				c.add(1, "%s: the slot holds %s; W is %d", at, v.describe(), rec.Constants.W)
			} else if !bytes.Equal(v.payload(), evs[of].Payload) {
				c.add(1, "%s: the slot's committed flight carries %q", at, v.payload())
			}
		}
	}
}

// checkSlots checks guarantees 3 and 4 on one epoch, and 6 for an open
// epoch's checkpoint.
func (c *checker) checkSlots(rec *epoch.Record, evs []HistoryEvent, answers map[int]HistoryEvent) {
	name := fmt.Sprintf("%s/%d", rec.Star, rec.Epoch)
	w, b := rec.Constants.W, rec.Constants.B()
	end, bound := rec.Cursors.Checkpoint, "checkpoint"
	if rec.Fenced() {
		end, bound = rec.Cut, "cut"
		if cut, err := c.fencer.Fence(c.ctx, rec.Star, rec.Epoch); err != nil {
			c.add(3, "a fresh fence of %s fails: %v", name, err)
		} else if cut != rec.Cut {
			c.add(3, "a fresh fence of %s returns the cut %d, the published cut is %d", name, cut, rec.Cut)
		}
	} else {
		var acked uint64
		for _, a := range answers {
			if a.Op == Acked && a.Star == rec.Star && a.Pos.Epoch == rec.Epoch {
				acked = max(acked, a.Pos.Slot+1)
			}
		}
		if acked > 0 && rec.Cursors.Checkpoint > acked {
			c.add(6, "%s is open with its checkpoint at %d, past what its host acknowledged (up to %d)", name, rec.Cursors.Checkpoint, acked)
		}
	}
	deadBelow := false
	for s := rec.Cursors.Trimmed; s < end; s++ {
		if err := c.ctx.Err(); err != nil {
			c.add(0, "%s: %v", name, err)
			return
		}
		v := c.view(rec, s)
		switch {
		case v.t.Poisons >= b && !deadBelow:
			deadBelow = true
			c.add(3, "the zones' dead slot of %s is %d (%s), below its %s %d", name, s, v.describe(), bound, end)
		case v.t.Poisons >= b:
		case v.t.Conflict:
			c.add(4, "slot %s/%d below the %s %d holds two different flights", name, s, bound, end)
		case v.short(w):
			c.add(4, "slot %s/%d below the %s %d is a hole: %s; W is %d", name, s, bound, end, v.describe(), w)
		}
	}
	if rec.Fenced() {
		if v := c.view(rec, rec.Cut); v.t.Poisons < b {
			c.add(3, "the published cut %d of %s is not a dead slot in the zones: %s; B is %d", rec.Cut, name, v.describe(), b)
		}
	}
}

// checkRecords checks guarantee 6 on star's records: their final state,
// then every version the store's history still holds.
func (c *checker) checkRecords(star string) {
	ch, err := c.minter.Chain(c.ctx, star)
	if err != nil {
		c.add(6, "the counter of %s is refused: %v", star, err)
		return
	}
	for _, rec := range c.sorted(star) {
		name := fmt.Sprintf("%s/%d", star, rec.Epoch)
		if rec.Epoch >= ch.Next {
			c.add(6, "%s is not below its star's counter %d", name, ch.Next)
		}
		if head := ch.Heads[rec.Constants.Class]; rec.Epoch > head {
			c.add(6, "%s is above its class head %d", name, head)
		}
		if rec.State == epoch.StateSettled && rec.Cursors.Checkpoint != rec.Cut {
			c.add(6, "%s is settled with its checkpoint %d not at its cut %d", name, rec.Cursors.Checkpoint, rec.Cut)
		}
	}
	c.replay(star)
}

var rank = map[epoch.State]int{epoch.StateOpen: 1, epoch.StateFenced: 2, epoch.StateSettled: 3}

// replay walks the store's history of star's counter and records: each
// version must move forward from the one before. A store that no longer
// keeps the history (compacted) leaves only the final state to check.
func (c *checker) replay(star string) {
	counter := c.minter.ChainKey(star)
	kvs, _, err := c.run.Store.List(c.ctx, counter)
	if err != nil {
		c.add(0, "list the records of %s: %v", star, err)
		return
	}
	ours := func(key string) bool { return key == counter || strings.HasPrefix(key, counter+"/") }
	var last int64
	left := 0 // writes at revision last not replayed yet
	for _, kv := range kvs {
		if !ours(kv.Key) {
			continue
		}
		if kv.Revision > last {
			last, left = kv.Revision, 0
		}
		if kv.Revision == last {
			left++
		}
	}
	if last == 0 {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	prev := map[string]*epoch.Record{}
	var next uint64
	for ev, err := range c.run.Store.Watch(ctx, counter, 1) {
		if errors.Is(err, metastore.ErrCompacted) {
			return
		}
		if err != nil {
			c.add(0, "replay the records of %s: %v", star, err)
			return
		}
		kv := ev.KV
		if kv.Revision > last {
			return // past the state List read
		}
		switch {
		case !ours(kv.Key):
		case ev.Type == metastore.EventDelete:
			c.add(6, "the record %s was deleted at revision %d", kv.Key, kv.Revision)
			delete(prev, kv.Key)
		case kv.Key == counter:
			var ch epoch.CounterRecord
			if err := json.Unmarshal(kv.Value, &ch); err == nil {
				if ch.Next < next {
					c.add(6, "the counter of %s moved back from %d to %d at revision %d", star, next, ch.Next, kv.Revision)
				}
				next = ch.Next
			}
		default:
			var rec epoch.Record
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				c.add(6, "the record %s does not decode at revision %d: %v", kv.Key, kv.Revision, err)
				continue
			}
			if p := prev[kv.Key]; p != nil {
				c.forward(p, &rec, kv.Revision)
			}
			prev[kv.Key] = &rec
		}
		if ours(kv.Key) && kv.Revision == last {
			if left--; left == 0 {
				return
			}
		}
	}
}

// forward checks that n, written at rev, moves forward from p.
func (c *checker) forward(p, n *epoch.Record, rev int64) {
	name := fmt.Sprintf("%s/%d", n.Star, n.Epoch)
	if rank[n.State] < rank[p.State] {
		c.add(6, "%s moved back from %s to %s at revision %d", name, p.State, n.State, rev)
	}
	if p.Fenced() && n.Cut != p.Cut {
		c.add(6, "the cut of %s changed from %d to %d at revision %d", name, p.Cut, n.Cut, rev)
	}
	for _, cur := range []struct {
		name     string
		from, to uint64
	}{
		{"checkpoint", p.Cursors.Checkpoint, n.Cursors.Checkpoint},
		{"trimmed", p.Cursors.Trimmed, n.Cursors.Trimmed},
		{"rewritten", p.Cursors.Rewritten, n.Cursors.Rewritten},
	} {
		if cur.to < cur.from {
			c.add(6, "the %s of %s moved back from %d to %d at revision %d", cur.name, name, cur.from, cur.to, rev)
		}
	}
	if !reflect.DeepEqual(p.Constants, n.Constants) {
		c.add(6, "the constants of %s changed at revision %d", name, rev)
	}
}

// unit is what guarantee 5 counts: one record. A Bundle payload holds one
// per record, keyed by the record alone; any other payload is one, keyed
// by its bytes.
type unit struct {
	key, id string
}

// units returns the records payload p holds; id names a payload that is
// no Bundle.
func units(p []byte, id string) []unit {
	if isBundle(p) {
		if recs, err := ParseBundle(p); err == nil {
			out := make([]unit, len(recs))
			for i, r := range recs {
				out[i] = unit{key: bundledKey(r), id: r.ID}
			}
			return out
		}
	}
	return []unit{{key: string(p), id: id}}
}

// bundledKey names a record of a bundle.
func bundledKey(r BundleRecord) string {
	return fmt.Sprintf("%s|%d|%s (bundled)", r.Stream, r.Offset, r.ID)
}

// checkReads checks guarantee 5: through the index, read with a
// settle.StreamReader (flights and segments alike) from each stream's
// retention point, and in chain order. Records inside Bundle payloads
// are counted one by one, and each ref's bytes must be the bytes its
// span holds in a submitted payload. A record below its stream's
// retention point may be gone from the index, one in a trimmed slot
// from the chain: each is found at most once there.
func (c *checker) checkReads(evs []HistoryEvent, answers map[int]HistoryEvent, stars []string) {
	// What each span of every submitted payload holds, by its stream,
	// offset and count.
	type spanKey struct {
		stream        string
		offset, count uint64
	}
	type placed struct {
		payload []byte
		span    settle.Span
	}
	submitted := map[spanKey][]placed{}
	var streams []string
	addStream := func(s string) {
		if !slices.Contains(streams, s) {
			streams = append(streams, s)
		}
	}
	for _, ev := range evs {
		if ev.Op != Submitted && ev.Op != Refused {
			continue
		}
		spans, _ := c.run.Locate(ev.Payload)
		for _, sp := range spans {
			addStream(sp.Stream)
			k := spanKey{sp.Stream, sp.Offset, sp.Count}
			submitted[k] = append(submitted[k], placed{ev.Payload, sp})
		}
		if recs, err := ParseBundle(ev.Payload); err == nil {
			for _, r := range recs {
				addStream(r.Stream)
			}
		}
	}
	slices.Sort(streams)
	starts := map[string]uint64{}
	index := map[string]int{}
	for _, stream := range streams {
		start, err := c.refs.Start(c.ctx, stream)
		if err != nil {
			c.add(5, "the retention point of stream %s does not read: %v", stream, err)
			continue
		}
		starts[stream] = start
		next, first := start, true
		for ch, err := range c.streams.Read(c.ctx, stream, start) {
			if first && errors.Is(err, metastore.ErrNotFound) {
				break // nothing at or past the retention point: Next says whether it should be
			}
			if err != nil {
				c.add(5, "stream %s does not read at offset %d: %v", stream, next, err)
				break
			}
			where := fmt.Sprintf("%s/%v", ch.Star, ch.Position())
			if ch.InSegment() {
				where += " in segment " + ch.Segment
			}
			switch {
			case ch.Offset > next:
				c.add(5, "offsets [%d, %d) of stream %s are covered by no ref", next, ch.Offset, stream)
			case ch.Offset < next && !first:
				c.add(5, "the ref at offset %d of stream %s overlaps the one before (up to %d)", ch.Offset, stream, next)
			}
			first = false
			next = max(next, ch.Offset+ch.Count)
			data, err := verifiedChunk(c.ctx, c.reader, ch)
			if err != nil {
				c.add(5, "the ref at offset %d of stream %s (%s) does not read: %v", ch.Offset, stream, where, err)
				continue
			}
			ch.Data = data
			var match *placed
			for i, pl := range submitted[spanKey{stream, ch.Offset, ch.Count}] {
				if bytes.Equal(pl.payload[pl.span.Start:pl.span.End], ch.Data) {
					match = &submitted[spanKey{stream, ch.Offset, ch.Count}][i]
					break
				}
			}
			if match == nil {
				c.add(5, "the ref at offset %d of stream %s serves %q (%s), which no submitted payload holds at that span", ch.Offset, stream, ch.Data, where)
				continue
			}
			if !isBundle(match.payload) {
				index[string(match.payload)]++
				continue
			}
			recs, _, err := chunkRecords(ch)
			if err != nil {
				c.add(5, "the ref at offset %d of stream %s serves %s: %v", ch.Offset, stream, where, err)
				continue
			}
			for _, rec := range recs {
				if rec.Offset >= start {
					index[bundledKey(rec)]++
				}
			}
		}
		if n, err := c.refs.Next(c.ctx, stream); err != nil {
			c.add(5, "where stream %s continues does not read: %v", stream, err)
		} else if n != next {
			c.add(5, "stream %s continues at %d, its refs end at %d", stream, n, next)
		}
	}
	// A unit below its stream's retention point may be gone.
	belowStart := map[string]bool{}
	for k, pls := range submitted {
		for _, pl := range pls {
			if isBundle(pl.payload) {
				recs, err := spanRecords(pl.payload, pl.span)
				if err != nil {
					continue
				}
				for _, r := range recs {
					if r.Offset < starts[k.stream] {
						belowStart[bundledKey(r)] = true
					}
				}
			} else if k.offset+k.count <= starts[k.stream] {
				belowStart[string(pl.payload)] = true
			}
		}
	}
	inChain := map[string]int{}
	for _, star := range stars {
		for f, err := range c.reader.Flights(c.ctx, star, chain.Position{}) {
			if err != nil {
				c.add(5, "the chain of %s does not read: %v", star, err)
				break
			}
			for _, u := range units(f.Payload, "") {
				inChain[u.key]++
			}
		}
	}
	c.exactlyOnce("the index", index, evs, answers, func(key, _ string, _ chain.Position) bool { return belowStart[key] })
	c.exactlyOnce("chain order", inChain, evs, answers, func(_, star string, pos chain.Position) bool {
		rec := c.recs[star][pos.Epoch]
		return rec != nil && pos.Slot < rec.Cursors.Trimmed
	})
}

// exactlyOnce compares what one way of reading found (payload → times)
// with what was submitted and acknowledged. gone says whether an
// acknowledged unit (by its key, and the star and position it was
// acknowledged at) may be missing: deleted on purpose.
func (c *checker) exactlyOnce(how string, found map[string]int, evs []HistoryEvent, answers map[int]HistoryEvent, gone func(key, star string, pos chain.Position) bool) {
	type group struct {
		id, star    string
		acked, open int   // submissions acknowledged; with an unknown outcome
		failed      error // a definite failure
		pos         chain.Position
	}
	groups := map[string]*group{}
	var order []string
	for i, ev := range evs {
		if ev.Op != Submitted && ev.Op != Refused {
			continue
		}
		fate := fateOf(evs, i, answers)
		for _, u := range units(ev.Payload, ev.ID) {
			g := groups[u.key]
			if g == nil {
				g = &group{id: u.id, star: ev.Star}
				groups[u.key] = g
				order = append(order, u.key)
			}
			switch fate {
			case acknowledged:
				g.acked++
				g.pos = answers[i].Pos
			case absent:
				g.failed = ev.Err
				if a, ok := answers[i]; ok {
					g.failed = a.Err
				}
			default:
				g.open++
			}
		}
	}
	known := map[string]int{}
	for _, p := range order {
		g, n := groups[p], found[p]
		delete(found, p)
		k := min(n, g.acked)
		known[g.id] += k
		excess := n - k - min(n-k, g.open)
		switch {
		case n < g.acked && gone(p, g.star, g.pos):
			// Deleted on purpose: found at most once (excess below).
		case n < g.acked:
			c.add(5, "record %q acknowledged at %s/%v is found %d times in %s, not once", g.id, g.star, g.pos, n, how)
		case excess > 0 && g.acked+g.open == 0:
			c.add(5, "record %q failed definitely (%v) yet is found %d times in %s", g.id, g.failed, n, how)
		case excess > 0:
			c.add(5, "record %q is found %d times in %s, more than it was submitted", g.id, n, how)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(known)) {
		if k := known[id]; k > 1 {
			c.add(5, "record id %q is found %d times in %s as acknowledged", id, k, how)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(found)) {
		c.add(5, "%s holds %d copies of %q, which no host submitted", how, found[p], p)
	}
}
