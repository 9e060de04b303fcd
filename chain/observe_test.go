package chain_test

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
)

// TestTallySlot: only identical verified copies count together, and two
// different flights are a conflict naming a bucket outside the largest
// group.
func TestTallySlot(t *testing.T) {
	x := chain.Observation{State: chain.SlotFlight, Whole: true, Digest: sha256.Sum256([]byte("x"))}
	y := chain.Observation{State: chain.SlotFlight, Whole: true, Digest: sha256.Sum256([]byte("y"))}
	p := chain.Observation{State: chain.SlotPoison}
	e := chain.Observation{State: chain.SlotEmpty}
	u := chain.Observation{State: chain.SlotUnreachable}
	f := chain.Observation{State: chain.SlotForeign}

	got := chain.TallySlot([]chain.Observation{x, x, e})
	require.Equal(t, 2, got.Copies)
	require.Equal(t, []int{0, 1}, got.Holders)
	require.False(t, got.Conflict)
	require.Equal(t, -1, got.ConflictAt)
	require.Equal(t, 1, got.Empty)

	got = chain.TallySlot([]chain.Observation{y, x, x})
	require.Equal(t, 2, got.Copies)
	require.Equal(t, []int{1, 2}, got.Holders)
	require.True(t, got.Conflict)
	require.Equal(t, 0, got.ConflictAt)

	got = chain.TallySlot([]chain.Observation{x, y, p, u, f})
	require.Equal(t, 1, got.Copies)
	require.True(t, got.Conflict)
	require.Equal(t, 1, got.ConflictAt)
	require.Equal(t, 1, got.Poisons)
	require.Equal(t, 1, got.Unreachable)
	require.Equal(t, 1, got.Foreign)

	got = chain.TallySlot([]chain.Observation{p, e, u})
	require.Zero(t, got.Copies)
	require.Empty(t, got.Holders)
	require.False(t, got.Conflict)
}
