package settle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// newMaintainer makes a Maintainer over p's parts.
func newMaintainer(t testing.TB, p *settletest.Party, opts settle.MaintainerOptions) *settle.Maintainer {
	t.Helper()
	m, err := settle.NewMaintainer(maintainerConfig(t, p), opts)
	require.NoError(t, err)
	return m
}

func maintainerConfig(t testing.TB, p *settletest.Party) settle.MaintainerConfig {
	return settle.MaintainerConfig{Store: p.Store, Minter: p.Minter, Settler: p.Settler, Refs: p.Refs,
		Compactor: newCompactor(t, p, "maintainer", settle.CompactorOptions{}),
		Streams:   func(context.Context) ([]string, error) { return bundleStreams, nil }}
}

// slotObjects counts the slot objects (flights and poison) of starA's
// epoch ep below upTo, in every zone.
func slotObjects(t testing.TB, e *settletest.Env, ep, upTo uint64) int {
	t.Helper()
	n := 0
	for _, z := range e.Raw {
		for o, err := range objstore.All(context.Background(), z, e.Keys.Epoch(starA, ep)) {
			require.NoError(t, err)
			if s, ok := e.Keys.ParseSlot(starA, ep, o.Key); ok && s < upTo {
				n++
			}
		}
	}
	return n
}

func epochRecord(t testing.TB, p *settletest.Party, ep uint64) *epoch.Record {
	t.Helper()
	rec, err := p.Minter.Get(context.Background(), starA, ep)
	require.NoError(t, err)
	return rec
}

// One pass compacts a settled epoch into segments, trims every flight
// below the rewritten cursor, and the streams read whole from segments.
// A second pass has nothing left to do.
func TestMaintainerPass(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 130, true)
	var logs bytes.Buffer
	m := newMaintainer(t, p, settle.MaintainerOptions{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})

	rep, err := m.Pass(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	require.Contains(t, logs.String(), fmt.Sprintf(`level=INFO msg="maintenance pass" streams=0 retained=0 records_expired=0 ref_pages_dropped=0 settled=0 epochs=1 segments_written=%d`, rep.Segments))
	require.Equal(t, 1, rep.Epochs)
	require.Equal(t, len(bundleStreams), rep.Segments, "one segment per stream")
	require.Equal(t, 3*len(bundleStreams), rep.Pages)
	require.Positive(t, rep.Bytes)
	require.Equal(t, 3*130, rep.FlightsDeleted)
	require.Zero(t, rep.Backlog)
	require.True(t, rep.Did())
	got := epochRecord(t, p, rec.Epoch)
	require.Equal(t, uint64(130), got.Cursors.Rewritten)
	require.Equal(t, uint64(130), got.Cursors.Trimmed)
	require.Zero(t, slotObjects(t, e, rec.Epoch, 130), "every flight below the rewritten cursor is deleted")
	require.Equal(t, 3*130, readAll(t, newStreamReader(t, p), 130))
	requireNoGarbage(t, e, 2)

	// A write's last copy that was on its way lands below the trimmed
	// cursor after the pass: the next pass lists the epoch again and
	// deletes it, one more finds nothing, and then the epoch is no work.
	late := cutlinetest.Bundle(cutlinetest.BundleRecord{Stream: bundleStreams[0], Offset: 0, ID: "late"})
	e.PutFlight(0, starA, rec.Epoch, 7, late)
	again, err := m.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, again.FlightsDeleted, "the late copy is deleted: %+v", again)
	require.Zero(t, slotObjects(t, e, rec.Epoch, 130))
	again, err = m.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, again.Epochs, "the epoch is listed once more after a trim that deleted")
	require.False(t, again.Did(), "%+v", again)
	again, err = m.Pass(ctx)
	require.NoError(t, err)
	require.False(t, again.Did(), "%+v", again)
	require.Contains(t, logs.String(), `level=DEBUG msg="maintenance pass"`, "a pass that did nothing")
	require.Zero(t, again.Epochs, "a compacted and trimmed epoch is no work")
	require.Equal(t, 1, again.Collected, "the epochs with segments are collected")
	require.Zero(t, again.Garbage)

	// Retention drops every offset: the segments are garbage.
	for _, s := range bundleStreams {
		_, err := p.Refs.Retain(ctx, s, 130)
		require.NoError(t, err)
	}
	rep, err = m.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, len(bundleStreams), rep.Garbage)
	require.GreaterOrEqual(t, rep.SegmentsDeleted, 2*len(bundleStreams), "W copies of each at least")
	for z := range e.Raw {
		require.Empty(t, segmentObjects(t, e, z))
	}
}

