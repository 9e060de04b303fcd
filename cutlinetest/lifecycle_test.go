package cutlinetest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/settle"
)

// compact rewrites the run's settled epoch into segments and trims its
// flights, as a host's compactor would.
func (r *bundleRun) compact(t *testing.T) {
	ctx := t.Context()
	p := r.env.Party("compactor")
	c, err := settle.NewCompactor(p.Minter, p.Zones, p.Refs, "compactor-1", settle.CompactorOptions{})
	require.NoError(t, err)
	rep, err := c.Compact(ctx, starA, r.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, rep.Checkpoint, rep.Rewritten, "every flight rewritten")
	tr, err := p.Settler.TrimRewritten(ctx, starA, r.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, rep.Rewritten, tr.Trimmed)
}

// Once compaction rewrote a run's flights into segments and trim deleted
// them, every record is still read once, from the segments: the checker
// and StreamIDs read as a consumer does, not through the flights.
func TestCheckAfterCompaction(t *testing.T) {
	for _, cover := range []int{4, 0} {
		run := newBundleRun(t, cover)
		run.settle(t)
		run.compact(t)
		cutlinetest.Require(t, run.env.Check(run.hist))
		b := run.env.Party("reader")
		require.Equal(t, []string{"x0", "x1", "x4", "x8"}, b.StreamIDs("a"))
		require.Equal(t, []string{"x2", "x6", "x7", "x9"}, b.StreamIDs("b"))
		require.Equal(t, []string{"x3", "x5", "x10"}, b.StreamIDs("c"))
		ids, _ := b.ChainIDs(starA)
		require.Empty(t, ids, "the chain's flights are trimmed")
	}
}

// Records below their stream's retention point are gone on purpose: the
// checker does not miss them, StreamIDs starts at the point, and a
// record above it that is lost is still reported.
func TestCheckAfterRetention(t *testing.T) {
	run := newBundleRun(t, 4)
	run.settle(t)
	host := run.host
	_, err := host.Refs.Retain(t.Context(), "a", 3) // x0, x1, x4 go
	require.NoError(t, err)
	_, err = host.Refs.Retain(t.Context(), "b", 4) // all of b
	require.NoError(t, err)
	cutlinetest.Require(t, run.env.Check(run.hist))
	b := run.env.Party("reader")
	require.Equal(t, []string{"x8"}, b.StreamIDs("a"))
	require.Empty(t, b.StreamIDs("b"))
	require.Equal(t, []string{"x3", "x5", "x10"}, b.StreamIDs("c"))

	// Compacted and trimmed below the point as well.
	run.compact(t)
	cutlinetest.Require(t, run.env.Check(run.hist))
	require.Equal(t, []string{"x8"}, b.StreamIDs("a"))
}

// Retention does not hide a record lost above the retention point.
func TestCheckRetentionKeepsReportingLosses(t *testing.T) {
	run := newBundleRun(t, 3)
	spans, err := run.host.Refs.Locate(run.flights[3].Payload)
	require.NoError(t, err)
	require.NoError(t, run.host.Refs.CoverSpan(t.Context(), starA, run.flights[3].Position, spans[0]))
	run.close(t, 4)
	_, err = run.host.Refs.Retain(t.Context(), "c", 1)
	require.NoError(t, err)
	vs := run.env.Check(run.hist)
	requireViolation(t, vs, `"x10"`, "found 0 times in the index")
	require.Len(t, vs, 1, "only x10 is missing; got:\n%v", vs.Err())
}
