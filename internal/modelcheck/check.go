package modelcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
)

// fingerprint is what a state's future depends on: what every zone and
// the metastore hold, what every party has been answered (the parties'
// code is deterministic given its answers), what they have done with it
// (the writer's outcomes, the fencers' results), the requests pending and
// the faults left to spend.
type fingerprint [16]byte

func (x *exec) fingerprint() fingerprint {
	x.mu.Lock()
	defer x.mu.Unlock()
	var h strings.Builder
	line := func(parts ...string) {
		for _, p := range parts {
			h.WriteString(p)
			h.WriteByte(' ')
		}
		h.WriteByte('\n')
	}
	line("faults", strconv.Itoa(x.faults))
	for i, z := range x.shadow {
		keys := slices.Sorted(maps.Keys(z))
		line("zone", strconv.Itoa(i))
		for _, k := range keys {
			line(k, z[k])
		}
	}
	kv, err := x.store.Get(context.Background(), x.minter.RecordKey(star, x.rec.Epoch))
	line("record", strconv.FormatInt(kv.Revision, 10), string(kv.Value), errClass(err))
	// Each party's part names its requests without the party's name, and
	// the fencers' parts are sorted: fencers are interchangeable.
	pending := map[*party][]string{}
	for _, id := range x.pendingIDsLocked() {
		r := x.pending[id]
		pending[r.party] = append(pending[r.party], strings.TrimPrefix(id, r.party.name+" "))
	}
	var fencers []string
	for _, p := range x.parties {
		var b strings.Builder
		fmt.Fprintf(&b, "party crashed=%v crashes=%d done=%v cut=%d err=%s\n", p.crashed, p.crashes, p.done, p.cut, outcomeClass(p.err))
		switch {
		case p.done || p.crashed:
			// A party that ended, or crashed, sends nothing more: what
			// it was answered no longer bears on the future.
		case x.cfg.Strict:
			for _, a := range p.seq {
				b.WriteString(strings.TrimPrefix(a, p.name+" "))
				b.WriteByte('\n')
			}
		default:
			for _, id := range slices.Sorted(maps.Keys(p.perID)) {
				b.WriteString(strings.TrimPrefix(id, p.name+" "))
				b.WriteString(" = ")
				b.WriteString(strings.Join(p.perID[id], ", "))
				b.WriteByte('\n')
			}
		}
		for _, id := range pending[p] {
			r := x.pending[p.name+" "+id]
			fmt.Fprintf(&b, "pending %s deferred=%v considered=%v\n", id, r.deferred, r.considered)
		}
		if p == x.writer {
			line("writer", b.String())
		} else {
			fencers = append(fencers, b.String())
		}
	}
	if !x.cfg.NoSymmetry {
		sort.Strings(fencers)
	}
	for _, f := range fencers {
		line("fencer", f)
	}
	for i, f := range x.futures {
		pos, err := f.Result()
		line("future", strconv.Itoa(i), pos.String(), outcomeClass(err))
	}
	line("writer released", strconv.FormatUint(x.w.Released(), 10), outcomeClass(x.w.Err()))
	if x.cfg.Strict {
		line(fmt.Sprintf("writer stats %+v", x.w.Stats()))
	}
	sum := sha256.Sum256([]byte(h.String()))
	var fp fingerprint
	copy(fp[:], sum[:])
	return fp
}

// outcomeClass names an outcome by what it means, not by its text (which
// can carry times and counters).
func outcomeClass(err error) string {
	var fe *chain.FencedError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &fe):
		return fmt.Sprintf("fenced at %d", fe.Slot)
	case errors.Is(err, chain.ErrAborted):
		return "aborted"
	case errors.Is(err, chain.ErrPending):
		return "pending"
	case errors.Is(err, fence.ErrUndecided):
		return "undecided"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return errClass(err)
}

// Violation is a state in which a guarantee does not hold, with the
// decisions that lead there from the start.
type Violation struct {
	// Guarantee is the README's number of the guarantee broken ("1" to
	// "4"), or "model" when the execution itself went wrong (a party
	// stuck, a replay that diverged).
	Guarantee string
	Msg       string
	// Trace is one line per scheduler decision, in order, each with the
	// answer the party got.
	Trace []string
}

