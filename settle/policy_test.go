package settle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/settle"
)

// coverMinutes covers flights [from, to) of starA's epoch 1, one a
// minute on clk: each carries one offset of stream (10 bytes) and one of
// "other".
func coverMinutes(t *testing.T, x *settle.RefIndex, clk *clock.Fake, from, to uint64) {
	t.Helper()
	for i := from; i < to; i++ {
		clk.Advance(time.Minute)
		require.NoError(t, x.CoverFlights(context.Background(), starA, []settle.Placed{{Position: chain.Position{Epoch: 1, Slot: i},
			Spans: []settle.Span{{Stream: stream, Offset: i, Count: 1, Start: 0, End: 10}, {Stream: "other", Offset: i, Count: 1, Start: 10, End: 20}}}}))
	}
}

// Retention by age drops whole pages whose newest span is older than
// MaxAge on the index's clock; by size it keeps the newest spans that fit;
// by records the newest offsets. The limit that keeps least wins, and the
// point never moves down.
func TestRetainPolicy(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	store := memstore.New(memstore.Options{})
	x, err := settle.NewRefIndex(store, "tenant/", locateRuns)
	require.NoError(t, err)
	x.WithClock(clk)
	coverMinutes(t, x, clk, 0, 200)
	// Pages [0,64) [64,128) [128,192) [192,200); their newest spans joined
	// 136, 72, 8 and 0 minutes ago.
	require.Len(t, pageKeys(t, store, "tenant/", stream), 4)

	rep, err := x.RetainPolicy(ctx, stream, settle.Policy{})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream}, rep, "the zero Policy keeps everything")

	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: 100 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 64, PagesDeleted: 1, By: settle.ByAge}, rep)

	clk.Advance(time.Hour) // now 196, 132, 68 and 60 minutes ago
	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: 100 * time.Minute, MaxRecords: 150})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 128, PagesDeleted: 1, By: settle.ByAge}, rep)

	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: 100 * time.Minute, MaxRecords: 50})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 150, By: settle.ByRecords}, rep)

	// 255 bytes hold 25 spans of 10 bytes: the stream starts at 175.
	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxBytes: 255, MaxRecords: 50})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 175, By: settle.ByBytes}, rep)
	_, err = x.Find(ctx, stream, 174)
	require.ErrorIs(t, err, settle.ErrBelowRetention)

	// A looser policy never moves the point down.
	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxRecords: 100})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 175}, rep)

	// Everything old enough: the last page stays and says where the
	// stream goes on.
	clk.Advance(24 * time.Hour)
	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: time.Hour})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 200, PagesDeleted: 1, By: settle.ByAge}, rep)
	next, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(200), next)
	// "other" was never touched.
	start, err := x.Start(ctx, "other")
	require.NoError(t, err)
	require.Zero(t, start)
}

// Pages written without a clock (by an earlier release, or an index
// given none) are never old enough by age: retention by age stops at the
// first of them, while retention by records or size passes them.
func TestRetainPolicyPagesWithoutTime(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	store := memstore.New(memstore.Options{})
	old, err := settle.NewRefIndex(store, "tenant/", locateRuns)
	require.NoError(t, err)
	coverMinutes(t, old, clk, 0, 64)
	x, err := settle.NewRefIndex(store, "tenant/", locateRuns)
	require.NoError(t, err)
	x.WithClock(clk)
	coverMinutes(t, x, clk, 64, 200)

	clk.Advance(24 * time.Hour)
	rep, err := x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: time.Hour})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream}, rep)

	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: time.Hour, MaxRecords: 140})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 60, By: settle.ByRecords}, rep)
	// Once the pages without a time are gone, age takes over.
	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: time.Hour, MaxRecords: 136})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 64, PagesDeleted: 1, By: settle.ByRecords}, rep)
	rep, err = x.RetainPolicy(ctx, stream, settle.Policy{MaxAge: time.Hour})
	require.NoError(t, err)
	require.Equal(t, settle.RetainReport{Stream: stream, Start: 200, PagesDeleted: 2, By: settle.ByAge}, rep)

	// An index without a clock cannot judge age; negative limits are
	// refused.
	_, err = old.RetainPolicy(ctx, "other", settle.Policy{MaxAge: time.Hour})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = x.RetainPolicy(ctx, "other", settle.Policy{MaxBytes: -1})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = x.RetainPolicy(ctx, "other", settle.Policy{MaxAge: -time.Second})
	require.ErrorIs(t, err, cutline.ErrInvalid)
}
