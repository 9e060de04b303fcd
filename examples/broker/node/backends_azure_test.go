package node

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
)

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