// Error formats the violation with its trace, one decision a line.
func (v *Violation) Error() string {
	return fmt.Sprintf("guarantee %s: %s\n%s", v.Guarantee, v.Msg, strings.Join(v.Trace, "\n"))
}

func (x *exec) violation(g, format string, args ...any) *Violation {
	x.mu.Lock()
	defer x.mu.Unlock()
	return &Violation{Guarantee: g, Msg: fmt.Sprintf(format, args...), Trace: append([]string(nil), x.trace...)}
}

// checkTransition checks the one guarantee that is about a step rather
// than a state: a published cut is never rewritten (guarantee 3: once
// published, fencing again only reads it). It runs at every step,
// replayed or new.
func (x *exec) checkTransition() *Violation {
	kv, err := x.store.Get(context.Background(), x.minter.RecordKey(star, x.rec.Epoch))
	if err != nil {
		return x.violation("model", "reading the record: %v", err)
	}
	if x.prevRec != nil && kv.Revision == x.prev.Revision && bytes.Equal(kv.Value, x.prev.Value) {
		return nil
	}
	rec, err := x.record()
	if err != nil {
		return x.violation("model", "decoding the record: %v", err)
	}
	prev, prevRec := x.prev, x.prevRec
	x.prev, x.prevRec = kv, rec
	if prevRec != nil && prevRec.Fenced() {
		return x.violation("3", "the published record (cut %d, revision %d) was written again: now %s, revision %d",
			prevRec.Cut, prev.Revision, recState(rec), kv.Revision)
	}
	return nil
}

// record reads the epoch record from the inner store, decoding it only
// when it changed since the last read.
func (x *exec) record() (*epoch.Record, error) {
	kv, err := x.store.Get(context.Background(), x.minter.RecordKey(star, x.rec.Epoch))
	if err != nil {
		return nil, err
	}
	if x.cached != nil && x.cachedRev == kv.Revision {
		return x.cached, nil
	}
	ck := strconv.FormatInt(kv.Revision, 10) + " " + string(kv.Value)
	rec, ok := x.recs[ck]
	if !ok {
		if rec, err = x.minter.Get(context.Background(), star, x.rec.Epoch); err != nil {
			return nil, err
		}
		x.recs[ck] = rec
	}
	x.cached, x.cachedRev = rec, kv.Revision
	return rec, nil
}

