//go:build unix

package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cutline/cutline/objstore"
)

func TestClassifyRead(t *testing.T) {
	for _, tc := range []struct {
		errno       error
		notFound    bool
		unavailable bool
		notRegular  bool
	}{
		{errno: unix.ENOENT, notFound: true},
		{errno: unix.ENOTDIR, notFound: true},
		{errno: unix.ELOOP, unavailable: true, notRegular: true},
		{errno: unix.ENOSPC, unavailable: true},
		{errno: unix.EIO, unavailable: true},
		{errno: unix.EACCES, unavailable: true},
		{errno: unix.EROFS, unavailable: true},
		{errno: unix.EMFILE, unavailable: true},
		{errno: errors.New("anything else"), unavailable: true},
	} {
		err := classifyRead(tc.errno)
		require.Equal(t, tc.notFound, errors.Is(err, objstore.ErrNotFound), "%v", tc.errno)
		require.Equal(t, tc.unavailable, errors.Is(err, objstore.ErrUnavailable), "%v", tc.errno)
		require.Equal(t, tc.notRegular, errors.Is(err, ErrNotRegular), "%v", tc.errno)
		if tc.unavailable && !tc.notRegular {
			require.ErrorIs(t, err, tc.errno, "the cause is kept")
		}
	}
}

func TestSplitKey(t *testing.T) {
	root := "/srv/zone-a"
	segs, err := splitKey(root, "p/s/1")
	require.NoError(t, err)
	require.Equal(t, []string{"p", "s", "1"}, segs)
	for _, k := range []string{"../x", "a/../../x", "/etc/passwd", TempDir, TempDir + "/x", "a/" + strings.Repeat("x", 256)} {
		_, err := splitKey(root, k)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, k)
	}
}

// TestCreateOverEmptyDirectory: an empty directory left where an object is
// wanted (a prune that lost a race) does not block the create.
func TestCreateOverEmptyDirectory(t *testing.T) {
	ctx := t.Context()
	b, err := New(t.TempDir(), Options{NoSync: true})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, os.Mkdir(filepath.Join(b.Root(), "a"), 0o755))
	require.NoError(t, b.Create(ctx, "a", []byte("x")))
	got, err := b.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
}
