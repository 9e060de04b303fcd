package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// NoEpochError reports an epoch number that has no record (exit 1).
type NoEpochError struct {
	Star  string
	Epoch uint64
	Next  uint64 // the star's next epoch number
}

func (e *NoEpochError) Error() string {
	return fmt.Sprintf("star %q has no epoch %d (epochs are numbered 1 to %d; burned numbers have no record)", e.Star, e.Epoch, e.Next-1)
}

func (e *NoEpochError) Unwrap() error { return epoch.ErrNoRecord }

// isRecordError reports a metastore record that does not decode.
func isRecordError(err error) bool {
	var re *metastore.RecordError
	return errors.As(err, &re)
}

// record reads star's epoch record, telling an unknown star from an
// unknown epoch.
func (c *cmd) record(ctx context.Context, m *epoch.Minter, star string, ep uint64) (*epoch.Record, error) {
	ch, err := m.Chain(ctx, star)
	if err != nil {
		return nil, err
	}
	if ch.Revision == 0 {
		return nil, &NoChainError{Star: star, Hint: c.rootHint()}
	}
	rec, err := m.Get(ctx, star, ep)
	if errors.Is(err, epoch.ErrNoRecord) {
		return nil, &NoEpochError{Star: star, Epoch: ep, Next: ch.Next}
	}
	return rec, err
}

// starEpoch parses <star> <epoch> and reads the record.
func (c *cmd) starEpoch(ctx context.Context, pos []string) (*epoch.Minter, *epoch.Record, error) {
	star, err := parseName("star", pos[0])
	if err != nil {
		return nil, nil, err
	}
	ep, err := parseUint("epoch", pos[1])
	if err != nil {
		return nil, nil, err
	}
	if ep == 0 {
		return nil, nil, usagef("bad epoch 0: epoch numbers start at 1")
	}
	m, err := c.minter(ctx)
	if err != nil {
		return nil, nil, err
	}
	rec, err := c.record(ctx, m, star, ep)
	return m, rec, err
}

// EpochView is one epoch in `chain` output.
type EpochView struct {
	Epoch     uint64        `json:"epoch"`
	Class     string        `json:"class"`
	State     epoch.State   `json:"state"`
	Cut       *uint64       `json:"cut,omitempty"`
	Cursors   epoch.Cursors `json:"cursors"`
	Zones     []string      `json:"zones"`
	W         int           `json:"w"`
	Window    int           `json:"window"`
	Prefix    string        `json:"prefix,omitempty"`
	MintedAt  time.Time     `json:"minted_at"`
	MintedBy  string        `json:"minted_by,omitempty"`
	FencedAt  time.Time     `json:"fenced_at,omitzero"`
	SettledAt time.Time     `json:"settled_at,omitzero"`
}

// ChainView is the output of `chain`.
type ChainView struct {
	Star   string            `json:"star"`
	Next   uint64            `json:"next"`
	Heads  map[string]uint64 `json:"heads"`
	Epochs []EpochView       `json:"epochs"`
}

