package wire_test

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain/wire"
)

// TestTallySlot: only identical verified copies count together, and two
// different flights are a conflict naming a bucket outside the largest
// group.
func TestTallySlot(t *testing.T) {
	x := wire.Observation{State: wire.SlotFlight, Whole: true, Digest: sha256.Sum256([]byte("x"))}
	y := wire.Observation{State: wire.SlotFlight, Whole: true, Digest: sha256.Sum256([]byte("y"))}
	p := wire.Observation{State: wire.SlotPoison}
	e := wire.Observation{State: wire.SlotEmpty}
	u := wire.Observation{State: wire.SlotUnreachable}
	f := wire.Observation{State: wire.SlotForeign}

	got := wire.TallySlot([]wire.Observation{x, x, e})
	require.Equal(t, 2, got.Copies)
	require.Equal(t, []int{0, 1}, got.Holders)
	require.False(t, got.Conflict)
	require.Equal(t, -1, got.ConflictAt)
	require.Equal(t, 1, got.Empty)

	got = wire.TallySlot([]wire.Observation{y, x, x})
	require.Equal(t, 2, got.Copies)
	require.Equal(t, []int{1, 2}, got.Holders)
	require.True(t, got.Conflict)
	require.Equal(t, 0, got.ConflictAt)

	got = wire.TallySlot([]wire.Observation{x, y, p, u, f})
	require.Equal(t, 1, got.Copies)
	require.True(t, got.Conflict)
	require.Equal(t, 1, got.ConflictAt)
	require.Equal(t, 1, got.Poisons)
	require.Equal(t, 1, got.Unreachable)
	require.Equal(t, 1, got.Foreign)

	got = wire.TallySlot([]wire.Observation{p, e, u})
	require.Zero(t, got.Copies)
	require.Empty(t, got.Holders)
	require.False(t, got.Conflict)
}
