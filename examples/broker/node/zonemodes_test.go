package node

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore/fs"
)

// The filesystem zones' objects and directories are the owner's only by
// default (0600 and 0700), or what -zone-file-mode and -zone-dir-mode
// say; a permission that keeps the broker out of its own zones is
// refused.
func TestZoneModes(t *testing.T) {
	perm := func(args ...string) (file, dir os.FileMode) {
		t.Helper()
		cfg := testSettings(t, args...)
		root := filepath.Join(t.TempDir(), "zones", "zone-a")
		b, err := fs.New(root, cfg.zoneOptions("zone-a"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		require.NoError(t, b.Create(t.Context(), "streams/broker-1/1/0", []byte("a record")))
		fi, err := os.Stat(filepath.Join(root, "streams", "broker-1", "1", "0"))
		require.NoError(t, err)
		di, err := os.Stat(filepath.Join(root, "streams", "broker-1"))
		require.NoError(t, err)
		ri, err := os.Stat(root)
		require.NoError(t, err)
		require.Equal(t, di.Mode().Perm(), ri.Mode().Perm(), "the zone's root too")
		return fi.Mode().Perm(), di.Mode().Perm()
	}
	file, dir := perm()
	require.Equal(t, os.FileMode(0o600), file)
	require.Equal(t, os.FileMode(0o700), dir)
	file, dir = perm("-zone-file-mode", "0640", "-zone-dir-mode", "0750")
	require.Equal(t, os.FileMode(0o640)&^umask(t), file)
	require.Equal(t, os.FileMode(0o750)&^umask(t), dir)

	for _, bad := range [][]string{{"-zone-file-mode", "0400"}, {"-zone-dir-mode", "0600"}, {"-zone-file-mode", "0888"}, {"-zone-file-mode", "rw"}} {
		_, err := parseFlags(bad, func(string) string { return "" }, io.Discard)
		require.Error(t, err, "%v", bad)
	}
}

// umask is the process's umask, as a file made with 0777 shows it.
func umask(t *testing.T) os.FileMode {
	t.Helper()
	p := filepath.Join(t.TempDir(), "probe")
	require.NoError(t, os.Mkdir(p, 0o777))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return 0o777 &^ fi.Mode().Perm()
}
