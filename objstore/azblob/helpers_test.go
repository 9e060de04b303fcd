package azblob_test

import (
	"testing"
	"time"

	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore/azblob"
)

// clockBackoff is a short backoff for tests that take a zone down.
func clockBackoff() clock.Backoff {
	return clock.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}
}

func TestNewRefusesBadOptions(t *testing.T) {
	c, err := azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://127.0.0.1:1/acct"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		client    *sdk.Client
		container string
		opts      azblob.Options
		field     string
	}{
		{"nil client", nil, "zone-a", azblob.Options{}, "client"},
		{"empty container", c, "", azblob.Options{}, "container"},
		{"path in container", c, "zone-a/../x", azblob.Options{}, "container"},
		{"upper case", c, "Zone-A", azblob.Options{}, "container"},
		{"double dash", c, "zone--a", azblob.Options{}, "container"},
		{"too short", c, "ab", azblob.Options{}, "container"},
		{"negative retries", c, "zone-a", azblob.Options{Retries: -1}, "Retries"},
		{"too many retries", c, "zone-a", azblob.Options{Retries: azblob.MaxRetries + 1}, "Retries"},
	} {
		_, err := azblob.New(tc.client, tc.container, tc.opts)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, tc.name)
		require.Equal(t, tc.field, ce.Field, tc.name)
	}
	_, err = azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://127.0.0.1:1/acct", Account: "acct", Key: "not base64!"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "not base64!", "the key is not echoed")
	_, err = azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://u:sig@127.0.0.1:1/acct"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "sig")
	_, err = azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://127.0.0.1:1/acct", Account: "acct"})
	require.Error(t, err, "an account without a key")
}
