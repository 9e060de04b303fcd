package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// identity names this tool in poison it writes and in minted records.
const identity = "cutline"

// FenceView is the output of `fence`.
type FenceView struct {
	Star   string       `json:"star"`
	Epoch  uint64       `json:"epoch"`
	Cut    uint64       `json:"cut"`
	Report fence.Report `json:"report"`
}

func (c *cmd) fencer(m *epoch.Minter, zones chain.Zones) (*fence.Fencer, error) {
	return fence.New(m, zones, fence.Options{Identity: identity})
}

func runFence(ctx context.Context, c *cmd, args []string) error {
	pos, err := c.parse(c.flags("fence"), args, "<star>", "<epoch>")
	if err != nil {
		return err
	}
	m, rec, err := c.starEpoch(ctx, pos)
	if err != nil {
		return err
	}
	zones, _, err := c.zonesOf(ctx, rec)
	if err != nil {
		return err
	}
	if !rec.Fenced() {
		if err := c.confirm(fmt.Sprintf("fence %s/%d: poison its first free slot in every zone and publish the cut; its writer can never acknowledge again", rec.Star, rec.Epoch)); err != nil {
			return err
		}
	}
	f, err := c.fencer(m, zones)
	if err != nil {
		return err
	}
	rep, err := f.FenceReport(ctx, rec.Star, rec.Epoch)
	if err != nil {
		return fmt.Errorf("fence %s/%d: %w", rec.Star, rec.Epoch, err)
	}
	v := FenceView{Star: rec.Star, Epoch: rec.Epoch, Cut: rep.Cut, Report: rep}
	return c.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "%s/%d fenced: cut %d\n", rec.Star, rec.Epoch, rep.Cut)
		if rep.AlreadyFenced {
			fmt.Fprintln(w, "already fenced\tthe published cut was read; nothing was written")
			return
		}
		fmt.Fprintf(w, "estimate\t%d\n", rep.Estimate)
		fmt.Fprintf(w, "walk start\t%d\n", rep.WalkStart)
		fmt.Fprintf(w, "rounds\t%d\n", rep.Rounds)
		fmt.Fprintf(w, "reads, creates\t%d, %d\n", rep.Reads, rep.Creates)
		fmt.Fprintf(w, "repaired\t%d\n", rep.Repaired)
		fmt.Fprintf(w, "poisoned\t%d\n", rep.Poisoned)
		if rep.Barriers > 0 {
			fmt.Fprintf(w, "barriers\t%d (%d attempts)\n", rep.Barriers, rep.BarrierAttempts)
		}
		if rep.Late {
			fmt.Fprintln(w, "late\tanother fencer published the cut first; it was adopted")
		}
		fmt.Fprintf(w, "duration\t%v\n", rep.Duration)
	})
}

// Locators settle knows. Only "none" exists: the tool does not know a
// host's payload format, so it cannot build the host's index entries.
const locatorNone = "none"

// ErrNoLocator is what the "none" locator's coverage returns: the tool
// cannot index a flight for the host.
var ErrNoLocator = errors.New("cutline: no locator: the host's index format is unknown to this tool")

// noCoverage is the "none" locator: a settle.Coverage that refuses to
// cover anything. Settle calls it only for flights in [checkpoint, cut),
// which runSettle refuses before writing anything.
type noCoverage struct{}

func (noCoverage) Cover(_ context.Context, star string, f chain.Flight) error {
	return fmt.Errorf("%s at %v: %w", star, f.Position, ErrNoLocator)
}

// SettleView is the output of `settle`.
type SettleView struct {
	Star   string              `json:"star"`
	Epoch  uint64              `json:"epoch"`
	Cut    uint64              `json:"cut"`
	Report settle.SettleReport `json:"report"`
}