func runChain(ctx context.Context, c *cmd, args []string) error {
	pos, err := c.parse(c.flags("chain"), args, "<star>")
	if err != nil {
		return err
	}
	star, err := parseName("star", pos[0])
	if err != nil {
		return err
	}
	m, err := c.minter(ctx)
	if err != nil {
		return err
	}
	ch, err := m.Chain(ctx, star)
	if err != nil {
		return err
	}
	if ch.Revision == 0 {
		return &NoChainError{Star: star, Hint: c.rootHint()}
	}
	v := ChainView{Star: star, Next: ch.Next, Heads: ch.Heads}
	var bad []error
	for rec, err := range m.Epochs(ctx, star) {
		if err != nil {
			if rec == nil && !isRecordError(err) {
				return err
			}
			bad = append(bad, err)
			continue
		}
		e := EpochView{Epoch: rec.Epoch, Class: rec.Constants.Class, State: rec.State, Cursors: rec.Cursors,
			Zones: rec.Constants.Buckets, W: rec.Constants.W, Window: rec.Constants.Window, Prefix: rec.Constants.Prefix,
			MintedAt: rec.MintedAt, MintedBy: rec.MintedBy, FencedAt: rec.FencedAt, SettledAt: rec.SettledAt}
		if rec.Fenced() {
			cut := rec.Cut
			e.Cut = &cut
		}
		v.Epochs = append(v.Epochs, e)
	}
	if err := c.emit(v, func(w io.Writer) {
		var heads []string
		for cl, h := range v.Heads {
			heads = append(heads, fmt.Sprintf("%s=%d", cl, h))
		}
		sort.Strings(heads)
		fmt.Fprintf(w, "star %s: next epoch %d, heads %s\n", star, v.Next, strings.Join(heads, " "))
		fmt.Fprintln(w, "epoch\tclass\tstate\tcut\tcheckpoint\ttrimmed\trewritten\tzones\tW\twindow\tminted-at\tminted-by")
		for _, e := range v.Epochs {
			cut := "-"
			if e.Cut != nil {
				cut = fmt.Sprint(*e.Cut)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", e.Epoch, e.Class, e.State, cut,
				e.Cursors.Checkpoint, e.Cursors.Trimmed, e.Cursors.Rewritten, strings.Join(e.Zones, ","), e.W, e.Window,
				fmtTime(e.MintedAt), orDash(e.MintedBy))
		}
	}); err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d record(s) under the chain do not decode: %w", len(bad), errors.Join(bad...))
	}
	return nil
}

// Slot verdicts, one per row of `slots`.
const (
	VerdictCommitted = "committed" // W identical copies, or below a published cut
	VerdictDead      = "dead"      // B poisons: it can never be committed
	VerdictCut       = "cut"       // the published cut of a fenced epoch
	VerdictGarbage   = "garbage"   // flight copies past the cut: never acknowledged, settlement deletes them
	VerdictUndecided = "undecided" // an open epoch's slot neither committed nor dead (in flight, or zones did not answer)
	VerdictEmpty     = "empty"     // no object in any zone
	VerdictConflict  = "conflict"  // two different flights: two writers wrote the epoch
	VerdictBlocked   = "blocked"   // a foreign object keeps the slot from being decided
	VerdictTrimmed   = "trimmed"   // below the trimmed cursor: deleted on purpose
)

// Letters of the slot map.
var letters = map[wire.SlotState]string{
	wire.SlotFlight: "F", wire.SlotPoison: "P", wire.SlotEmpty: "·", wire.SlotUnreachable: "?", wire.SlotForeign: "X",
}

// SlotRow is one row of `slots`.
type SlotRow struct {
	Slot    uint64   `json:"slot"`
	Zones   []string `json:"zones"` // one letter per zone, in zone order
	Verdict string   `json:"verdict"`
	Copies  int      `json:"copies"`
	Poisons int      `json:"poisons"`
}

// SlotsView is the output of `slots`.
type SlotsView struct {
	Star    string      `json:"star"`
	Epoch   uint64      `json:"epoch"`
	State   epoch.State `json:"state"`
	Cut     *uint64     `json:"cut,omitempty"`
	W       int         `json:"w"`
	B       int         `json:"b"`
	Zones   []string    `json:"zones"`
	From    uint64      `json:"from"`
	To      uint64      `json:"to"`     // last slot read
	Shown   uint64      `json:"shown"`  // rows printed
	Elided  bool        `json:"elided"` // trailing rows empty in every zone were left out
	Rows    []SlotRow   `json:"slots"`
	Missing []string    `json:"unreachable_zones,omitempty"`
}

// verdict judges one slot from its tally and the epoch record.
func verdict(rec *epoch.Record, slot uint64, t wire.Tally) string {
	cs := rec.Constants
	switch {
	case t.Conflict:
		return VerdictConflict
	case rec.Fenced() && slot == rec.Cut:
		return VerdictCut
	case rec.Fenced() && slot < rec.Cut:
		if slot < rec.Cursors.Trimmed && t.Copies == 0 {
			return VerdictTrimmed
		}
		return VerdictCommitted
	case t.Poisons >= cs.B():
		return VerdictDead
	case rec.Fenced(): // past the cut
		if t.Copies > 0 {
			return VerdictGarbage
		}
		if t.Foreign > 0 {
			return VerdictBlocked
		}
		if t.Poisons > 0 || t.Unreachable > 0 {
			return VerdictUndecided
		}
		return VerdictEmpty
	case t.Copies >= cs.W:
		return VerdictCommitted
	case slot < rec.Cursors.Trimmed && t.Copies == 0 && t.Poisons == 0:
		return VerdictTrimmed
	case t.Copies == 0 && t.Poisons == 0 && t.Foreign == 0 && t.Unreachable == 0:
		return VerdictEmpty
	case t.Foreign > 0 && t.Unreachable == 0:
		return VerdictBlocked
	}
	return VerdictUndecided
}

