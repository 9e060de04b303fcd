package cutlinetest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/settle"
)

type br = cutlinetest.BundleRecord

func TestBundleRoundTrip(t *testing.T) {
	recs := []br{{"a", 0, "x0"}, {"a", 1, "with|bar"}, {"b", 7, "new\nline \"quoted\""}, {"c", 3, ""}}
	p := cutlinetest.Bundle(recs...)
	got, err := cutlinetest.ParseBundle(p)
	require.NoError(t, err)
	require.Equal(t, recs, got)
	_, err = cutlinetest.ParseBundle(cutlinetest.Record("a", 0, "x"))
	require.Error(t, err, "a Record is no bundle")
	got, err = cutlinetest.ParseBundle(cutlinetest.Bundle())
	require.NoError(t, err)
	require.Empty(t, got)
	for _, bad := range []string{"bundle\na|0|\"x\"", "bundle\na|0\n", "bundle\na|x|\"x\"\n", "bundle\na|0|x\n"} {
		_, err := cutlinetest.ParseBundle([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

// Locate reads a Record as one span over the payload, and a Bundle as one
// span per stream over that stream's lines.
func TestLocateRecordsAndBundles(t *testing.T) {
	p := cutlinetest.Record("s", 4, "x")
	spans, err := cutlinetest.Locate(p)
	require.NoError(t, err)
	require.Equal(t, []settle.Span{{Stream: "s", Offset: 4, Count: 1, Start: 0, End: uint64(len(p))}}, spans)

	p = cutlinetest.Bundle(br{"b", 7, "x0"}, br{"a", 0, "x1"}, br{"a", 1, "x2"}, br{"a", 2, "x3"}, br{"c", 3, "x4"})
	spans, err = cutlinetest.Locate(p)
	require.NoError(t, err)
	require.NoError(t, settle.CheckSpans(p, spans))
	require.Len(t, spans, 3)
	want := []struct {
		stream   string
		off, n   uint64
		contains []string
	}{{"b", 7, 1, []string{"x0"}}, {"a", 0, 3, []string{"x1", "x2", "x3"}}, {"c", 3, 1, []string{"x4"}}}
	for i, w := range want {
		s := spans[i]
		require.Equal(t, w.stream, s.Stream)
		require.Equal(t, w.off, s.Offset)
		require.Equal(t, w.n, s.Count)
		held := string(p[s.Start:s.End])
		require.Equal(t, len(w.contains), strings.Count(held, "\n"), "the span holds its stream's lines, whole")
		for _, id := range w.contains {
			require.Contains(t, held, `"`+id+`"`)
		}
	}
	require.Equal(t, spans[0].End, spans[1].Start)
	require.Equal(t, spans[1].End, spans[2].Start)
	require.Equal(t, uint64(len(p)), spans[2].End)

	for name, bad := range map[string][]byte{
		"empty bundle":           cutlinetest.Bundle(),
		"stream split":           cutlinetest.Bundle(br{"a", 0, "x"}, br{"b", 0, "y"}, br{"a", 1, "z"}),
		"offsets not contiguous": cutlinetest.Bundle(br{"a", 0, "x"}, br{"a", 2, "y"}),
		"offsets going back":     cutlinetest.Bundle(br{"a", 1, "x"}, br{"a", 0, "y"}),
		"malformed line":         []byte("bundle\na|0|\"x\"\nnonsense\n"),
		"not a record":           []byte("nonsense"),
	} {
		_, err := cutlinetest.Locate(bad)
		require.Error(t, err, name)
	}
}

// bundleRun is a finished run of star-a whose flights bundle streams a, b
// and c (one is a plain Record): each submitted and acknowledged in the
// History, the first cover flights covered by the host. The rest are left
// to a successor's settlement, as a host that died after acknowledging
// them would.
type bundleRun struct {
	env     *cutlinetest.Env
	hist    *cutlinetest.History
	host    *cutlinetest.Party
	rec     *epoch.Record
	w       *chain.Writer
	flights []chain.Flight
}

func newBundleRun(t *testing.T, cover int) *bundleRun {
	ctx := t.Context()
	e := cutlinetest.NewMem(t, 3)
	run := &bundleRun{env: e, hist: &cutlinetest.History{}, host: e.Party(starA)}
	run.rec = run.host.Mint(starA, e.Constants(2, 8))
	run.w = run.host.Writer(run.rec, chain.WriterOptions{})
	for i, p := range [][]byte{
		cutlinetest.Bundle(br{"a", 0, "x0"}, br{"a", 1, "x1"}, br{"b", 0, "x2"}, br{"c", 0, "x3"}),
		cutlinetest.Record("a", 2, "x4"),
		cutlinetest.Bundle(br{"c", 1, "x5"}, br{"b", 1, "x6"}, br{"b", 2, "x7"}, br{"a", 3, "x8"}),
		cutlinetest.Bundle(br{"b", 3, "x9"}, br{"c", 2, "x10"}),
	} {
		run.append(t, "flight-"+string(rune('0'+i)), p)
	}
	for _, f := range run.flights[:cover] {
		require.NoError(t, run.host.Refs.Cover(ctx, starA, f))
	}
	return run
}

// append appends p, recording its submission and acknowledgement.
func (r *bundleRun) append(t *testing.T, id string, p []byte) chain.Flight {
	of := r.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: "host-a", Star: starA, ID: id, Payload: p})
	pos, err := r.w.Append(t.Context(), p)
	require.NoError(t, err)
	r.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: "host-a", Star: starA, ID: id, Of: of, Pos: pos})
	f := chain.Flight{Position: pos, Payload: p}
	r.flights = append(r.flights, f)
	return f
}