func runSettle(ctx context.Context, c *cmd, args []string) error {
	fs := c.flags("settle")
	locator := fs.String("locator", locatorNone, "how flights are indexed for the host; only \"none\": refuse when flights below the cut are not covered yet")
	pos, err := c.parse(fs, args, "<star>", "<epoch>")
	if err != nil {
		return err
	}
	if *locator != locatorNone {
		return usagef("settle: unknown -locator %q: only %q is available (the host's own index settles uncovered flights)", *locator, locatorNone)
	}
	m, rec, err := c.starEpoch(ctx, pos)
	if err != nil {
		return err
	}
	zones, _, err := c.zonesOf(ctx, rec)
	if err != nil {
		return err
	}
	f, err := c.fencer(m, zones)
	if err != nil {
		return err
	}
	s, err := settle.New(m, zones, noCoverage{}, settle.Options{Fencer: f})
	if err != nil {
		return err
	}
	if rec.State != epoch.StateSettled {
		what := fmt.Sprintf("settle %s/%d: delete the flights past its cut and mark it settled", rec.Star, rec.Epoch)
		if rec.State == epoch.StateOpen {
			what = fmt.Sprintf("fence %s/%d (poison, publish the cut), then settle it if every slot below the cut is already covered", rec.Star, rec.Epoch)
		} else if rec.Cursors.Checkpoint < rec.Cut {
			return uncovered(rec)
		}
		if err := c.confirm(what); err != nil {
			return err
		}
	}
	var fenceRep *fence.Report
	if rec.State == epoch.StateOpen {
		rep, err := f.FenceReport(ctx, rec.Star, rec.Epoch)
		if err != nil {
			return fmt.Errorf("settle %s/%d: fence: %w", rec.Star, rec.Epoch, err)
		}
		fenceRep = &rep
		if rec, err = m.Get(ctx, rec.Star, rec.Epoch); err != nil {
			return err
		}
		if rec.Cursors.Checkpoint < rec.Cut {
			return fmt.Errorf("fenced at cut %d, not settled: %w", rec.Cut, uncovered(rec))
		}
	}
	rep, err := s.Settle(ctx, rec.Star, rec.Epoch)
	if rep.Fence == nil {
		rep.Fence = fenceRep
	}
	if err != nil {
		return err
	}
	v := SettleView{Star: rec.Star, Epoch: rec.Epoch, Cut: rep.Cut, Report: rep}
	return c.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "%s/%d settled: cut %d\n", rec.Star, rec.Epoch, rep.Cut)
		if rep.AlreadySettled {
			fmt.Fprintln(w, "already settled\tnothing was written")
			return
		}
		if rep.Fence != nil {
			fmt.Fprintf(w, "fenced\trepaired %d, poisoned %d\n", rep.Fence.Repaired, rep.Fence.Poisoned)
		}
		fmt.Fprintf(w, "garbage deleted\t%d\n", rep.GarbageDeleted)
		fmt.Fprintf(w, "garbage left\t%d\n", rep.GarbageLeft)
		fmt.Fprintf(w, "covered\t%d\n", rep.Covered)
		fmt.Fprintf(w, "reads, deletes\t%d, %d\n", rep.Reads, rep.Deletes)
	})
}

// uncovered is the refusal to settle an epoch whose committed slots
// [checkpoint, cut) the host has not indexed: only the host can index them.
func uncovered(rec *epoch.Record) error {
	return &RefusedError{Msg: fmt.Sprintf("settle %s/%d: slots %d–%d are committed but not covered by the host's index (checkpoint %d < cut %d); "+
		"this tool has no locator for the host's payload format: let the host settle it (its open gate or authority.RecoverChain)",
		rec.Star, rec.Epoch, rec.Cursors.Checkpoint, rec.Cut-1, rec.Cursors.Checkpoint, rec.Cut)}
}

// TrimView is the output of `trim`.
type TrimView struct {
	Star   string            `json:"star"`
	Epoch  uint64            `json:"epoch"`
	Report settle.TrimReport `json:"report"`
}

