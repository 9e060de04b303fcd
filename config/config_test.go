package config_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/config"
)

func TestError(t *testing.T) {
	cause := errors.New("the cause")
	err := error(&config.Error{Field: "window", Value: 0, Reason: "must be at least 1", Err: cause})
	require.ErrorIs(t, err, config.ErrInvalid)
	require.ErrorIs(t, err, cause, "the cause is reachable, not flattened into text")
	require.EqualError(t, err, "invalid window 0: must be at least 1: the cause")
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "window", ce.Field)
	require.EqualError(t, &config.Error{Field: "client", Reason: "nil"}, "invalid client: nil")
	require.NotErrorIs(t, &config.Error{Field: "x", Reason: "y"}, cause)
}