// check checks guarantees 1 to 4 in the current state, reading the inner
// stores directly (never through the scheduler).
func (x *exec) check() *Violation {
	ctx := context.Background()
	if x.dup != "" {
		return x.violation("model", "request %q sent twice at once: requests are not named canonically", x.dup)
	}
	if x.beyond != "" && !x.cfg.NoReduce {
		return x.violation("model", "request %q creates past slot %d, which the reduction assumes nobody does", x.beyond, x.cfg.Slots)
	}
	rec, err := x.record()
	if err != nil {
		return x.violation("model", "reading the record: %v", err)
	}
	k, w, b := x.cfg.K, x.cfg.W, x.cfg.K-x.cfg.W+1
	keys := wire.KeysOf(rec)
	top := uint64(x.cfg.Slots) + 1
	if rec.Fenced() && rec.Cut+1 > top {
		top = rec.Cut + 1
	}
	obs := make([][]wire.Observation, top)
	for s := range top {
		obs[s] = make([]wire.Observation, k)
		for j, z := range x.zones {
			a := wire.Addr{Keys: keys, Star: star, Epoch: rec.Epoch, Slot: s}
			// An object never changes once created, so its observation
			// is kept by content for the whole search.
			x.mu.Lock()
			ck := fmt.Sprintf("%d %d %s", j, s, x.shadow[j][a.Key()])
			x.mu.Unlock()
			o, ok := x.seen[ck]
			if !ok {
				o = wire.ObserveObject(ctx, z, a)
				x.seen[ck] = o
			}
			obs[s][j] = o
		}
	}
	// copiesOf counts the buckets holding exactly the writer's flight for
	// slot s, read whole and verified.
	copiesOf := func(s uint64, want []byte) int {
		n := 0
		for _, o := range obs[s] {
			if o.State == wire.SlotFlight && o.Whole && bytes.Equal(o.Data, want) {
				n++
			}
		}
		return n
	}

	x.mu.Lock()
	futures := append([]*chain.Future(nil), x.futures...)
	payloads := append([][]byte(nil), x.payloads...)
	type fres struct {
		name    string
		done    bool
		crashed bool
		cut     uint64
		err     error
	}
	var fencers []fres
	for _, p := range x.parties {
		if p != x.writer {
			fencers = append(fencers, fres{p.name, p.done, p.crashed, p.cut, p.err})
		}
	}
	x.mu.Unlock()

	// Guarantee 2 (order): acknowledgements go out in slot order, each at
	// its own slot.
	acked := uint64(0)
	for i, f := range futures {
		pos, err := f.Result()
		if err != nil {
			continue
		}
		if pos.Slot != uint64(i) || pos.Epoch != rec.Epoch {
			return x.violation("2", "slot %d acknowledged at position %v", i, pos)
		}
		if uint64(i) != acked {
			return x.violation("2", "slot %d acknowledged while slot %d is not", i, acked)
		}
		acked++
	}
	// Guarantee 1: every acknowledged slot holds W identical verified
	// copies of the writer's flight.
	for s := range acked {
		want := wire.EncodeFlight(star, rec.Epoch, s, payloads[s])
		if n := copiesOf(s, want); n < w {
			return x.violation("1", "slot %d acknowledged with %d verified copies of its flight (W=%d): %s", s, n, w, row(obs[s]))
		}
	}
	if rec.Fenced() {
		cut := rec.Cut
		// Guarantees 1 and 2: nothing at or past the cut acknowledged.
		if acked > cut {
			return x.violation("2", "slot %d acknowledged at or past the published cut %d", acked-1, cut)
		}
		// Guarantee 3: the cut is dead for good.
		t := wire.TallySlot(obs[cut])
		if t.Poisons < b {
			return x.violation("3", "the published cut %d holds %d poison (B=%d): %s", cut, t.Poisons, b, row(obs[cut]))
		}
		// Guarantee 4: no holes below the cut.
		for s := range cut {
			t := wire.TallySlot(obs[s])
			if t.Copies < w || t.Conflict {
				return x.violation("4", "slot %d below the cut %d is not committed: %s", s, cut, row(obs[s]))
			}
			if s < uint64(len(payloads)) {
				want := wire.EncodeFlight(star, rec.Epoch, s, payloads[s])
				if n := copiesOf(s, want); n < w {
					return x.violation("4", "slot %d below the cut %d holds %d verified copies of the writer's flight: %s", s, cut, n, row(obs[s]))
				}
			}
		}
		// The writer halts at a dead slot, which lies at or past the cut
		// (the first dead slot).
		var fe *chain.FencedError
		if errors.As(x.w.Err(), &fe) && fe.Slot < cut {
			return x.violation("3", "the writer found slot %d dead, below the published cut %d", fe.Slot, cut)
		}
	}
	if err := x.w.Err(); err != nil && !errors.Is(err, chain.ErrFenced) {
		return x.violation("model", "the writer halted with %v", err)
	}
	// Guarantee 3: every fencer that returned a cut returned the
	// published one.
	for _, f := range fencers {
		if !f.done || f.crashed {
			continue
		}
		switch {
		case f.err == nil:
			if !rec.Fenced() || f.cut != rec.Cut {
				return x.violation("3", "fencer %s returned cut %d but the record holds %s", f.name, f.cut, recState(rec))
			}
		case errors.Is(f.err, metastore.ErrUnavailable), errors.Is(f.err, fence.ErrUndecided):
			// No answer from the metastore, or a slot left undecided:
			// nothing was returned, which is not a wrong cut.
		case errors.Is(f.err, epoch.ErrCutMismatch):
			return x.violation("3", "fencer %s derived another cut than the published one: %v", f.name, f.err)
		default:
			return x.violation("model", "fencer %s failed: %v", f.name, f.err)
		}
	}
	return nil
}

func recState(r *epoch.Record) string {
	if r.Fenced() {
		return fmt.Sprintf("%s with cut %d", r.State, r.Cut)
	}
	return string(r.State)
}

// row shows one slot across the zones: F flight, P poison, E empty, X
// foreign.
func row(obs []wire.Observation) string {
	out := make([]string, len(obs))
	for i, o := range obs {
		out[i] = map[wire.SlotState]string{wire.SlotEmpty: "E", wire.SlotFlight: "F", wire.SlotPoison: "P", wire.SlotForeign: "X", wire.SlotUnreachable: "U"}[o.State]
	}
	return "[" + strings.Join(out, " ") + "]"
}