// A retention below what readers read: the pass moves every stream's
// retention point, compaction skips what it dropped, the flights go, and
// a read below the point is a *TrimmedError naming it.
func TestMaintainerRetention(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 130, true)
	m := newMaintainer(t, p, settle.MaintainerOptions{Policy: settle.Policy{MaxRecords: 10}})

	rep, err := m.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, len(bundleStreams), rep.Streams)
	require.Equal(t, len(bundleStreams), rep.Retained)
	require.Equal(t, uint64(3*120), rep.Expired)
	require.Equal(t, map[string]uint64{settle.ByRecords: 3 * 120}, rep.ExpiredBy)
	require.Equal(t, len(bundleStreams), rep.PagesDropped, "each stream's first page")
	require.Zero(t, slotObjects(t, e, rec.Epoch, 130))
	r := newStreamReader(t, p)
	for _, s := range bundleStreams {
		for _, err := range r.Read(ctx, s, 0) {
			te, ok := errors.AsType[*settle.TrimmedError](err)
			require.True(t, ok, "%s: %v", s, err)
			require.Equal(t, uint64(120), te.Start)
			break
		}
		n := 0
		for c, err := range r.Read(ctx, s, 120) {
			require.NoError(t, err)
			require.Equal(t, wantChunk(t, s, c.Slot), c.Data)
			n++
		}
		require.Equal(t, 10, n)
	}
}

// noCreate is a zone that refuses every create: a compactor over it
// writes no segment.
type noCreate struct{ objstore.Bucket }

var errNoCreate = errors.New("create refused")

func (noCreate) Create(context.Context, string, []byte) error { return errNoCreate }

// stuckCompactor is a compactor whose every Compact fails.
func stuckCompactor(t testing.TB, e *settletest.Env) *settle.Compactor {
	q := e.NewParty("stuck", settletest.PartyOptions{Wrap: func(_ int, b objstore.Bucket) objstore.Bucket { return noCreate{b} }})
	return newCompactor(t, q, "stuck", settle.CompactorOptions{})
}

// TrimUnneeded trims what retention dropped where compaction has not
// come: below the lowest slot a retained ref needs.
func TestMaintainerTrimUnneeded(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 130, true)
	for _, s := range bundleStreams {
		_, err := p.Refs.Retain(ctx, s, 100)
		require.NoError(t, err)
	}
	cfg := maintainerConfig(t, p)
	cfg.Compactor = stuckCompactor(t, e)

	m, err := settle.NewMaintainer(cfg, settle.MaintainerOptions{})
	require.NoError(t, err)
	rep, err := m.Pass(ctx)
	require.ErrorIs(t, err, errNoCreate)
	require.Equal(t, settle.StageCompact, rep.Errors[0].Stage)
	require.Zero(t, epochRecord(t, p, rec.Epoch).Cursors.Trimmed, "without TrimUnneeded, only what was rewritten goes")

	m, err = settle.NewMaintainer(cfg, settle.MaintainerOptions{TrimUnneeded: true})
	require.NoError(t, err)
	rep, err = m.Pass(ctx)
	require.ErrorIs(t, err, errNoCreate)
	require.Equal(t, uint64(100), epochRecord(t, p, rec.Epoch).Cursors.Trimmed)
	require.Zero(t, slotObjects(t, e, rec.Epoch, 100))
	require.Equal(t, 3*100, rep.FlightsDeleted)
	require.Positive(t, slotObjects(t, e, rec.Epoch, 130), "what a retained ref needs stays")
}

