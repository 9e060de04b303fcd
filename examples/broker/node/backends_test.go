package node

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
	"github.com/cutline/cutline/objstore/fs"
)

// The S3 zones: credentials and region from the standard AWS environment
// unless the flags (or their CUTLINE_ variables) give them, and a zone
// set that names one store twice refused before anything starts.
func TestS3Flags(t *testing.T) {
	aws := map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "from-the-environment", "AWS_REGION": "eu-west-3"}
	getenv := func(k string) string { return aws[k] }
	s3 := []string{"-s3-endpoint", "https://s3.example.com", "-s3-buckets", "a,b,c"}

	cfg, err := parseFlags(s3, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "AKID", cfg.S3AccessKey)
	require.Equal(t, "from-the-environment", cfg.S3SecretKey)
	require.Equal(t, "eu-west-3", cfg.S3Region)

	cfg, err = parseFlags(append(s3, "-s3-access-key", "K", "-s3-secret-key", "S", "-s3-region", "us-east-2"), getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"K", "S", "us-east-2"}, []string{cfg.S3AccessKey, cfg.S3SecretKey, cfg.S3Region}, "the flags beat the environment")

	cfg, err = parseFlags(nil, getenv, io.Discard)
	require.NoError(t, err, "filesystem zones ignore the AWS environment")
	require.Empty(t, cfg.S3AccessKey)

	_, err = parseFlags([]string{"-s3-endpoint", "https://s3.example.com", "-s3-buckets", "a,b,a"}, getenv, io.Discard)
	require.ErrorContains(t, err, `-s3-buckets a,b,a: want one distinct store per zone: bucket "a" is given for zone-a and zone-c`)
}

// parseAzure parses args, with S3 zones too when s3 is set, and returns
// the Azure containers and K.
func parseAzure(t *testing.T, s3 bool, args ...string) (*Settings, int, error) {
	t.Helper()
	if s3 {
		args = append(args, "-s3-endpoint", "https://s3.example.com", "-s3-buckets", "a,b,c")
	}
	cfg, err := parseFlags(append(args, "-ephemeral"), func(string) string { return "" }, io.Discard)
	if err != nil {
		return nil, 0, err
	}
	return cfg, cfg.K, nil
}

// The Azure zone flags: the number of containers is K, and a zone set
// that names one container twice, or flags that do not go together, are
// refused before anything starts.
func TestAzureZoneFlags(t *testing.T) {
	a, k, err := parseAzure(t, false, "-azure-url", "https://acct.blob.core.windows.net/", "-azure-containers", "a1,b1,c1,d1",
		"-azure-account", "acct", "-azure-key", "a2V5")
	require.NoError(t, err)
	require.Equal(t, 4, k)
	require.Equal(t, []string{"a1", "b1", "c1", "d1"}, a.azureContainers)

	_, _, err = parseAzure(t, false)
	require.NoError(t, err, "no Azure zones")

	for _, tc := range []struct {
		s3   bool
		args []string
		want string
	}{
		{false, []string{"-azure-containers", "a1"}, "need -azure-url"},
		{false, []string{"-azure-key", "a2V5"}, "need -azure-url"},
		{true, []string{"-azure-url", "https://h/", "-azure-containers", "a1"}, "zones of one kind"},
		{false, []string{"-azure-url", "https://h/"}, "needs -azure-containers"},
		{false, []string{"-azure-url", "https://h/,https://i/", "-azure-containers", "a1,b1,c1"}, "2 URLs in -azure-url for 3 containers"},
		{false, []string{"-azure-url", "ftp://h/", "-azure-containers", "a1"}, "-azure-url (URL 1): want http or https"},
		{false, []string{"-azure-url", "https://u:sig@h/", "-azure-containers", "a1"}, "want http or https"},
		{false, []string{"-azure-url", "https://h/", "-azure-containers", "a1,,c1"}, "none empty"},
		{false, []string{"-azure-url", "https://h/", "-azure-containers", "a1,b1,a1"}, `container "a1" is given for zone-a and zone-c`},
		{false, []string{"-azure-url", "https://H/,https://h", "-azure-containers", "a1,a1"}, `container "a1" is given for zone-a and zone-b`},
		{false, []string{"-azure-url", "https://h/", "-azure-containers", "a1", "-azure-account", "acct"}, "go together"},
		{false, []string{"-azure-url", "https://h/", "-azure-containers", "a1,b1", "-k", "3"}, "-k 3: want 2, the number of containers"},
	} {
		_, _, err := parseAzure(t, tc.s3, tc.args...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
		require.NotContains(t, err.Error(), "sig", "a URL that may carry a SAS is not echoed")
	}
	_, _, err = parseAzure(t, false, "-azure-url", "https://h/,https://i/", "-azure-containers", "a1,a1")
	require.NoError(t, err, "one container name in two accounts is two stores")
}

// TestAzureZonesOpen opens Azurite containers as the broker's zones: they
// pass the start-up check, one container reached under two spellings of
// its server fails it, and the key is not in the log.
func TestAzureZonesOpen(t *testing.T) {
	srv := testservers.StartAzurite(t, testservers.AzureOptions{})
	client, err := azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: srv.Endpoint, Account: srv.Account, Key: srv.Key})
	require.NoError(t, err)
	for _, c := range []string{"zone-a", "zone-b", "zone-c"} {
		_, err := client.CreateContainer(t.Context(), c, nil)
		require.NoError(t, err)
	}
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	open := func(urls string, containers string) []objstore.Bucket {
		cfg, _, err := parseAzure(t, false, "-azure-url", urls, "-azure-containers", containers,
			"-azure-account", srv.Account, "-azure-key", srv.Key)
		require.NoError(t, err)
		be := &Backends{}
		require.NoError(t, be.openZones(t.Context(), cfg, log))
		t.Cleanup(be.Close)
		return be.Zones
	}
	zones := open(srv.Endpoint, "zone-a,zone-b,zone-c")
	require.Equal(t, []string{"zone-a", "zone-b", "zone-c"}, []string{zones[0].Name(), zones[1].Name(), zones[2].Name()})
	require.NoError(t, objstore.VerifyZones(t.Context(), zones, objstore.VerifyOptions{}))

	other := strings.Replace(srv.Endpoint, "127.0.0.1", "localhost", 1)
	zones = open(srv.Endpoint+","+other+","+srv.Endpoint, "zone-a,zone-a,zone-c")
	err = objstore.VerifyZones(t.Context(), zones, objstore.VerifyOptions{})
	require.ErrorIs(t, err, objstore.ErrAliased, "the start-up check catches what the flags cannot")
	require.NotContains(t, logged.String(), srv.Key)
	require.Contains(t, logged.String(), "zone: Azure")
}

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
