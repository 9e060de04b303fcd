package node

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore/azblob"
)

// The backend flags take effect where the broker opens its backends: an
// etcd that requires TLS and a password is reached with the etcd flags
// (and refused without them), Azure zones are opened and verified, and
// filesystem zones get the permissions -zone-file-mode and
// -zone-dir-mode give.
func TestOpenBackendsUsesTheFlags(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("etcd over TLS", func(t *testing.T) {
		te := startTLSEtcd(t)
		env := map[string]string{"CUTLINE_ETCD_PASSWORD": etcdTestPassword}
		args := []string{"-role", "all", "-etcd", te.endpoint, "-etcd-ca", te.caFile, "-etcd-cert", te.certFile, "-etcd-key", te.keyFile, "-etcd-user", "broker", "-insecure", "-dir", t.TempDir()}
		cfg, err := parseFlags(args, func(k string) string { return env[k] }, os.Stderr)
		require.NoError(t, err)
		be, err := OpenBackends(t.Context(), cfg, log)
		require.NoError(t, err)
		be.Close()
		plain, err := parseFlags([]string{"-role", "all", "-etcd", te.endpoint, "-insecure", "-dir", t.TempDir()}, func(string) string { return "" }, os.Stderr)
		require.NoError(t, err)
		_, err = OpenBackends(t.Context(), plain, log)
		require.Error(t, err, "without the etcd flags the start-up ping is refused")
		require.NotContains(t, err.Error(), etcdTestPassword)
	})
	t.Run("azure zones", func(t *testing.T) {
		srv := testservers.StartAzurite(t, testservers.AzureOptions{})
		client, err := azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: srv.Endpoint, Account: srv.Account, Key: srv.Key})
		require.NoError(t, err)
		for _, c := range []string{"zone-a", "zone-b", "zone-c"} {
			_, err := client.CreateContainer(t.Context(), c, nil)
			require.NoError(t, err)
		}
		cfg, err := parseFlags([]string{"-insecure", "-ephemeral", "-azure-url", srv.Endpoint, "-azure-containers", "zone-a,zone-b,zone-c",
			"-azure-account", srv.Account, "-azure-key", srv.Key}, func(string) string { return "" }, os.Stderr)
		require.NoError(t, err)
		be, err := OpenBackends(t.Context(), cfg, log)
		require.NoError(t, err)
		defer be.Close()
		require.Len(t, be.Zones, 3)
		require.Equal(t, "zone-b", be.Zones[1].Name())
		require.NoError(t, be.Zones[1].Create(t.Context(), "probe", []byte("azure")))
		got, err := be.Zones[1].Get(t.Context(), "probe")
		require.NoError(t, err)
		require.Equal(t, "azure", string(got))
	})
	t.Run("zone modes", func(t *testing.T) {
		cfg, err := parseFlags([]string{"-insecure", "-ephemeral"}, func(string) string { return "" }, os.Stderr)
		require.NoError(t, err)
		be, err := OpenBackends(t.Context(), cfg, log)
		require.NoError(t, err)
		defer be.Close()
		dir := be.Dir
		require.NoError(t, be.Zones[0].Create(t.Context(), "a/probe", []byte("x")))
		fi, err := os.Stat(filepath.Join(dir, "zone-a", "a", "probe"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(filepath.Join(dir, "zone-a"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), di.Mode().Perm(), "the zone's directory")
	})
}