// An epoch left open is settled only when its record was created below
// the revision SettleBefore returns; the same pass then compacts it.
func TestMaintainerSettles(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 130, false)
	created := epochRecord(t, p, rec.Epoch).Revision // never updated since its mint
	before := created
	m := newMaintainer(t, p, settle.MaintainerOptions{SettleBefore: func() int64 { return before }})

	rep, err := m.Pass(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Settled, "minted at the revision itself: left to its writer")
	require.Equal(t, epoch.StateOpen, epochRecord(t, p, rec.Epoch).State)

	before = created + 1
	rep, err = m.Pass(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Settled, 1)
	require.Equal(t, uint64(130), rep.Settled[0].Cut)
	got := epochRecord(t, p, rec.Epoch)
	require.Equal(t, epoch.StateSettled, got.State)
	require.Equal(t, uint64(130), got.Cursors.Rewritten)
	require.Equal(t, uint64(130), got.Cursors.Trimmed)
	require.Equal(t, 3*130, readAll(t, newStreamReader(t, p), 130))
}

// layStar mints an epoch of star whose slots [0, n) hold, in every zone,
// record s of stream star+"-s", and settles it.
func layStar(t testing.TB, e *settletest.Env, p *settletest.Party, star string, n uint64) *epoch.Record {
	t.Helper()
	ctx := context.Background()
	rec, err := p.Minter.Mint(ctx, star, e.Constants(2, 8))
	require.NoError(t, err)
	for s := range n {
		b := cutlinetest.Bundle(cutlinetest.BundleRecord{Stream: star + "-s", Offset: s, ID: fmt.Sprint(s)})
		for z := range e.Raw {
			e.PutFlight(z, star, rec.Epoch, s, b)
		}
	}
	_, err = p.Settler.Settle(ctx, star, rec.Epoch)
	require.NoError(t, err)
	return rec
}

// MaxEpochs, MaxCollects and MaxStreams bound a pass, which takes epochs
// and streams in turn: three passes of one epoch each compact three
// epochs.
func TestMaintainerBounds(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	stars := []string{"star-1", "star-2", "star-3"}
	var streams []string
	for _, st := range stars {
		layStar(t, e, p, st, 10)
		streams = append(streams, st+"-s")
	}
	cfg := maintainerConfig(t, p)
	cfg.Streams = func(context.Context) ([]string, error) { return streams, nil }
	m, err := settle.NewMaintainer(cfg, settle.MaintainerOptions{MaxEpochs: 1, MaxCollects: 1, MaxStreams: 1, Policy: settle.Policy{MaxRecords: 5}})
	require.NoError(t, err)
	for i, st := range stars {
		rep, err := m.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, rep.Epochs, "pass %d", i)
		require.Equal(t, 1, rep.Streams, "pass %d", i)
		require.LessOrEqual(t, rep.Collected, 1)
		require.Equal(t, uint64(10*(len(stars)-i-1)), rep.Backlog)
		for j, other := range stars {
			rec, err := p.Minter.Get(ctx, other, 1)
			require.NoError(t, err)
			if j <= i {
				require.Equal(t, uint64(10), rec.Cursors.Trimmed, "pass %d takes %s", i, other)
			} else {
				require.Zero(t, rec.Cursors.Rewritten, "pass %d leaves %s", i, other)
			}
		}
		start, err := p.Refs.Start(ctx, st+"-s")
		require.NoError(t, err)
		require.Equal(t, uint64(5), start, "pass %d retains %s", i, st)
	}
	// Each trimmed epoch is listed once more, in turn, for a copy that
	// landed after its trim; none did, and then every epoch is done.
	for i := range stars {
		rep, err := m.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, rep.Epochs, "re-check %d", i)
		require.Zero(t, rep.FlightsDeleted, "re-check %d", i)
	}
	rep, err := m.Pass(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Epochs, "every epoch done")
	require.Equal(t, 1, rep.Collected)
}

// Epochs that stay in work (a compaction that keeps failing) are taken
// in turn, not the first ones again and again.
func TestMaintainerTakesTurns(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	stars := []string{"star-1", "star-2", "star-3"}
	for _, st := range stars {
		layStar(t, e, p, st, 10)
	}
	cfg := maintainerConfig(t, p)
	cfg.Compactor = stuckCompactor(t, e)
	m, err := settle.NewMaintainer(cfg, settle.MaintainerOptions{MaxEpochs: 2})
	require.NoError(t, err)
	var tried []string
	for range 3 {
		rep, err := m.Pass(ctx)
		require.ErrorIs(t, err, errNoCreate)
		require.Equal(t, 2, rep.Epochs)
		for _, se := range rep.Errors {
			require.Equal(t, settle.StageCompact, se.Stage)
			for _, st := range stars {
				if strings.Contains(se.Error(), st+"/") {
					tried = append(tried, st)
				}
			}
		}
	}
	require.Equal(t, []string{"star-1", "star-2", "star-3", "star-1", "star-2", "star-3"}, tried)
}