// maxSlotRange bounds an explicit -from/-to range.
const maxSlotRange = 1 << 20

// slotBatch is how many slots are read at once (K objects each).
const slotBatch = 64

func runSlots(ctx context.Context, c *cmd, args []string) error {
	fs := c.flags("slots")
	from := fs.Int64("from", -1, "first slot (default: the trimmed cursor)")
	to := fs.Int64("to", -1, "last slot, inclusive (default: the cut plus the window for a fenced epoch; for an open one, until window+1 slots hold nothing)")
	pos, err := c.parse(fs, args, "<star>", "<epoch>")
	if err != nil {
		return err
	}
	if *from < -1 || *to < -1 {
		return usagef("slots: -from and -to must not be negative")
	}
	if *from >= 0 && *to >= 0 && *to < *from {
		return usagef("slots: -to %d is below -from %d", *to, *from)
	}
	if *from >= 0 && *to >= 0 && *to-*from >= maxSlotRange {
		return usagef("slots: at most %d slots at once", maxSlotRange)
	}
	_, rec, err := c.starEpoch(ctx, pos)
	if err != nil {
		return err
	}
	_, buckets, err := c.zonesOf(ctx, rec)
	if err != nil {
		return err
	}
	cs := rec.Constants
	v := SlotsView{Star: rec.Star, Epoch: rec.Epoch, State: rec.State, W: cs.W, B: cs.B(), Zones: cs.Buckets}
	if rec.Fenced() {
		cut := rec.Cut
		v.Cut = &cut
	}
	v.From = rec.Cursors.Trimmed
	if *from >= 0 {
		v.From = uint64(*from)
	}
	// Where the walk stops: an explicit -to, the end of the garbage range
	// of a fenced epoch, or (open) window+1 slots that hold nothing.
	explicit := *to >= 0
	var last uint64
	switch {
	case explicit:
		last = uint64(*to)
	case rec.Fenced():
		last = max(rec.Cut+uint64(cs.Window), v.From)
	default:
		last = v.From + maxSlotRange
	}
	keys := wire.KeysOf(rec)
	var (
		quiet     uint64 // consecutive slots holding nothing (open scan)
		lastThing = int64(-1)
		unreached = make([]int, len(buckets))
		prog      = c.progress(fmt.Sprintf("slots %s/%d", rec.Star, rec.Epoch), last-v.From+1)
		stopped   bool
		readUpTo  = v.From
	)
	for start := v.From; start <= last && !stopped; start += slotBatch {
		end := min(start+slotBatch-1, last)
		obs := observe(ctx, buckets, keys, rec, start, end)
		if err := ctx.Err(); err != nil {
			prog.done()
			return fmt.Errorf("slots %s/%d: reading slots %d–%d: %w", rec.Star, rec.Epoch, start, end, err)
		}
		for i, o := range obs {
			slot := start + uint64(i)
			t := wire.TallySlot(o)
			row := SlotRow{Slot: slot, Verdict: verdict(rec, slot, t), Copies: t.Copies, Poisons: t.Poisons}
			holds := false
			for z, ob := range o {
				row.Zones = append(row.Zones, letters[ob.State])
				switch ob.State {
				case wire.SlotUnreachable:
					unreached[z]++
				case wire.SlotFlight, wire.SlotPoison, wire.SlotForeign:
					holds = true
				}
			}
			v.Rows = append(v.Rows, row)
			readUpTo = slot
			if holds {
				lastThing, quiet = int64(slot), 0
			} else if quiet++; !explicit && !rec.Fenced() && quiet > uint64(cs.Window) {
				stopped = true
				break
			}
		}
		prog.step(readUpTo - v.From + 1)
	}
	prog.done()
	v.To = readUpTo
	if !explicit {
		// Leave out the trailing rows that hold nothing anywhere: past the
		// cut for a fenced epoch, past the first free slot for an open one.
		keep := uint64(lastThing + 1)
		switch {
		case rec.Fenced():
			keep = max(uint64(max(lastThing, 0)), rec.Cut)
		case lastThing < 0:
			keep = v.From
		}
		for len(v.Rows) > 0 && v.Rows[len(v.Rows)-1].Slot > keep && v.Rows[len(v.Rows)-1].Verdict == VerdictEmpty &&
			!slices.Contains(v.Rows[len(v.Rows)-1].Zones, "?") {
			v.Rows = v.Rows[:len(v.Rows)-1]
			v.Elided = true
		}
	}
	v.Shown = uint64(len(v.Rows))
	var missing []string
	for z, n := range unreached {
		if n > 0 {
			v.Missing = append(v.Missing, cs.Buckets[z])
			missing = append(missing, fmt.Sprintf("%s (%d slots)", cs.Buckets[z], n))
		}
	}
	if err := c.emit(v, func(w io.Writer) { printSlots(w, rec, v) }); err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("zones did not answer, shown as ?: %s: %w", strings.Join(missing, ", "), objstore.ErrUnavailable)
	}
	return nil
}

