package metastore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

func TestValidateKey(t *testing.T) {
	cases := []struct {
		key string
		ok  bool
	}{
		{"chains/a", true},
		{"streams/s-1/writer", true},
		{"ünïcode/ok", true},
		{strings.Repeat("k", 1024), true},
		{"", false},
		{strings.Repeat("k", 1025), false},
		{"a\x00b", false},
		{"tab\there", false},
		{"del\x7f", false},
	}
	for _, tc := range cases {
		err := metastore.ValidateKey(tc.key)
		if tc.ok {
			assert.NoError(t, err, "%q", tc.key)
		} else {
			assert.ErrorIs(t, err, metastore.ErrInvalidKey, "%q", tc.key)
		}
	}
}

func TestConflictError(t *testing.T) {
	var err error = &metastore.ConflictError{Key: "chains/a", Expected: 4, Revision: 9}
	wrapped := errors.Join(errors.New("mint"), err)
	require.ErrorIs(t, wrapped, metastore.ErrConflict)
	var ce *metastore.ConflictError
	require.ErrorAs(t, wrapped, &ce)
	assert.Equal(t, int64(9), ce.Revision)
	assert.Contains(t, err.Error(), `"chains/a"`)
	assert.Contains(t, err.Error(), "expected revision 4, found 9")
}

func TestUnavailableKeepsCause(t *testing.T) {
	cause := context.DeadlineExceeded
	err := metastore.Unavailable(cause)
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	require.ErrorIs(t, err, cause)
	assert.NotErrorIs(t, err, metastore.ErrNotFound)
	assert.Contains(t, err.Error(), "unavailable")
	assert.Contains(t, err.Error(), cause.Error())
}

func TestEventTypeString(t *testing.T) {
	assert.Equal(t, "put", metastore.EventPut.String())
	assert.Equal(t, "delete", metastore.EventDelete.String())
	assert.Equal(t, "EventType(7)", metastore.EventType(7).String())
}
