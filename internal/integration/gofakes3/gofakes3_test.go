package gofakes3_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/stacktest"
	"github.com/cutline/cutline/internal/integration/zonekill"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/objstoretest"
)

var buckets atomic.Int64

// TestGoFakeS3Conformance runs the objstore conformance suite against
// gofakes3 over HTTP, a fresh bucket per property. Its GetRange property
// reads to the end of an object with a length near 2⁶³, which the backend
// sends as an open-ended range; its ConcurrentCreators property is the
// race of many creators on one key, exactly one winner.
func TestGoFakeS3Conformance(t *testing.T) {
	backend := s3mem.New()
	f := startFakeS3(t, backend, "conformance")
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		name := fmt.Sprintf("b%d", buckets.Add(1))
		require.NoError(t, backend.CreateBucket(name))
		return f.bucket(t, name, "gofakes3-"+name)
	})
}

// TestGoFakeS3Verify: gofakes3 checks If-None-Match under its backend's
// lock, so Verify accepts it in every one of many runs; the start-up
// check of three servers passes, and refuses one bucket under two names.
func TestGoFakeS3Verify(t *testing.T) {
	const runs = 20
	f := startFakeS3(t, nil, "zone-a")
	a := f.bucket(t, "zone-a", "zone-a")
	for i := range runs {
		require.NoError(t, objstore.Verify(t.Context(), a), "run %d", i)
	}
	page, err := a.List(t.Context(), "", "", 10)
	require.NoError(t, err)
	require.Empty(t, page, "Verify removes its probes")

	b := startFakeS3(t, nil, "zone-b").bucket(t, "zone-b", "zone-b")
	c := startFakeS3(t, nil, "zone-c").bucket(t, "zone-c", "zone-c")
	require.NoError(t, objstore.VerifyZones(t.Context(), []objstore.Bucket{a, b, c}, objstore.VerifyOptions{}))
	alias := f.bucket(t, "zone-a", "zone-d")
	err = objstore.VerifyZones(t.Context(), []objstore.Bucket{a, b, alias}, objstore.VerifyOptions{})
	var ae *objstore.AliasError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, objstore.AliasError{A: "zone-a", B: "zone-d"}, *ae)
}

// racyBackend is a gofakes3 backend that checks If-None-Match and then
// writes without it, with a gap between: the conditional puts of a race
// probe key wait after their check until all of the key's concurrent
// creates have checked, so that all of them write.
type racyBackend struct {
	gofakes3.Backend
	mu     sync.Mutex
	gates  map[string]*gate
	missed []string
}

type gate struct {
	n    int
	full chan struct{}
}

func (r *racyBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	if cond == nil || cond.IfNoneMatch == nil || !strings.Contains(key, "-race-") {
		return r.Backend.PutObject(bucket, key, meta, input, size, cond)
	}
	if _, err := r.HeadObject(bucket, key); err == nil {
		return gofakes3.PutObjectResult{}, gofakes3.ErrorMessage(gofakes3.ErrPreconditionFailed, "exists")
	}
	r.mu.Lock()
	g := r.gates[key]
	if g == nil {
		g = &gate{full: make(chan struct{})}
		r.gates[key] = g
	}
	if g.n++; g.n == objstore.VerifyRaceCreators {
		close(g.full)
	}
	r.mu.Unlock()
	select {
	case <-g.full:
	case <-time.After(10 * time.Second):
		r.mu.Lock()
		r.missed = append(r.missed, key)
		r.mu.Unlock()
	}
	return r.Backend.PutObject(bucket, key, meta, input, size, nil)
}

// TestGoFakeS3RacyBackendRefused: gofakes3 over a check-then-put backend,
// reached through objstore/s3 over HTTP, is refused by Verify in every
// run, deterministically: every gate fills before any create writes.
func TestGoFakeS3RacyBackendRefused(t *testing.T) {
	const runs = 20
	racy := &racyBackend{Backend: s3mem.New(), gates: map[string]*gate{}}
	b := startFakeS3(t, racy, "racy").bucket(t, "racy", "racy")
	for i := range runs {
		err := objstore.Verify(t.Context(), b)
		require.ErrorIs(t, err, objstore.ErrNotCreateOnly, "run %d", i)
		require.NotErrorIs(t, err, objstore.ErrUnavailable, "run %d", i)
		require.Contains(t, err.Error(), "concurrent creates of", "run %d", i)
	}
	racy.mu.Lock()
	defer racy.mu.Unlock()
	require.Empty(t, racy.missed, "every create of a key checked before any wrote")
	require.Len(t, racy.gates, runs*objstore.VerifyRaceKeys)
}

// TestGoFakeS3Answers pins gofakes3's answers where S3 implementations
// differ, and what the backend makes of them.
func TestGoFakeS3Answers(t *testing.T) {
	f := startFakeS3(t, nil, "answers")
	b := f.bucket(t, "answers", "gofakes3")
	ctx := t.Context()

	// A second create: 412 PreconditionFailed, as on S3.
	require.NoError(t, b.Create(ctx, "k", []byte("first")))
	err := b.Create(ctx, "k", []byte("second"))
	require.ErrorIs(t, err, objstore.ErrExists)
	var re *awshttp.ResponseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusPreconditionFailed, re.HTTPStatusCode())
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "PreconditionFailed", apiErr.ErrorCode())

	// A missing key and a missing bucket are told apart, as on S3.
	_, err = b.Get(ctx, "missing")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	nb := f.bucket(t, "no-such-bucket", "gofakes3")
	_, err = nb.Get(ctx, "k")
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	err = nb.Create(ctx, "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrExists)

	// Ranges: an open-ended range reads to the end; an offset past the
	// end is empty.
	require.NoError(t, b.Create(ctx, "ten", []byte("0123456789")))
	got, err := b.GetRange(ctx, "ten", 9, 1<<62)
	require.NoError(t, err)
	require.Equal(t, "9", string(got))
	got, err = b.GetRange(ctx, "ten", 10, 1)
	require.NoError(t, err)
	require.Empty(t, got)

	// A stopped server is unknown, never absent, never taken.
	f.Stop()
	_, err = b.Get(ctx, "k")
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	err = b.Create(ctx, "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrExists)
	f.Restart()
	got, err = b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "first", string(got), "the restarted server serves what it held")
}

// TestGoFakeS3Takeover runs the takeover of package zonekill on three
// gofakes3 servers: zone-c's server is stopped while star A appends, B
// fences and settles with zone-c down, and zone-c is restarted before B
// appends.
func TestGoFakeS3Takeover(t *testing.T) {
	var zones []zonekill.Zone
	for i := range 3 {
		name := stacktest.ZoneName(i)
		f := startFakeS3(t, nil, name)
		zones = append(zones, zonekill.Zone{Bucket: f.bucket(t, name, name), Stop: f.Stop, Restart: f.Restart})
	}
	zonekill.Run(t, zones)
}

// BenchmarkGoFakeS3 runs the shared create/get/Verify benchmarks against
// gofakes3 over HTTP, a fresh bucket per sub-benchmark.
func BenchmarkGoFakeS3(b *testing.B) {
	backend := s3mem.New()
	f := startFakeS3(b, backend, "bench")
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket {
		name := fmt.Sprintf("bench%d", buckets.Add(1))
		require.NoError(b, backend.CreateBucket(name))
		return f.bucket(b, name, "gofakes3-"+name)
	})
}