// observation is a state as the checks see it: what the zones and the
// record hold, which slots the writer acknowledged and how it halted, and
// what the fencers that ended returned (as a set). A fencer that crashed
// and one still running look alike: neither returned anything.
type observation struct {
	objects map[string]string // zone and key → digest
	record  string            // "open", or the state and cut
	acked   string
	halt    string
	fencers []string // sorted; "none" for a fencer that returned nothing
}

// key names the observation: equal observations have equal keys.
func (o observation) key() string {
	keys := slices.Sorted(maps.Keys(o.objects))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, o.objects[k])
	}
	fmt.Fprintf(&b, "record %s\nacknowledged%s\nhalt %s\nfencers %s\n", o.record, o.acked, o.halt, strings.Join(o.fencers, ", "))
	return b.String()
}

// subsumes reports whether every check that fails in m fails in o too:
// the writer acknowledged the same slots, and halted alike unless it had
// not halted in m, o holds every object m holds, o's record is m's unless
// m's is open, and o's fencers returned at least what m's did. A check fails on what exists, what was
// acknowledged and what was returned, never on their absence, except for
// a count of copies or of poison, and the reductions only ever add an
// object at a slot that no running party can still write or read (see
// stableLocked), where a count that fails in m failed already in the
// state before it.
func (o observation) subsumes(m observation) bool {
	if o.acked != m.acked || (m.halt != "" && o.halt != m.halt) || (m.record != "open" && o.record != m.record) {
		return false
	}
	for k, v := range m.objects {
		if o.objects[k] != v {
			return false
		}
	}
	have := map[string]int{}
	for _, f := range o.fencers {
		have[f]++
	}
	for _, f := range m.fencers {
		if f == "none" {
			continue
		}
		if have[f] == 0 {
			return false
		}
		have[f]--
	}
	return true
}

func (x *exec) observe() observation {
	x.mu.Lock()
	defer x.mu.Unlock()
	o := observation{objects: map[string]string{}, record: "open"}
	for i, z := range x.shadow {
		for k, v := range z {
			o.objects[fmt.Sprintf("z%d %s", i, k[strings.LastIndex(k, "/")+1:])] = v
		}
	}
	if x.cached != nil && x.cached.Fenced() {
		o.record = recState(x.cached)
	}
	for i, f := range x.futures {
		if _, err := f.Result(); err == nil {
			o.acked += " " + strconv.Itoa(i)
		}
	}
	var fe *chain.FencedError
	if err := x.w.Err(); errors.As(err, &fe) {
		o.halt = strconv.FormatUint(fe.Slot, 10)
	}
	for _, p := range x.parties {
		switch {
		case p == x.writer:
			continue
		case !p.done || p.crashed:
			o.fencers = append(o.fencers, "none")
		case p.err != nil:
			o.fencers = append(o.fencers, outcomeClass(p.err))
		default:
			o.fencers = append(o.fencers, fmt.Sprintf("cut %d", p.cut))
		}
	}
	sort.Strings(o.fencers)
	return o
}

// outcome describes a final state: what the zones and the record hold,
// the writer's outcomes and the fencers' results (as a set: fencers are
// interchangeable).
func (x *exec) outcome() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var b strings.Builder
	for i, z := range x.shadow {
		keys := slices.Sorted(maps.Keys(z))
		fmt.Fprintf(&b, "zone %d:", i)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k[strings.LastIndex(k, "/")+1:], z[k])
		}
		b.WriteString("\n")
	}
	if x.cached != nil {
		fmt.Fprintf(&b, "record %s\n", recState(x.cached))
	}
	for i, f := range x.futures {
		_, err := f.Result()
		fmt.Fprintf(&b, "future %d %s\n", i, outcomeClass(err))
	}
	var fs []string
	for _, p := range x.parties {
		if p == x.writer {
			continue
		}
		switch {
		case p.crashed:
			fs = append(fs, "crashed")
		case p.err != nil:
			fs = append(fs, outcomeClass(p.err))
		default:
			fs = append(fs, fmt.Sprintf("cut %d", p.cut))
		}
	}
	sort.Strings(fs)
	fmt.Fprintf(&b, "fencers %s\n", strings.Join(fs, ", "))
	return b.String()
}
