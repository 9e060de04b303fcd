package cutline_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
)

func TestConfigError(t *testing.T) {
	cause := errors.New("the cause")
	err := error(&cutline.ConfigError{Field: "window", Value: 0, Reason: "must be at least 1", Err: cause})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	require.ErrorIs(t, err, cause, "the cause is reachable, not flattened into text")
	require.EqualError(t, err, "invalid window 0: must be at least 1: the cause")
	var ce *cutline.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "window", ce.Field)
	require.EqualError(t, &cutline.ConfigError{Field: "client", Reason: "nil"}, "invalid client: nil")
	require.NotErrorIs(t, &cutline.ConfigError{Field: "x", Reason: "y"}, cause)
}
