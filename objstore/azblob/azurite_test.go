package azblob_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
	"github.com/cutline/cutline/objstore/internal/remotetest"
	"github.com/cutline/cutline/objstore/objstoretest"
)

// emulator is one Azurite process and a client of its account.
type emulator struct {
	srv    *testservers.AzureServer
	client *sdk.Client
}

// startAzurite starts Azurite and returns a client over TCP with the
// SDK's retries off, so that a stopped server answers at once.
func startAzurite(t *testing.T) *emulator {
	t.Helper()
	srv := testservers.StartAzurite(t, testservers.AzureOptions{})
	return &emulator{srv: srv, client: newClient(t, srv, srv.Key)}
}

func newClient(t *testing.T, srv *testservers.AzureServer, key string) *sdk.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := azblob.NewClient(t.Context(), azblob.ClientConfig{
		ServiceURL: srv.Endpoint, Account: srv.Account, Key: key,
		HTTPClient: &http.Client{Transport: tr, Timeout: 30 * time.Second}, MaxRetries: -1,
	})
	require.NoError(t, err)
	return c
}

var containers atomic.Int64

// container creates a fresh container and returns its name.
func (e *emulator) container(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("c%d-%d", containers.Add(1), time.Now().UnixNano()%1e6)
	_, err := e.client.CreateContainer(t.Context(), name, nil)
	require.NoError(t, err, "creating container %s", name)
	return name
}

func (e *emulator) bucket(t *testing.T, opts azblob.Options) *azblob.Bucket {
	t.Helper()
	b, err := azblob.New(e.client, e.container(t), opts)
	require.NoError(t, err)
	return b
}

// TestAzuriteConformance runs the objstore conformance suite against
// Azurite, a fresh container per property. Its ConcurrentCreators
// property is the race of many creators on one key, exactly one winner.
func TestAzuriteConformance(t *testing.T) {
	e := startAzurite(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return e.bucket(t, azblob.Options{Name: "azurite"})
	})
}

// TestAzuriteVerify: Azurite refuses a second Put Blob with If-None-Match:
// * one request at a time and under concurrent creates, so Verify accepts
// it in every one of many runs; the start-up check of three containers
// passes, and refuses one container under two zone names.
func TestAzuriteVerify(t *testing.T) {
	e := startAzurite(t)
	b := e.bucket(t, azblob.Options{Name: "zone-a"})
	remotetest.VerifyRuns(t, b, 20)

	c, d := e.bucket(t, azblob.Options{Name: "zone-b"}), e.bucket(t, azblob.Options{Name: "zone-c"})
	require.NoError(t, objstore.VerifyZones(t.Context(), []objstore.Bucket{b, c, d}, objstore.VerifyOptions{}))
	again, err := azblob.New(e.client, b.ContainerName(), azblob.Options{Name: "zone-d"})
	require.NoError(t, err)
	err = objstore.VerifyZones(t.Context(), []objstore.Bucket{b, c, again}, objstore.VerifyOptions{})
	var ae *objstore.AliasError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, objstore.AliasError{A: "zone-a", B: "zone-d"}, *ae)
}

// TestAzuriteExists pins what Azurite answers a create of an existing
// blob (409 BlobAlreadyExists, as Azure does) and what callers see.
func TestAzuriteExists(t *testing.T) {
	e := startAzurite(t)
	b := e.bucket(t, azblob.Options{})
	err := remotetest.CreateTwice(t, b)
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusConflict, re.StatusCode)
	require.Equal(t, "BlobAlreadyExists", re.ErrorCode)
}

func TestAzuriteNoSuchContainer(t *testing.T) {
	e := startAzurite(t)
	b, err := azblob.New(e.client, "no-such-container", azblob.Options{})
	require.NoError(t, err)
	_, err = b.Get(t.Context(), "k")
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	err = b.Create(t.Context(), "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrExists)
	require.ErrorIs(t, b.Delete(t.Context(), "k"), objstore.ErrNoSuchBucket)
	_, err = b.List(t.Context(), "", "", 10)
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	err = objstore.Verify(t.Context(), b)
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotCreateOnly)
}