func runTrim(ctx context.Context, c *cmd, args []string) error {
	pos, err := c.parse(c.flags("trim"), args, "<star>", "<epoch>", "<upTo>")
	if err != nil {
		return err
	}
	upTo, err := parseUint("upTo", pos[2])
	if err != nil {
		return err
	}
	m, rec, err := c.starEpoch(ctx, pos[:2])
	if err != nil {
		return err
	}
	zones, _, err := c.zonesOf(ctx, rec)
	if err != nil {
		return err
	}
	if upTo > rec.Cursors.Checkpoint {
		return fmt.Errorf("trim %s/%d: upTo %d passes the checkpoint %d: only covered slots may be trimmed: %w",
			rec.Star, rec.Epoch, upTo, rec.Cursors.Checkpoint, epoch.ErrCursorAhead)
	}
	if upTo > rec.Cursors.Trimmed {
		if err := c.confirm(fmt.Sprintf("trim %s/%d: delete slots %d–%d in every zone", rec.Star, rec.Epoch, rec.Cursors.Trimmed, upTo-1)); err != nil {
			return err
		}
	} else if err := c.confirm(fmt.Sprintf("trim %s/%d: delete leftovers below the trimmed cursor %d", rec.Star, rec.Epoch, rec.Cursors.Trimmed)); err != nil {
		return err
	}
	s, err := settle.New(m, zones, noCoverage{}, settle.Options{})
	if err != nil {
		return err
	}
	rep, err := s.Trim(ctx, rec.Star, rec.Epoch, upTo)
	if err != nil {
		return err
	}
	v := TrimView{Star: rec.Star, Epoch: rec.Epoch, Report: rep}
	if err := c.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "%s/%d trimmed below %d\n", rec.Star, rec.Epoch, rep.Trimmed)
		fmt.Fprintf(w, "deleted\t%d\n", rep.Deleted)
		fmt.Fprintf(w, "left\t%d\n", rep.Left)
	}); err != nil {
		return err
	}
	if rep.Left > 0 {
		return fmt.Errorf("trim %s/%d: %d object(s) left in unreachable zones; trim again later: %w", rec.Star, rec.Epoch, rep.Left, objstore.ErrUnavailable)
	}
	return nil
}

// ZoneCheck is one zone's result in `verify-zones`.
type ZoneCheck struct {
	Zone  string `json:"zone"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// VerifyView is the output of `verify-zones`.
type VerifyView struct {
	Zones         []ZoneCheck `json:"zones"`
	Distinct      bool        `json:"distinct"`
	DistinctError string      `json:"distinct_error,omitempty"`
}

func runVerifyZones(ctx context.Context, c *cmd, args []string) error {
	if _, err := c.parse(c.flags("verify-zones"), args); err != nil {
		return err
	}
	if c.g.prefix != "" {
		if err := objstore.ValidateKey(c.g.prefix + "/x"); err != nil {
			return usagef("bad -prefix %q: %v", c.g.prefix, err)
		}
	}
	buckets, err := c.buckets(ctx)
	if err != nil {
		return err
	}
	if err := c.confirm(fmt.Sprintf("write, read and delete probe objects in %s", strings.Join(chain.Names(buckets...), ", "))); err != nil {
		return err
	}
	var v VerifyView
	var errs []error
	for _, b := range buckets {
		zc := ZoneCheck{Zone: b.Name(), OK: true}
		if err := objstore.VerifyUnder(ctx, b, c.g.prefix); err != nil {
			zc.OK, zc.Error = false, err.Error()
			errs = append(errs, fmt.Errorf("zone %s: %w", b.Name(), err))
		}
		v.Zones = append(v.Zones, zc)
	}
	// The zone set as the library checks it at start-up: every zone again
	// (so that no zone passes one check without the others), then the
	// comparison that finds two handles on one store.
	if err := objstore.VerifyZones(ctx, buckets, objstore.VerifyOptions{Prefix: c.g.prefix}); err != nil {
		v.DistinctError = err.Error()
		errs = append(errs, err)
	} else {
		v.Distinct = true
	}
	if err := c.emit(v, func(w io.Writer) {
		for _, z := range v.Zones {
			res := "ok: create-only"
			if !z.OK {
				res = "FAILED: " + z.Error
			}
			fmt.Fprintf(w, "%s\t%s\n", z.Zone, res)
		}
		if v.Distinct {
			fmt.Fprintf(w, "distinct\tok: %d distinct stores\n", len(v.Zones))
		} else {
			fmt.Fprintf(w, "distinct\tFAILED: %s\n", v.DistinctError)
		}
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}