// The backlog, and the oldest uncompacted flight's age: how long passes
// have found it waiting at its epoch's rewritten cursor. A pass not held
// does nothing.
func TestMaintainerBacklog(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 10, true)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	held := false
	cfg := maintainerConfig(t, p)
	cfg.Compactor = stuckCompactor(t, e)
	m, err := settle.NewMaintainer(cfg, settle.MaintainerOptions{Clock: clk, Held: func() bool { return held }})
	require.NoError(t, err)

	rep, err := m.Pass(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Epochs, "not held: nothing done")
	require.Zero(t, rep.Backlog, "nor measured")

	held = true
	rep, err = m.Pass(ctx)
	require.ErrorIs(t, err, errNoCreate)
	require.Equal(t, uint64(10), rep.Backlog)
	require.Zero(t, rep.OldestUncompacted, "first found now")
	clk.Advance(time.Hour)
	rep, err = m.Pass(ctx)
	require.ErrorIs(t, err, errNoCreate)
	require.Equal(t, time.Hour, rep.OldestUncompacted)
	require.Zero(t, epochRecord(t, p, rec.Epoch).Cursors.Rewritten)

	// Compacted: no backlog left, and no age.
	m2 := newMaintainer(t, p, settle.MaintainerOptions{Clock: clk})
	rep, err = m2.Pass(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Backlog)
	require.Zero(t, rep.OldestUncompacted)
}

// A pass stops when its context ends, counts nothing as failed, and
// returns the context's cause.
func TestMaintainerContext(t *testing.T) {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 10, true)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := maintainerConfig(t, p)
	cfg.Streams = func(context.Context) ([]string, error) {
		cancel()
		return bundleStreams, nil
	}
	m, err := settle.NewMaintainer(cfg, settle.MaintainerOptions{Policy: settle.Policy{MaxRecords: 1}})
	require.NoError(t, err)
	rep, err := m.Pass(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, rep.Errors)
	require.Zero(t, rep.Streams)
	require.Zero(t, rep.Epochs)
	require.Zero(t, epochRecord(t, p, rec.Epoch).Cursors.Rewritten)
}

// A pass that runs out of its budget stops with a StageBudget error
// wrapping ErrPassBudget; the next goes on.
func TestMaintainerBudget(t *testing.T) {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 10, true)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := maintainerConfig(t, p)
	slow := true
	cfg.Streams = func(context.Context) ([]string, error) {
		if slow {
			clk.Advance(time.Minute) // the budget's time passes while it lists
		}
		return bundleStreams, nil
	}
	m, err := settle.NewMaintainer(cfg, settle.MaintainerOptions{Clock: clk, Budget: time.Minute, Policy: settle.Policy{MaxRecords: 1000}})
	require.NoError(t, err)
	rep, err := m.Pass(context.Background())
	require.ErrorIs(t, err, settle.ErrPassBudget)
	require.NotEmpty(t, rep.Errors)
	last := rep.Errors[len(rep.Errors)-1]
	require.Equal(t, settle.StageBudget, last.Stage)
	require.Equal(t, time.Minute, rep.Took)
	require.Zero(t, epochRecord(t, p, rec.Epoch).Cursors.Rewritten)

	slow = false
	rep, err = m.Pass(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Epochs)
	require.Equal(t, uint64(10), epochRecord(t, p, rec.Epoch).Cursors.Trimmed)
}

