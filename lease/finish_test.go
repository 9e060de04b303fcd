package lease_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/lease"
)

// TestFinishRefusesUnknownReason: a departure records its reason in the
// clean-release mark, so Finish takes only the Reason constants. An empty
// or unknown one is a *cutline.ConfigError naming the field, and nothing is
// done: the stream stays held and appendable, no mark is written. Each
// constant is then taken.
func TestFinishRefusesUnknownReason(t *testing.T) {
	ctx := bounded(t)
	env := cutlinetest.NewMem(t, 3)
	a := startSnapStar(t, env, "star-a", env.Store, lease.Options{})
	_, err := a.star.Open(ctx, "s", lease.OpenOptions{})
	require.NoError(t, err)
	for _, r := range []lease.Reason{"", "Close", "closed", " close", "shutdown"} {
		err := a.star.Finish(ctx, "s", r)
		ce, ok := errors.AsType[*cutline.ConfigError](err)
		require.True(t, ok, "reason %q: got %v, want a *cutline.ConfigError", r, err)
		require.ErrorIs(t, err, cutline.ErrInvalid)
		require.Equal(t, "reason", ce.Field)
		require.Equal(t, string(r), ce.Value)
	}
	// The reason is judged before the stream is looked up.
	require.ErrorIs(t, a.star.Finish(ctx, "never-opened", ""), cutline.ErrInvalid)
	require.ErrorIs(t, a.star.Finish(ctx, "never-opened", lease.ReasonDrain), lease.ErrNotHeld)

	// Nothing was done: still held, still appendable, no mark.
	require.Len(t, a.star.Streams(), 1)
	a.appendN("s", 2)
	st, err := lease.Inspect(ctx, env.Store, "", "s")
	require.NoError(t, err)
	require.Nil(t, st.Mark)

	for i, r := range []lease.Reason{lease.ReasonClose, lease.ReasonHandoff, lease.ReasonDrain, lease.ReasonSupersede,
		lease.ReasonReestablish, lease.ReasonEvict} {
		if i > 0 {
			_, err := a.star.Open(ctx, "s", lease.OpenOptions{})
			require.NoError(t, err, "reopen before %s", r)
		}
		require.NoError(t, a.star.Finish(ctx, "s", r), "reason %s", r)
		st, err := lease.Inspect(ctx, env.Store, "", "s")
		require.NoError(t, err)
		require.NotNil(t, st.Mark, "reason %s", r)
		require.Equal(t, r, st.Mark.Reason)
	}
}
