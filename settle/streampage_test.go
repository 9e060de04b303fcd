package settle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/settle"
)

// settledBroker is deadBroker's world with broker-1's epoch settled: n
// records of "orders", one per flight, covered in the index.
func settledBroker(t *testing.T, n int) (deadWorld, *settle.Settler, *settle.StreamReader) {
	t.Helper()
	ctx := context.Background()
	x := deadBroker(ctx, n)
	fencer, err := fence.New(x.minter, x.zones, fence.Options{Identity: "broker-2"})
	require.NoError(t, err)
	settler, err := settle.New(x.minter, x.zones, x.refs, settle.Options{Fencer: fencer})
	require.NoError(t, err)
	_, err = settler.SettleAll(ctx, "broker-1")
	require.NoError(t, err)
	r, err := settle.NewStreamReader(x.minter, x.zones, x.refs, settle.StreamReaderOptions{})
	require.NoError(t, err)
	return x, settler, r
}

// A page stops before the extent that would pass a bound, holds one
// extent at least, and says where the next starts and where the stream
// ends; read page after page, the stream comes back whole, once.
func TestPageBounds(t *testing.T) {
	ctx := context.Background()
	x, _, r := settledBroker(t, 20)
	offsets := func(p settle.Page) (out []uint64) {
		for _, e := range p.Extents {
			out = append(out, e.Offset)
		}
		return out
	}
	flat := func(settle.Extent) int64 { return 10 }
	for _, tc := range []struct {
		name string
		from uint64
		lim  settle.PageLimits
		want []uint64
		next uint64
	}{
		{"records", 3, settle.PageLimits{MaxRecords: 2}, []uint64{3, 4}, 5},
		{"cost", 0, settle.PageLimits{MaxBytes: 35, Cost: flat}, []uint64{0, 1, 2}, 3},
		{"cost exactly", 0, settle.PageLimits{MaxBytes: 30, Cost: flat}, []uint64{0, 1, 2}, 3},
		{"both", 0, settle.PageLimits{MaxRecords: 2, MaxBytes: 35, Cost: flat}, []uint64{0, 1}, 2},
		{"one at least", 7, settle.PageLimits{MaxBytes: 1}, []uint64{7}, 8},
		{"to the end", 17, settle.PageLimits{}, []uint64{17, 18, 19}, 20},
		{"at the end", 20, settle.PageLimits{MaxRecords: 5}, nil, 20},
		{"past the end", 25, settle.PageLimits{MaxRecords: 5}, nil, 25},
	} {
		p, err := x.refs.Page(ctx, "orders", tc.from, tc.lim)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, offsets(p), tc.name)
		require.Equal(t, tc.next, p.Continue, tc.name)
		require.Equal(t, uint64(20), p.Next, tc.name)
	}

	// The default cost is the extent's bytes.
	p, err := x.refs.Page(ctx, "orders", 0, settle.PageLimits{MaxBytes: 40})
	require.NoError(t, err)
	var used uint64
	for _, e := range p.Extents {
		used += e.End - e.Start
	}
	require.LessOrEqual(t, used, uint64(40))
	require.Greater(t, used+uint64(len("orders 2 item-2")), uint64(40), "the next record would not fit")

	var got []string
	for from := uint64(0); from < 20; {
		p, err := x.refs.Page(ctx, "orders", from, settle.PageLimits{MaxRecords: 3})
		require.NoError(t, err)
		require.NotEmpty(t, p.Extents)
		for c, err := range r.ReadPage(ctx, p) {
			require.NoError(t, err)
			got = append(got, string(c.Data))
		}
		from = p.Continue
	}
	require.Len(t, got, 20)
	for i, s := range got {
		require.Equal(t, fmt.Sprintf("orders %d item-%d", i, i), s)
	}

	p, err = x.refs.Page(ctx, "unknown", 0, settle.PageLimits{MaxRecords: 3})
	require.NoError(t, err)
	require.Equal(t, settle.Page{Stream: "unknown"}, p, "a stream never covered ends at 0")
}

// A negative bound or cost is refused as invalid; a page below the
// retention point is a *TrimmedError.
func TestPageRefusals(t *testing.T) {
	ctx := context.Background()
	x, _, _ := settledBroker(t, 10)
	_, err := x.refs.Page(ctx, "orders", 0, settle.PageLimits{MaxBytes: -1})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = x.refs.Page(ctx, "orders", 0, settle.PageLimits{MaxBytes: 100, Cost: func(settle.Extent) int64 { return -1 }})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = x.refs.Retain(ctx, "orders", 4)
	require.NoError(t, err)
	_, err = x.refs.Page(ctx, "orders", 2, settle.PageLimits{MaxRecords: 3})
	te, ok := errors.AsType[*settle.TrimmedError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, uint64(4), te.Start)
}

// A page planned before retention dropped its records and the flights
// holding them were trimmed reads as a *TrimmedError saying where the
// stream now starts, not as data no bucket serves.
func TestReadPageTrimmedMeanwhile(t *testing.T) {
	ctx := context.Background()
	x, settler, r := settledBroker(t, 130)
	p, err := x.refs.Page(ctx, "orders", 0, settle.PageLimits{MaxRecords: 10})
	require.NoError(t, err)
	require.Len(t, p.Extents, 10)
	_, err = x.refs.Retain(ctx, "orders", 120)
	require.NoError(t, err)
	rep, err := settler.TrimUnneeded(ctx, x.refs, "broker-1", x.rec.Epoch)
	require.NoError(t, err)
	require.NotZero(t, rep.Trimmed, "the page's flights are gone")
	n := 0
	for _, err := range r.ReadPage(ctx, p) {
		n++
		te, ok := errors.AsType[*settle.TrimmedError](err)
		require.True(t, ok, "%v", err)
		require.Equal(t, uint64(120), te.Start)
		require.Equal(t, uint64(0), te.Offset)
	}
	require.Equal(t, 1, n, "the first chunk fails, and ends the read")
}