// close moves the checkpoint to slot cp, as a host that (says it) covered
// everything below it, and closes the writer cleanly.
func (r *bundleRun) close(t *testing.T, cp uint64) {
	_, err := r.w.Checkpoint(t.Context(), cp)
	require.NoError(t, err)
	require.NoError(t, r.w.Close(t.Context()))
}

// settle ends the host and has a successor settle its epoch.
func (r *bundleRun) settle(t *testing.T) {
	r.w.Abort()
	_, err := r.env.Party(starB).Settler.SettleAll(t.Context(), starA)
	require.NoError(t, err)
}

// A run of bundles is clean: every bundled record is found once through
// its stream's refs, though its flight is read once per stream.
func TestCheckBundles(t *testing.T) {
	for _, cover := range []int{4, 2, 0} {
		run := newBundleRun(t, cover)
		run.settle(t)
		cutlinetest.Require(t, run.env.Check(run.hist))
		b := run.env.Party("reader")
		require.Equal(t, []string{"x0", "x1", "x4", "x8"}, b.StreamIDs("a"))
		require.Equal(t, []string{"x2", "x6", "x7", "x9"}, b.StreamIDs("b"))
		require.Equal(t, []string{"x3", "x5", "x10"}, b.StreamIDs("c"))
		ids, pos := b.ChainIDs(starA)
		require.Equal(t, []string{"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10"}, ids)
		require.Equal(t, chain.Position{Epoch: run.rec.Epoch, Slot: 2}, pos[5])
		require.Equal(t, chain.Position{Epoch: run.rec.Epoch, Slot: 2}, pos[8])
	}
}

// requireViolation fails unless vs reports guarantee 5 with a message
// holding every part.
func requireViolation(t *testing.T, vs cutlinetest.Violations, parts ...string) {
	t.Helper()
	for _, v := range vs.Of(5) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(v.Msg, p)
		}
		if ok {
			return
		}
	}
	t.Fatalf("no violation of guarantee 5 says %q; got:\n%v", parts, vs.Err())
}

// An acknowledged record lost from the index inside an acknowledged
// bundle is reported, though the bundle's other records are found.
func TestCheckBundledRecordLost(t *testing.T) {
	run := newBundleRun(t, 3)
	// The host covers only stream b's span of the last bundle and closes
	// cleanly: x10 of stream c is never covered.
	spans, err := run.host.Refs.Locate(run.flights[3].Payload)
	require.NoError(t, err)
	require.Equal(t, "b", spans[0].Stream)
	require.NoError(t, run.host.Refs.CoverSpan(t.Context(), starA, run.flights[3].Position, spans[0]))
	run.close(t, 4)
	vs := run.env.Check(run.hist)
	requireViolation(t, vs, `"x10"`, "found 0 times in the index")
	require.Len(t, vs, 1, "only x10 is missing; got:\n%v", vs.Err())
}

// A bundled record acknowledged twice (republished in a later bundle at a
// new offset) is reported: its id is found twice.
func TestCheckBundledRecordDuplicated(t *testing.T) {
	run := newBundleRun(t, 4)
	f := run.append(t, "flight-4", cutlinetest.Bundle(br{"a", 4, "x1"}, br{"c", 3, "x11"}))
	require.NoError(t, run.host.Refs.Cover(t.Context(), starA, f))
	run.settle(t)
	vs := run.env.Check(run.hist)
	requireViolation(t, vs, `"x1"`, "found 2 times in the index as acknowledged")
	requireViolation(t, vs, `"x1"`, "found 2 times in chain order as acknowledged")
}

// A bundle written twice to the chain (the second time behind the host's
// back) holds every one of its records twice in chain order.
func TestCheckBundleCopiedInChain(t *testing.T) {
	run := newBundleRun(t, 4)
	_, err := run.w.Append(t.Context(), run.flights[2].Payload)
	require.NoError(t, err)
	run.close(t, 5) // the copy is not covered: its offsets are
	run.settle(t)
	vs := run.env.Check(run.hist)
	for _, id := range []string{"x5", "x6", "x7", "x8"} {
		requireViolation(t, vs, `"`+id+`"`, "found 2 times in chain order")
	}
}

// A ref whose bytes do not hold the records it claims is reported.
func TestCheckBundleRefBytesLie(t *testing.T) {
	run := newBundleRun(t, 3)
	spans, err := run.host.Refs.Locate(run.flights[3].Payload)
	require.NoError(t, err)
	require.NoError(t, run.host.Refs.CoverSpan(t.Context(), starA, run.flights[3].Position, spans[0]))
	lie := spans[1]            // stream c's record x10 …
	lie.Start = spans[0].Start // … at stream b's bytes
	lie.End = spans[0].End
	require.NoError(t, run.host.Refs.CoverSpan(t.Context(), starA, run.flights[3].Position, lie))
	run.close(t, 4)
	vs := run.env.Check(run.hist)
	requireViolation(t, vs, "the ref at offset 2 of stream c serves")
	requireViolation(t, vs, `"x10"`, "found 0 times in the index")
}
