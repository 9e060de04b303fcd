package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/roll"
)

// Refused options name one field each, and nothing is written: the star
// is not registered and no epoch is minted.
func TestStartRefusesOptions(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	p := env.Party("star-a")
	sess, err := env.Store.NewSession(bounded(t), time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	cfg := lease.Config{Star: "star-a", Store: env.Store, Session: sess, Minter: p.Minter, Settler: p.Settler, Index: p.Refs,
		Constants: env.Constants(2, 8)}
	for field, opts := range map[string]lease.Options{
		"AbsorbEvery": {AbsorbEvery: -1},
		"Backoff.Min": {Backoff: clock.Backoff{Min: -time.Second}},
		"Backoff.Max": {Backoff: clock.Backoff{Min: time.Minute, Max: time.Second}},
		"Roller.Republish": {Roller: roll.Options{
			Republish: func(context.Context, *epoch.Record, [][]byte) ([]error, error) { return nil, nil }}},
		"Roller.Admit": {Roller: roll.Options{Admit: func([]byte) error { return nil }}},
	} {
		_, err := lease.Start(bounded(t), cfg, opts)
		require.ErrorIs(t, err, cutline.ErrInvalid, field)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, field)
		require.Equal(t, field, ce.Field)
	}
	kvs, _, err := env.Store.List(bounded(t), "")
	require.NoError(t, err)
	require.Empty(t, kvs, "nothing written")
}
