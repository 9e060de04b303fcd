package epoch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
)

// TestClaimOnce: only the record Mint returned carries the right to write
// its epoch, once; a record read back (after a restart, say) carries none.
func TestClaimOnce(t *testing.T) {
	e := newEnv(t)
	r, err := e.m.Mint(context.Background(), "s1", standard())
	require.NoError(t, err)
	back := e.get(t, "s1", r.Epoch)
	_, err = back.Claim()
	require.ErrorIs(t, err, epoch.ErrNotMinted)
	for rec, err := range e.m.Epochs(context.Background(), "s1") {
		require.NoError(t, err)
		_, err = rec.Claim()
		require.ErrorIs(t, err, epoch.ErrNotMinted)
	}
	var zero epoch.Record
	_, err = zero.Claim()
	require.ErrorIs(t, err, epoch.ErrNotMinted)
	_, err = (*epoch.Record)(nil).Claim()
	require.ErrorIs(t, err, epoch.ErrNotMinted)

	cl, err := r.Claim()
	require.NoError(t, err)
	require.Equal(t, r.Epoch, cl.Record().Epoch)
	_, err = r.Claim()
	require.ErrorIs(t, err, epoch.ErrClaimed)
	dup := *r
	_, err = dup.Claim()
	require.ErrorIs(t, err, epoch.ErrClaimed, "a copy shares the claim")
}

// TestWindowBounded: the window has a documented maximum, refused at mint.
func TestWindowBounded(t *testing.T) {
	e := newEnv(t)
	for _, w := range []int{0, -1, epoch.MaxWindow + 1, 1 << 40, 1 << 62} {
		c := standard()
		c.Window = w
		_, err := e.m.Mint(context.Background(), "s1", c)
		require.ErrorIs(t, err, cutline.ErrInvalid, "window %d", w)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "window", ce.Field)
	}
	c := standard()
	c.Window = epoch.MaxWindow
	_, err := e.m.Mint(context.Background(), "s1", c)
	require.NoError(t, err)
	require.Equal(t, []string{e.m.ChainKey("s1"), e.m.RecordKey("s1", 1)}, e.keys(t), "only the valid mint wrote")
}