func printSlots(w io.Writer, rec *epoch.Record, v SlotsView) {
	fmt.Fprintf(w, "%s\n", rec)
	fmt.Fprintf(w, "slot\t%s\tverdict\n", strings.Join(v.Zones, "\t"))
	for _, r := range v.Rows {
		fmt.Fprintf(w, "%d\t%s\t%s\n", r.Slot, strings.Join(r.Zones, "\t"), r.Verdict)
	}
	switch {
	case len(v.Rows) == 0:
		fmt.Fprintf(w, "(no slots in %d–%d)\n", v.From, v.To)
	case v.Elided:
		fmt.Fprintf(w, "(read slots %d–%d; slots %d–%d hold nothing in any zone)\n", v.From, v.To, v.Rows[len(v.Rows)-1].Slot+1, v.To)
	}
	fmt.Fprintln(w, "F flight  P poison  · empty  ? unreachable  X foreign")
}

// observe reads slots [from, to] whole in every bucket, in parallel: one
// observation per bucket per slot.
func observe(ctx context.Context, buckets []objstore.Bucket, keys wire.Keys, rec *epoch.Record, from, to uint64) [][]wire.Observation {
	out := make([][]wire.Observation, to-from+1)
	var wg sync.WaitGroup
	for i := range out {
		out[i] = make([]wire.Observation, len(buckets))
		addr := wire.Addr{Keys: keys, Star: rec.Star, Epoch: rec.Epoch, Slot: from + uint64(i)}
		for z, b := range buckets {
			wg.Go(func() { out[i][z] = wire.ObserveObject(ctx, b, addr) })
		}
	}
	wg.Wait()
	return out
}

// StreamView is the output of `stream`. The producer token itself is never
// shown: only its mode and whether one is installed.
type StreamView struct {
	Stream         string              `json:"stream"`
	Holder         string              `json:"holder,omitempty"`
	Writer         *lease.WriterRecord `json:"writer,omitempty"`
	Mark           *lease.Mark         `json:"mark,omitempty"`
	TokenMode      lease.Mode          `json:"token_mode"`
	TokenInstalled bool                `json:"token_installed"`
}

