package objstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		key    string
		reason string // "" = valid
	}{
		{"a", ""},
		{"prefix/star/00000001/00000002", ""},
		{".cutline-verify/x", ""},
		{".hidden/..dots/.../x", ""},
		{"ünï/鍵 with space", ""},
		{strings.Repeat("k", objstore.MaxKeyLen), ""},
		{"", "empty"},
		{strings.Repeat("k", objstore.MaxKeyLen+1), "longer than"},
		{"bad\xff", "UTF-8"},
		{"/a", "leading"},
		{"a/", "trailing"},
		{"a//b", "empty path segment"},
		{".", `"."`},
		{"..", `".."`},
		{"a/../b", `".."`},
		{"a/./b", `"."`},
		{"nul\x00", "control"},
		{"nl\n", "control"},
		{"del\x7f", "control"},
		{"c1\u0085", "control"},
		{"back\\slash", "backslash"},
	} {
		err := objstore.ValidateKey(tc.key)
		if tc.reason == "" {
			require.NoError(t, err, "%q", tc.key)
			continue
		}
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "%q", tc.key)
		var ke *objstore.KeyError
		require.True(t, errors.As(err, &ke))
		require.Contains(t, ke.Reason, tc.reason, "%q", tc.key)
		require.Equal(t, tc.key, ke.Key)
		require.LessOrEqual(t, len(err.Error()), 200, "long keys are truncated in messages")
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "a", "a/", "a/b/", "a/b"} {
		require.NoError(t, objstore.ValidatePrefix(p), "%q", p)
	}
	for _, p := range []string{"/", "//", "/a", "a//", "../", "a/../", "a\x00"} {
		require.ErrorIs(t, objstore.ValidatePrefix(p), objstore.ErrInvalidKey, "%q", p)
	}
}

func TestErrorsUnwrap(t *testing.T) {
	cause := errors.New("connection reset by peer")
	err := error(&objstore.OpError{Op: "get", Bucket: "zone-a", Key: "k", Err: objstore.Unavailable(cause)})
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.ErrorIs(t, err, cause)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	require.Equal(t, "objstore get zone-a/k: objstore: unavailable: connection reset by peer", err.Error())
	require.Equal(t, objstore.ErrUnavailable, objstore.Unavailable(nil))
}
