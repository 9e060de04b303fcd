package fence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/objstore"
)

// checkOpen re-reads the record before the walk writes poison, so that a
// fencer held while another fenced, settled and trimmed the epoch stops
// instead of poisoning slots that settlement already trimmed.
func (w *walk) checkOpen(ctx context.Context) error {
	rec, err := w.f.minter.Get(ctx, w.rec.Star, w.rec.Epoch)
	if err != nil {
		return fmt.Errorf("fence %s/%d: %w", w.rec.Star, w.rec.Epoch, err)
	}
	if rec.Fenced() {
		return &fencedMeanwhile{rec: rec}
	}
	return nil
}

// walk is the state of one Fence call.
type walk struct {
	f       *Fencer
	rec     *epoch.Record
	buckets []objstore.Bucket
	rep     *Report

	reads, creates, repaired, poisoned atomic.Int64

	// ahead holds observations read before the walk reached their slots
	// (the estimate's neighbourhood, read together with the walk's first
	// span); the walk uses each once instead of reading the slot again.
	ahead map[uint64][]wire.Observation
	// kept holds, for slots that need a repair, the verified bytes of one
	// copy read whole by observe, so that the repair need not read it
	// again. At most MaxParallel are kept; each is dropped once used or
	// passed.
	keptMu sync.Mutex
	kept   map[uint64]keptCopy
	// cover receives the verified copy of each committed slot the walk
	// read whole, for the caller's coverage (see FenceKeep); nil keeps
	// nothing.
	cover *Kept
}

// wholeLimit is the size up to which the walk reads a slot object whole
// in every bucket. Of a larger flight it reads whole only the copies it
// needs (see observe).
const wholeLimit = 256 << 10

// keptCopy is one verified copy of a slot's flight, with its digest.
type keptCopy struct {
	digest [32]byte
	data   []byte
}

// keep records data as slot n's copy for a repair, if there is room.
func (w *walk) keep(n uint64, o wire.Observation) {
	w.keptMu.Lock()
	defer w.keptMu.Unlock()
	if w.kept == nil {
		w.kept = map[uint64]keptCopy{}
	}
	if len(w.kept) < w.f.opts.MaxParallel {
		w.kept[n] = keptCopy{digest: o.Digest, data: o.Data}
	}
}

// takeKept returns and forgets slot n's kept copy, if it has digest.
func (w *walk) takeKept(n uint64, digest [32]byte) []byte {
	w.keptMu.Lock()
	defer w.keptMu.Unlock()
	c, ok := w.kept[n]
	delete(w.kept, n)
	if !ok || c.digest != digest {
		return nil
	}
	return c.data
}

// dropKept forgets every kept copy below slot n.
func (w *walk) dropKept(n uint64) {
	w.keptMu.Lock()
	defer w.keptMu.Unlock()
	for s := range w.kept {
		if s < n {
			delete(w.kept, s)
		}
	}
}

// needsRepair reports whether a slot observed whole is a repair
// candidate: some identical verified copies, fewer than w, and an empty
// bucket to copy into.
func needsRepair(obs []wire.Observation, w int) bool {
	t := wire.TallySlot(obs)
	return !t.Conflict && t.Copies > 0 && t.Copies < w && t.Empty > 0
}

func (w *walk) slot(n uint64) wire.Addr {
	return wire.Addr{Keys: wire.KeysOf(w.rec), Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: n}
}

