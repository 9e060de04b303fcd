package azblob_test

import (
	"strings"
	"testing"
	"time"

	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
	"github.com/cutline/cutline/objstore/internal/remotetest"
)

// clockBackoff is a short backoff for tests that take a zone down.
func clockBackoff() clock.Backoff {
	return clock.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}
}

func TestNewRefusesBadOptions(t *testing.T) {
	c, err := azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://127.0.0.1:1/acct"})
	require.NoError(t, err)
	remotetest.NewValidates(t, func(c *sdk.Client, name string, o azblob.Options) (objstore.Bucket, error) {
		return azblob.New(c, name, o)
	}, c, "container", "zone-a/../x", "Zone-A", "zone--a", "ab", "-zone", strings.Repeat("a", 64))
	b, err := azblob.New(c, "bkt", azblob.Options{Name: "zone-d"})
	require.NoError(t, err)
	require.Equal(t, "bkt", b.ContainerName())
	_, err = azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://127.0.0.1:1/acct", Account: "acct", Key: "not base64!"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "not base64!", "the key is not echoed")
	_, err = azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://u:sig@127.0.0.1:1/acct"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "sig")
	_, err = azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: "http://127.0.0.1:1/acct", Account: "acct"})
	require.Error(t, err, "an account without a key")
}
