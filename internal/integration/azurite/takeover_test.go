package azurite_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/stacktest"
	"github.com/cutline/cutline/internal/integration/zonekill"
	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore/azblob"
)

// TestAzuriteTakeover runs the takeover of package zonekill on three
// Azurite processes, one container each, with zone-c's process killed.
func TestAzuriteTakeover(t *testing.T) {
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var zones []zonekill.Zone
	for i := range 3 {
		name := stacktest.ZoneName(i)
		srv := testservers.StartAzurite(t, testservers.AzureOptions{})
		// The SDK's own retries are off: a killed zone answers at once,
		// and the library's retries are the ones under test.
		client, err := azblob.NewClient(t.Context(), azblob.ClientConfig{
			ServiceURL: srv.Endpoint, Account: srv.Account, Key: srv.Key, HTTPClient: hc, MaxRetries: -1})
		require.NoError(t, err)
		_, err = client.CreateContainer(t.Context(), name, nil)
		require.NoError(t, err)
		b, err := azblob.New(client, name, azblob.Options{Name: name})
		require.NoError(t, err)
		// Azurite saves its metadata every few seconds: a killed process
		// comes back without its newest blobs.
		zones = append(zones, zonekill.Zone{Bucket: b, Stop: srv.Stop, Restart: srv.Restart, Lossy: true})
	}
	zonekill.Run(t, zones)
}