// observe reads slots in every bucket, all in parallel: one round trip.
// With whole, a flight counts only once read whole and verified (see
// moreWhole), and only its digest is kept; otherwise only its header is
// probed.
//
// Read whole, a slot costs about W copies, not K: the walk reads the
// object whole (ObserveObject) in W buckets, starting at a slot-dependent
// one to spread the load, and up to wholeLimit bytes in the others
// (ObserveUpTo), which reads a small object whole and of a larger flight
// only its header. When the copies read whole do not settle the slot,
// the slot's probed flights are then read whole, one at a time (see
// moreWhole): a slot whose copies all landed costs W whole reads and one
// round trip; a large flight missing from a bucket read whole, another
// round trip per copy still needed.
//
// A slot read whole that needs a repair keeps the bytes of one verified
// copy (see keep), so that the repair does not read it again, and one
// that is committed hands that copy to w.cover. To find out, the first
// verified flight copy of each slot is held until the slot's reads are
// in; every other copy is dropped at once. So a call holds at most
// 2·MaxParallel objects besides the kept ones: MaxParallel being read,
// and one per slot whose reads are still in flight.
func (w *walk) observe(ctx context.Context, slots []uint64, whole bool) [][]wire.Observation {
	w.rep.Rounds++
	out := make([][]wire.Observation, len(slots))
	left := make([]atomic.Int32, len(slots))   // reads of the slot not yet in
	holding := make([]atomic.Bool, len(slots)) // a copy of the slot is held
	var more atomic.Int32                      // the most reads a slot made after its first
	var g errgroup.Group
	g.SetLimit(w.f.opts.MaxParallel)
	for i, n := range slots {
		out[i] = make([]wire.Observation, len(w.buckets))
		left[i].Store(int32(len(w.buckets)))
		for j, b := range w.buckets {
			g.Go(func() error {
				w.reads.Add(1)
				if !whole || planted.On(planted.RepairUnverified) {
					out[i][j] = wire.ObserveHeader(ctx, b, w.slot(n))
					return nil
				}
				var o wire.Observation
				if w.readsWhole(n, j) {
					o = wire.ObserveObject(ctx, b, w.slot(n))
				} else {
					o = wire.ObserveUpTo(ctx, b, w.slot(n), wholeLimit)
				}
				if !o.Whole || o.State != wire.SlotFlight || !holding[i].CompareAndSwap(false, true) {
					o.Data = nil
				}
				out[i][j] = o
				if left[i].Add(-1) == 0 {
					// The slot's last read. Every write to out[i]
					// happened before its Add.
					m := w.complete(ctx, n, out[i])
					for c := more.Load(); m > c && !more.CompareAndSwap(c, m); c = more.Load() {
					}
				}
				return nil
			})
		}
	}
	_ = g.Wait() // observations carry their own errors
	w.rep.Rounds += int(more.Load())
	return out
}

// readsWhole reports whether the walk reads slot n whole in bucket j
// straight away: W buckets do, from bucket n mod K on.
func (w *walk) readsWhole(n uint64, j int) bool {
	k := uint64(len(w.buckets))
	return (uint64(j)+k-n%k)%k < uint64(w.rec.Constants.W)
}

// complete finishes the observation obs of slot n once its first reads
// are in: it reads whole, one at a time, the flights that moreWhole
// names, then keeps the copy held (the one observation with Data), for a
// repair or for w.cover, and drops every copy's bytes. It returns how
// many reads it made.
func (w *walk) complete(ctx context.Context, n uint64, obs []wire.Observation) int32 {
	var reads int32
	for j := moreWhole(obs, w.rec.Constants.W); j >= 0; j = moreWhole(obs, w.rec.Constants.W) {
		reads++
		w.reads.Add(1)
		o := wire.ObserveObject(ctx, w.buckets[j], w.slot(n))
		if o.State != wire.SlotFlight || slices.ContainsFunc(obs, func(o wire.Observation) bool { return o.Data != nil }) {
			o.Data = nil
		}
		obs[j] = o
	}
	for k := range obs {
		if obs[k].Data == nil {
			continue
		}
		switch {
		case classify(obs, w.rec.Constants.W) == committed:
			w.cover.offer(n, obs[k].Digest, obs[k].Data, obs[k].Header.Len())
		case needsRepair(obs, w.rec.Constants.W):
			w.keep(n, obs[k])
		}
		obs[k].Data = nil
	}
	return reads
}

// moreWhole returns a bucket whose flight obs holds only probed (its
// header, not read whole), which must be read whole before the slot is
// classified, or -1. Only verified copies count toward W, so while fewer
// than W identical verified copies agree, every probed flight is read.
// Once W do, a probed flight with their very header is left alone: the
// slot is committed whatever its body holds. One with another header is
// read, to tell a second flight (a conflict) from a corrupt copy.
func moreWhole(obs []wire.Observation, w int) int {
	var verified *wire.Tally
	for j, o := range obs {
		if o.State != wire.SlotFlight || o.Whole {
			continue
		}
		if verified == nil {
			only := make([]wire.Observation, len(obs))
			for i, o := range obs {
				if o.State == wire.SlotFlight && !o.Whole {
					o = wire.Observation{State: wire.SlotUnreachable}
				}
				only[i] = o
			}
			t := wire.TallySlot(only)
			verified = &t
		}
		if verified.Copies < w || verified.Conflict || o.Header != obs[verified.Holders[0]].Header {
			return j
		}
	}
	return -1
}