func runStream(ctx context.Context, c *cmd, args []string) error {
	pos, err := c.parse(c.flags("stream"), args, "<id>")
	if err != nil {
		return err
	}
	id, err := parseName("stream", pos[0])
	if err != nil {
		return err
	}
	st, err := c.store(ctx)
	if err != nil {
		return err
	}
	s, err := lease.Inspect(ctx, st, c.g.root, id)
	if err != nil {
		return fmt.Errorf("stream %s: %w", id, err)
	}
	v := StreamView{Stream: id, Holder: s.Holder, Writer: s.Writer, Mark: s.Mark}
	if s.Token != nil {
		v.TokenMode, v.TokenInstalled = s.Token.Mode, s.Token.Revision != 0 && s.Token.Token != ""
	}
	return c.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "stream\t%s\n", id)
		fmt.Fprintf(w, "holder\t%s\n", orDash(v.Holder))
		if v.Writer != nil {
			fmt.Fprintf(w, "last writer\t%s epoch %d (%s), tenure %d\n", v.Writer.Star, v.Writer.Epoch, v.Writer.Class, v.Writer.Tenure)
		} else {
			fmt.Fprintf(w, "last writer\t- (never opened)\n")
		}
		if v.Mark != nil {
			fmt.Fprintf(w, "mark\t%s epoch %d tenure %d, next offset %d, %s at %s\n", v.Mark.Star, v.Mark.Epoch, v.Mark.Tenure, v.Mark.Next, v.Mark.Reason, fmtTime(v.Mark.At))
		} else {
			fmt.Fprintf(w, "mark\t- (none standing)\n")
		}
		inst := "none installed"
		if v.TokenInstalled {
			inst = "installed (not shown)"
		}
		fmt.Fprintf(w, "token\tmode %s, %s\n", v.TokenMode, inst)
	})
}

// GrantView is the output of `grant`.
// RequiredView is the position the next holder must recover to
// (authority.Required), with the field names of the tool's JSON.
type RequiredView struct {
	Star  string `json:"star,omitempty"`
	Epoch uint64 `json:"epoch"`
	Slot  uint64 `json:"slot"`
}

type GrantView struct {
	Domain    string          `json:"domain"`
	Term      uint64          `json:"term"`
	Phase     authority.Phase `json:"phase"`
	Holder    string          `json:"holder,omitempty"`
	Token     authority.Token `json:"token"`
	Required  RequiredView    `json:"required"`
	Candidate string          `json:"candidate,omitempty"`
	Target    string          `json:"target,omitempty"`
	Ended     string          `json:"ended,omitempty"`
	Written   bool            `json:"written"` // false: no state record yet (vacant)
}

func runGrant(ctx context.Context, c *cmd, args []string) error {
	pos, err := c.parse(c.flags("grant"), args, "<domain>")
	if err != nil {
		return err
	}
	domain, err := parseName("domain", pos[0])
	if err != nil {
		return err
	}
	st, err := c.store(ctx)
	if err != nil {
		return err
	}
	s, err := authority.Read(ctx, st, c.g.root, domain)
	if err != nil {
		return fmt.Errorf("grant %s: %w", domain, err)
	}
	v := GrantView{Domain: domain, Term: s.Term, Phase: s.Phase, Holder: s.Holder, Token: s.Token,
		Required:  RequiredView{Star: s.Required.Star, Epoch: s.Required.Pos.Epoch, Slot: s.Required.Pos.Slot},
		Candidate: s.Candidate, Target: s.Target, Ended: s.Ended, Written: s.Revision != 0}
	return c.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "domain\t%s\n", domain)
		fmt.Fprintf(w, "phase\t%s\n", v.Phase)
		fmt.Fprintf(w, "term\t%d\n", v.Term)
		fmt.Fprintf(w, "holder\t%s\n", orDash(v.Holder))
		fmt.Fprintf(w, "token\t%d\n", v.Token)
		req := "-"
		if v.Required.Star != "" {
			req = fmt.Sprintf("%s at %d/%d", v.Required.Star, v.Required.Epoch, v.Required.Slot)
		}
		fmt.Fprintf(w, "required\t%s\n", req)
		fmt.Fprintf(w, "candidate\t%s\n", orDash(v.Candidate))
		fmt.Fprintf(w, "target\t%s\n", orDash(v.Target))
		fmt.Fprintf(w, "ended\t%s\n", orDash(v.Ended))
		if !v.Written {
			fmt.Fprintln(w, "(no state record: the domain was never granted)")
			if h := c.rootHint(); h != "" {
				fmt.Fprintf(w, "(%s)\n", h)
			}
		}
	})
}