func TestAzuriteWrongKeyIsDenied(t *testing.T) {
	e := startAzurite(t)
	name := e.container(t)
	wrong := "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
	b, err := azblob.New(newClient(t, e.srv, wrong), name, azblob.Options{})
	require.NoError(t, err)
	_, err = b.Get(t.Context(), "anything")
	require.ErrorIs(t, err, objstore.ErrAccessDenied)
	require.NotErrorIs(t, err, objstore.ErrNotFound, "a refusal must never read as absent")
	err = b.Create(t.Context(), "anything", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrAccessDenied)
	require.NotErrorIs(t, err, objstore.ErrExists)
	for _, secret := range []string{wrong, e.srv.Key} {
		require.NotContains(t, err.Error(), secret)
	}
}

// TestAzuriteStoppedZoneIsUnavailable kills the emulator while creates
// run: every failure is ErrUnavailable (never not-found or exists), and
// reads of a stopped zone say "unavailable", not "absent".
func TestAzuriteStoppedZoneIsUnavailable(t *testing.T) {
	e := startAzurite(t)
	b := e.bucket(t, azblob.Options{Name: "zone-a", Retries: 1,
		Backoff: clockBackoff()})
	ctx := t.Context()
	require.NoError(t, b.Create(ctx, "before", []byte("kept")))

	var wg sync.WaitGroup
	errs := make([]error, 200)
	started := make(chan struct{})
	wg.Go(func() {
		for i := range errs {
			if i == 5 {
				close(started)
			}
			errs[i] = b.Create(ctx, fmt.Sprintf("w/%04d", i), []byte("x"))
		}
	})
	<-started
	e.srv.Stop()
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		failed++
		require.ErrorIs(t, err, objstore.ErrUnavailable, "create %d", i)
		require.NotErrorIs(t, err, objstore.ErrExists, "create %d", i)
		require.NotErrorIs(t, err, objstore.ErrNotFound, "create %d", i)
	}
	require.Positive(t, failed, "creates after the stop failed")

	remotetest.ZoneDown(t, ctx, b)
	err := objstore.Verify(ctx, b)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrNotCreateOnly)
}

// TestAzuriteRangeEdges pins the answers that depend on how the emulator
// treats Range headers.
func TestAzuriteRangeEdges(t *testing.T) {
	e := startAzurite(t)
	b := e.bucket(t, azblob.Options{})
	ctx := t.Context()
	require.NoError(t, b.Create(ctx, "empty", nil))
	got, err := b.GetRange(ctx, "empty", 0, 1)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, b.Create(ctx, "ten", []byte("0123456789")))
	for _, tc := range []struct {
		off, n int64
		want   string
	}{{10, 1, ""}, {9, 1 << 40, "9"}, {0, 1 << 62, "0123456789"}, {3, 4, "3456"}} {
		got, err = b.GetRange(ctx, "ten", tc.off, tc.n)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got), "offset %d length %d", tc.off, tc.n)
	}
}

// BenchmarkAzurite runs the shared create/get benchmarks (1 KiB objects)
// against a local Azurite, a fresh container per sub-benchmark.
func BenchmarkAzurite(b *testing.B) {
	srv := testservers.StartAzurite(b, testservers.AzureOptions{})
	c, err := azblob.NewClient(b.Context(), azblob.ClientConfig{ServiceURL: srv.Endpoint, Account: srv.Account, Key: srv.Key})
	if err != nil {
		b.Fatal(err)
	}
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket {
		name := fmt.Sprintf("bench%d", containers.Add(1))
		if _, err := c.CreateContainer(b.Context(), name, nil); err != nil {
			b.Fatal(err)
		}
		bk, err := azblob.New(c, name, azblob.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return bk
	})
}