// verdict is the classification of one slot from its observations.
type verdict int

const (
	committed verdict = iota // ≥ W flights
	dead                     // ≥ B poison: the cut
	repair                   // some flight, fewer than W, an empty bucket to copy into
	poison                   // no flight anywhere reachable, an empty bucket to poison
	undecided                // unreachable buckets hold the deciding vote
	blocked                  // foreign objects hold the deciding vote
	conflict                 // two different flights: two writers wrote the epoch
)

func (v verdict) String() string {
	return [...]string{"committed", "dead", "repair", "poison", "undecided", "blocked", "conflict"}[v]
}

// classify decides a slot from one observation per bucket, for quorum w of
// k buckets. Only identical verified copies count toward w (see
// wire.TallySlot); two different flights are a conflict, never committed.
// It is a pure function so that every combination is table tested.
func classify(obs []wire.Observation, w int) verdict {
	t := wire.TallySlot(obs)
	k := len(obs)
	b := k - w + 1
	if planted.On(planted.DeadBelowQuorum) && b > 1 {
		b-- // planted: dead at B−1 poisons
	}
	switch {
	case t.Conflict:
		return conflict
	case t.Copies >= w:
		return committed
	case t.Poisons >= b:
		return dead
	case t.Copies > 0 && t.Empty > 0:
		// Completing a slot always wins over killing it: one writer per
		// epoch means the flight has exactly one possible content.
		return repair
	case t.Copies == 0 && t.Empty > 0:
		return poison
	case t.Unreachable > 0:
		return undecided
	default:
		return blocked
	}
}

// conflictError names a slot holding two different flights.
func (w *walk) conflictError(s uint64, obs []wire.Observation) error {
	t := wire.TallySlot(obs)
	return &chain.ConflictError{Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: s, Object: &wire.ObjectError{
		Bucket: w.buckets[t.ConflictAt].Name(), Key: w.slot(s).Key(),
		Reason: "a well-formed flight that differs from another bucket's: two writers wrote the epoch", Err: chain.ErrConflictingFlight}}
}

// walk classifies slots in order from start and returns the cut.
func (w *walk) walk(ctx context.Context, start uint64) (uint64, error) {
	span := uint64(w.f.opts.Span)
	window := uint64(w.rec.Constants.Window)
	// A stopped writer's cut lies within 2·window+1 slots of the start;
	// past that the walk is chasing a live writer, so it plants a barrier
	// ahead of it, doubling the lead each time the writer wins (see "A
	// live writer" in the package guide).
	chaseAfter := start + 3*window + 2
	lead := 2*window + 1
	if planted.On(planted.BarrierOneWindow) {
		lead = window // planted: one window ahead
	}
	planted := false
	n := start
	tryBarrier := func(from uint64) {
		if planted || from <= chaseAfter || from > ^uint64(0)-lead {
			return
		}
		if planted = w.barrier(ctx, from+lead); !planted {
			// The writer got there first, or a zone did not answer: aim
			// further ahead next time.
			lead = min(2*lead, 1<<40)
		}
	}
	for {
		tryBarrier(n)
		w.dropKept(n)
		slots, ahead := w.readAhead(ctx, n, span)
		w.repairAhead(ctx, slots, ahead)
		for i, s := range slots {
			obs := ahead[i]
			// Committed, dead and conflict are terminal, so an
			// observation read ahead stays true; anything else is acted
			// on and re-read.
			switch classify(obs, w.rec.Constants.W) {
			case committed:
				continue
			case dead:
				w.f.clearUndecided(w.rec)
				w.noteGarbage(s, slots[i:], ahead[i:])
				return s, nil
			case conflict:
				return 0, w.conflictError(s, obs)
			}
			cut, done, err := w.decideSlot(ctx, s, obs)
			if err != nil {
				return 0, err
			}
			if done {
				w.noteGarbage(cut, slots[i+1:], ahead[i+1:])
				return cut, nil
			}
			tryBarrier(s)
		}
		n += uint64(len(slots))
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("fence %s/%d: walk at slot %d: %w", w.rec.Star, w.rec.Epoch, n, err)
		}
	}
}

