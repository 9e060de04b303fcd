package testctx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testctx"
)

func TestExpiring(t *testing.T) {
	ctx := testctx.NewExpiring()
	require.NoError(t, ctx.Err())
	select {
	case <-ctx.Done():
		t.Fatal("done before Expire")
	default:
	}
	_, ok := ctx.Deadline()
	require.False(t, ok)

	child, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx.Expire()
	ctx.Expire() // a second call does nothing
	<-ctx.Done()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	<-child.Done()
	require.ErrorIs(t, child.Err(), context.DeadlineExceeded, "a derived context ends with it")
}