// A step that fails is a StageError; the pass goes on with the next.
func TestMaintainerStageError(t *testing.T) {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 10, true)
	cfg := maintainerConfig(t, p)
	boom := errors.New("no listing")
	cfg.Streams = func(context.Context) ([]string, error) { return nil, boom }
	m, err := settle.NewMaintainer(cfg, settle.MaintainerOptions{Policy: settle.Policy{MaxRecords: 1}})
	require.NoError(t, err)
	rep, err := m.Pass(context.Background())
	require.ErrorIs(t, err, boom)
	require.Len(t, rep.Errors, 1)
	require.Equal(t, settle.StageRetain, rep.Errors[0].Stage)
	require.Equal(t, uint64(10), epochRecord(t, p, rec.Epoch).Cursors.Trimmed, "compaction and trim went on")
}

// Run runs a pass every Interval on its clock, skips it while not held,
// and returns when its context ends.
func TestMaintainerRun(t *testing.T) {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	rec := layBundles(t, e, p, 10, true)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reports := make(chan settle.MaintenanceReport, 4)
	held := make(chan bool, 1)
	held <- false
	isHeld := true
	m := newMaintainer(t, p, settle.MaintainerOptions{Clock: clk, Interval: time.Hour,
		Held: func() bool {
			select {
			case isHeld = <-held:
			default:
			}
			return isHeld
		},
		OnPass: func(r settle.MaintenanceReport, err error) {
			require.NoError(t, err)
			reports <- r
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	clk.BlockUntil(1)
	clk.Advance(time.Hour) // not held: skipped
	clk.BlockUntil(1)
	require.Empty(t, reports)
	require.Zero(t, epochRecord(t, p, rec.Epoch).Cursors.Rewritten)
	held <- true
	clk.Advance(time.Hour)
	r := <-reports
	require.Equal(t, 1, r.Epochs)
	require.Equal(t, uint64(10), epochRecord(t, p, rec.Epoch).Cursors.Trimmed)
	clk.BlockUntil(1)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// Missing inputs and options out of bounds are *cutline.ConfigErrors naming the
// field.
func TestMaintainerRefuses(t *testing.T) {
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{})
	good := maintainerConfig(t, p)
	for _, tc := range []struct {
		field string
		cfg   func(c *settle.MaintainerConfig)
		opts  settle.MaintainerOptions
	}{
		{"Store", func(c *settle.MaintainerConfig) { c.Store = nil }, settle.MaintainerOptions{}},
		{"Minter", func(c *settle.MaintainerConfig) { c.Minter = nil }, settle.MaintainerOptions{}},
		{"Settler", func(c *settle.MaintainerConfig) { c.Settler = nil }, settle.MaintainerOptions{}},
		{"Compactor", func(c *settle.MaintainerConfig) { c.Compactor = nil }, settle.MaintainerOptions{}},
		{"Refs", func(c *settle.MaintainerConfig) { c.Refs = nil }, settle.MaintainerOptions{TrimUnneeded: true}},
		{"Streams", func(c *settle.MaintainerConfig) { c.Streams = nil }, settle.MaintainerOptions{Policy: settle.Policy{MaxRecords: 1}}},
		{"Interval", nil, settle.MaintainerOptions{Interval: time.Millisecond}},
		{"Interval", nil, settle.MaintainerOptions{Interval: 25 * time.Hour}},
		{"Interval", nil, settle.MaintainerOptions{Interval: -time.Second}},
		{"Budget", nil, settle.MaintainerOptions{Budget: -time.Second}},
		{"MaxEpochs", nil, settle.MaintainerOptions{MaxEpochs: -1}},
		{"MaxCollects", nil, settle.MaintainerOptions{MaxCollects: settle.MaxMaintainBound + 1}},
		{"MaxStreams", nil, settle.MaintainerOptions{MaxStreams: math.MinInt}},
		{"MaxAge", nil, settle.MaintainerOptions{Policy: settle.Policy{MaxAge: -time.Hour}}},
	} {
		cfg := good
		if tc.cfg != nil {
			tc.cfg(&cfg)
		}
		_, err := settle.NewMaintainer(cfg, tc.opts)
		require.ErrorIs(t, err, cutline.ErrInvalid, tc.field)
		ce, ok := errors.AsType[*cutline.ConfigError](err)
		require.True(t, ok, tc.field)
		require.Equal(t, tc.field, ce.Field)
	}
	_, err := settle.NewMaintainer(good, settle.MaintainerOptions{})
	require.NoError(t, err)
}