// repairAhead repairs at once, in one round trip, the slots of a batch
// read ahead that need a repair and whose copy the read kept, up to the
// first slot the batch shows neither committed nor needing a repair.
// Completing a slot always wins over killing it, so a repair never waits
// for the slots below it to be decided; past a hole it would only make
// garbage. Each slot whose creates all succeeded gets, in obs, the
// observation they prove (committed); the walk decides every slot in
// order as ever, and one this could not complete as usual.
func (w *walk) repairAhead(ctx context.Context, slots []uint64, obs [][]wire.Observation) {
	if planted.On(planted.RepairUnverified) {
		return
	}
	type job struct {
		i       int
		holders []int
		data    []byte
	}
	var jobs []job
	for i, s := range slots {
		v := classify(obs[i], w.rec.Constants.W)
		if v == committed {
			continue
		}
		if v != repair {
			break
		}
		holders := wire.TallySlot(obs[i]).Holders
		if data := w.takeKept(s, obs[i][holders[0]].Digest); data != nil {
			jobs = append(jobs, job{i, holders, data})
		}
	}
	if len(jobs) == 0 {
		return
	}
	w.rep.Rounds++
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			if _, after := w.copyInto(ctx, slots[j.i], obs[j.i], j.holders, j.data); after != nil &&
				classify(after, w.rec.Constants.W) == committed {
				obs[j.i] = after
			}
		})
	}
	wg.Wait()
}

// noteGarbage records in the report the flight copies read at or past the
// cut: those of the rest of the batch and of the reads still ahead (the
// cut slot's own, when the walk decided it, were read again since: its
// copies are found by settlement's listing).
func (w *walk) noteGarbage(cut uint64, slots []uint64, obs [][]wire.Observation) {
	add := func(s uint64, o []wire.Observation) {
		for j, x := range o {
			if x.State == wire.SlotFlight && s >= cut {
				w.rep.Garbage = append(w.rep.Garbage, Copy{Bucket: w.buckets[j].Name(), Slot: s})
			}
		}
	}
	for i, s := range slots {
		add(s, obs[i])
	}
	rest := make([]uint64, 0, len(w.ahead))
	for s := range w.ahead {
		if !slices.Contains(slots, s) {
			rest = append(rest, s)
		}
	}
	slices.Sort(rest)
	for _, s := range rest {
		add(s, w.ahead[s])
	}
}

// readAhead returns the observations of the slots from n on: those read
// ahead already (consecutive from n), without a round trip, or else a
// fresh read of span slots.
func (w *walk) readAhead(ctx context.Context, n, span uint64) ([]uint64, [][]wire.Observation) {
	var slots []uint64
	var obs [][]wire.Observation
	for s := n; s >= n; s++ {
		o, ok := w.ahead[s]
		if !ok {
			break
		}
		delete(w.ahead, s)
		slots, obs = append(slots, s), append(obs, o)
	}
	if len(slots) > 0 {
		return slots, obs
	}
	for i := uint64(0); i < span && n+i >= n; i++ {
		slots = append(slots, n+i)
	}
	return slots, w.observe(ctx, slots, true)
}

