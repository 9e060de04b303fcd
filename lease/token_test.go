package lease_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/lease"
)

// TestTokenExactEquality: a producer fencing token passes only when it is
// the installed one, byte for byte: a truncated form of it, an extended
// one or one that differs in its last byte is stale, on an Any stream as
// on a Fenced one, at a one-shot append (CheckToken) as at Open.
func TestTokenExactEquality(t *testing.T) {
	const tok = "producer-7f3a9c"
	type presented struct {
		name, token string
	}
	forms := []presented{
		{"truncated by one byte", tok[:len(tok)-1]},
		{"its first byte", tok[:1]},
		{"extended by one byte", tok + "0"},
		{"extended by itself", tok + tok},
		{"its last byte changed", tok[:len(tok)-1] + "d"},
	}
	cases := []struct {
		mode lease.Mode
		presented
		pass bool
	}{
		{lease.Any, presented{"the installed token", tok}, true},
		{lease.Any, presented{"no token", ""}, true},
		{lease.Fenced, presented{"the installed token", tok}, true},
		{lease.Fenced, presented{"no token", ""}, false},
	}
	for _, mode := range []lease.Mode{lease.Any, lease.Fenced} {
		for _, p := range forms {
			cases = append(cases, struct {
				mode lease.Mode
				presented
				pass bool
			}{mode, p, false})
		}
	}

	env := cutlinetest.NewMem(t, 3)
	s := startSnapStar(t, env, "star-a", env.Store, lease.Options{}).star
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s/%s", c.mode, c.name), func(t *testing.T) {
			ctx := bounded(t)
			stream := fmt.Sprintf("s%d", i)
			ten, err := s.Fence(ctx, stream, c.mode, tok)
			require.NoError(t, err, "install the token")
			require.Nil(t, ten, "the star does not hold the stream")

			err = s.CheckToken(ctx, stream, c.token)
			if c.pass {
				require.NoError(t, err, "CheckToken")
			} else {
				te, ok := errors.AsType[*lease.TokenError](err)
				require.True(t, ok, "CheckToken: got %v, want a *TokenError", err)
				require.ErrorIs(t, err, lease.ErrStaleToken)
				require.Equal(t, c.token != "", te.Presented)
			}

			_, err = s.Open(ctx, stream, lease.OpenOptions{Token: c.token})
			if !c.pass {
				require.ErrorIs(t, err, lease.ErrStaleToken, "Open")
				require.Empty(t, s.Streams(), "a refused open holds nothing")
				return
			}
			require.NoError(t, err, "Open")
			require.NoError(t, s.Finish(ctx, stream, lease.ReasonHandoff))
		})
	}
}