// decideSlot drives one slot to committed or dead. It reports done with the
// cut when the slot is dead.
func (w *walk) decideSlot(ctx context.Context, s uint64, obs []wire.Observation) (uint64, bool, error) {
	// attempt counts the backoffs so far; the jitter is keyed on the
	// fencer and the slot, so that fencers racing on a slot spread out.
	attempt, seed := 0, clock.Seed(w.f.seed, s)
	// stuck: the last observation with ctx alive found s undecided, first
	// at since, waiting for the buckets waitingFor.
	stuck, since, waitingFor := false, time.Time{}, []string(nil)
	undecidedErr := func(err error) error {
		return &UndecidedError{Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: s, Waiting: waitingFor, Since: since, Err: err}
	}
	failed := make([]bool, len(w.buckets)) // poison creates with unknown outcome
	checked := false                       // the record was found open before poisoning
	for {
		v := classify(obs, w.rec.Constants.W)
		w.f.opts.Logger.DebugContext(ctx, "fence slot", "star", w.rec.Star, "epoch", w.rec.Epoch, "slot", s, "verdict", v.String())
		progress := true
		// after is the slot as the step's answered creates prove it to be:
		// the observation with each bucket whose create succeeded now
		// holding what was created there. Objects are immutable, so when
		// that alone makes the slot committed or dead, it is, and reading
		// it again could only say so.
		var after []wire.Observation
		switch v {
		case committed:
			w.f.clearUndecided(w.rec)
			return 0, false, nil
		case dead:
			w.f.clearUndecided(w.rec)
			return s, true, nil
		case repair:
			stuck = false
			progress, after = w.repair(ctx, s, obs)
		case poison:
			stuck = false
			if !checked {
				if err := w.checkOpen(ctx); err != nil {
					return 0, false, err
				}
				checked = true
			}
			progress, after = w.poison(ctx, s, obs, failed, w.f.opts.Identity)
		case blocked:
			return 0, false, w.blockedError(s, obs)
		case conflict:
			return 0, false, w.conflictError(s, obs)
		case undecided:
			if err := ctx.Err(); err != nil {
				// Buckets read as unreachable because ctx ended, not
				// because they failed. Unless the previous observation
				// found the slot undecided, the fence stopped; it was not
				// blocked.
				if !stuck {
					return 0, false, fmt.Errorf("fence %s/%d: slot %d: %w", w.rec.Star, w.rec.Epoch, s, err)
				}
				return 0, false, undecidedErr(err)
			}
			stuck, waitingFor = true, waiting(w.buckets, obs)
			since = w.f.markUndecided(w.rec, s, obs)
			if err := w.f.opts.Backoff.Sleep(ctx, w.f.opts.Clock, attempt, seed); err != nil {
				return 0, false, undecidedErr(err)
			}
			attempt++
		}
		if !progress {
			// Every request of the step failed: back off instead of
			// hammering a failing bucket.
			if err := w.f.opts.Backoff.Sleep(ctx, w.f.opts.Clock, attempt, seed); err != nil {
				return 0, false, fmt.Errorf("fence %s/%d: slot %d: %w", w.rec.Star, w.rec.Epoch, s, err)
			}
			attempt++
		}
		if err := ctx.Err(); err != nil {
			if stuck {
				return 0, false, undecidedErr(err)
			}
			return 0, false, fmt.Errorf("fence %s/%d: slot %d: %w", w.rec.Star, w.rec.Epoch, s, err)
		}
		if planted.On(planted.PoisonNoReobserve) && v == poison {
			obs = assumePoisoned(obs) // planted: the create counted as poison
			continue
		}
		if after != nil {
			if v := classify(after, w.rec.Constants.W); v == committed || v == dead {
				obs = after
				continue
			}
		}
		obs = w.observe(ctx, []uint64{s}, true)[0]
	}
}

// repair copies the slot's flight, read whole and verified from a bucket
// that holds it, into every empty bucket, in parallel. Outcomes are not
// trusted: the caller re-observes. It reports whether any request got an
// answer (the flight was read and some create succeeded or found an
// object).
func (w *walk) repair(ctx context.Context, s uint64, obs []wire.Observation) (bool, []wire.Observation) {
	holders := wire.TallySlot(obs).Holders
	var data []byte
	if len(holders) > 0 && !planted.On(planted.RepairUnverified) {
		data = w.takeKept(s, obs[holders[0]].Digest)
	}
	if data == nil {
		w.rep.Rounds++
	}
	for _, j := range holders {
		if data != nil {
			break // kept from the walk's read: read whole and verified
		}
		w.reads.Add(1)
		if planted.On(planted.RepairUnverified) {
			data, _ = w.buckets[j].Get(ctx, w.slot(s).Key()) // planted: not verified
			break
		}
		full := wire.ObserveObject(ctx, w.buckets[j], w.slot(s))
		// The copy must be the very one observed: a flight that changed
		// in between would be a second writer's.
		if full.State == wire.SlotFlight && full.Digest == obs[j].Digest {
			data = full.Data
			break
		}
	}
	if data == nil {
		return false, nil // the copy could not be read; re-observe and try again
	}
	w.rep.Rounds++
	return w.copyInto(ctx, s, obs, holders, data)
}

// copyInto creates data, the verified copy of slot s held by holders, in
// every bucket obs shows empty, in parallel. It reports whether any create
// got an answer, and the slot as the creates that succeeded prove it (nil
// when nothing was verified to compare with).
func (w *walk) copyInto(ctx context.Context, s uint64, obs []wire.Observation, holders []int, data []byte) (bool, []wire.Observation) {
	var wg sync.WaitGroup
	var answered atomic.Bool
	created := make([]bool, len(obs))
	for j, o := range obs {
		if o.State != wire.SlotEmpty {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.creates.Add(1)
			err := w.buckets[j].Create(ctx, w.slot(s).Key(), data)
			if err == nil {
				w.repaired.Add(1)
				created[j] = true
			}
			if err == nil || errors.Is(err, objstore.ErrExists) {
				answered.Store(true)
			}
		}()
	}
	wg.Wait()
	if len(holders) == 0 || planted.On(planted.RepairUnverified) {
		return answered.Load(), nil
	}
	// A create that succeeded put the very bytes of the verified copy
	// there: the same flight as the holders'.
	after := append([]wire.Observation(nil), obs...)
	for j, ok := range created {
		if ok {
			after[j] = obs[holders[0]]
		}
	}
	if classify(after, w.rec.Constants.W) == committed {
		w.cover.offer(s, obs[holders[0]].Digest, data, obs[holders[0]].Header.Len())
	}
	return answered.Load(), after
}

// poison creates poison in the first empty bucket, in the bucket set's fixed
// order: one at a time, so that no more poison is written than needed and a
// flight that appears meanwhile sends the slot back to repair. A bucket
// whose create failed (failed[j], outcome unknown) is tried again only
// after the other empty buckets, so that one zone refusing writes cannot
// stall a slot the others can decide. It reports whether the create got an
// answer (created, or found an object).
func (w *walk) poison(ctx context.Context, s uint64, obs []wire.Observation, failed []bool, identity string) (bool, []wire.Observation) {
	j := -1
	for i, o := range obs {
		if o.State == wire.SlotEmpty && (j < 0 || failed[j] && !failed[i]) {
			j = i
		}
	}
	if j < 0 {
		return true, nil
	}
	w.rep.Rounds++
	w.creates.Add(1)
	data := wire.EncodePoison(w.rec.Star, w.rec.Epoch, s, identity)
	err := w.buckets[j].Create(ctx, w.slot(s).Key(), data)
	var after []wire.Observation
	switch {
	case err == nil:
		w.poisoned.Add(1)
		after = append([]wire.Observation(nil), obs...)
		after[j] = wire.Observation{State: wire.SlotPoison}
	case errors.Is(err, objstore.ErrExists):
	default:
		w.f.opts.Logger.DebugContext(ctx, "fence poison create failed", "bucket", w.buckets[j].Name(), "slot", s, "err", err)
		failed[j] = true
		// Once every empty bucket failed, start over in the fixed order.
		all := true
		for i, o := range obs {
			all = all && (o.State != wire.SlotEmpty || failed[i])
		}
		if all {
			clear(failed)
		}
		return false, nil
	}
	failed[j] = false
	return true, after
}

func (w *walk) blockedError(s uint64, obs []wire.Observation) error {
	fe := &BlockedError{Star: w.rec.Star, Epoch: w.rec.Epoch, Slot: s}
	for _, o := range obs {
		if o.State == wire.SlotForeign {
			fe.Objects = append(fe.Objects, o.Err)
		}
	}
	return fe
}

func waiting(buckets []objstore.Bucket, obs []wire.Observation) []string {
	var out []string
	for j, o := range obs {
		if o.State == wire.SlotUnreachable {
			out = append(out, buckets[j].Name())
		}
	}
	return out
}
