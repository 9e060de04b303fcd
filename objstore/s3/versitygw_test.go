package s3_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/remotetest"
	"github.com/cutline/cutline/objstore/objstoretest"
	"github.com/cutline/cutline/objstore/s3"
)

// newVersityBucket starts a versitygw zone and returns a Bucket on its
// bucket.
func newVersityBucket(t *testing.T) (*testservers.S3Server, *s3.Bucket) {
	t.Helper()
	srv := testservers.StartVersityGW(t, testservers.S3Options{})
	b, err := s3.New(srv.Client, srv.Bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "versitygw"}})
	require.NoError(t, err)
	return srv, b
}

// TestS3VersityGWConformance runs the objstore conformance suite against a
// real S3 server, a fresh bucket per property. Its ConcurrentCreators
// property is the race of many creators on one key, exactly one winner.
func TestS3VersityGWConformance(t *testing.T) {
	srv := testservers.StartVersityGW(t, testservers.S3Options{})
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		name := srv.NewBucketName(t)
		b, err := s3.New(srv.Client, name, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "versitygw-" + name}})
		require.NoError(t, err)
		return b
	})
}

func TestS3VersityGWPreconditionFailedIsExists(t *testing.T) {
	_, b := newVersityBucket(t)
	err := remotetest.CreateTwice(t, b)

	// It is the server's 412 PreconditionFailed, not a guess.
	var re *awshttp.ResponseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusPreconditionFailed, re.HTTPStatusCode())
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "PreconditionFailed", apiErr.ErrorCode())
}

// TestS3VersityGWStoppedZoneIsUnavailable kills the server while a writer is
// creating objects: every failure is ErrUnavailable (never not-found or
// exists), every acknowledged object is there after the restart, and reads
// of a stopped zone say "unavailable", not "absent".
func TestS3VersityGWStoppedZoneIsUnavailable(t *testing.T) {
	srv := testservers.StartVersityGW(t, testservers.S3Options{})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := srv.NewClient(&http.Client{Transport: tr, Timeout: 5 * time.Second}, func(o *awss3.Options) {
		o.RetryMaxAttempts = 1 // fail fast; the SDK's retries are not under test here
	})
	b, err := s3.New(client, srv.Bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "zone-a"}})
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, b.Create(ctx, "before", []byte("kept")))

	// A writer creates keys until it has seen three failures in a row.
	type result struct {
		key string
		err error
	}
	results := make(chan result, 1024)
	progressed := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		failures := 0
		for i := 0; failures < 3 && i < 1000; i++ {
			key := fmt.Sprintf("w/%04d", i)
			err := b.Create(ctx, key, []byte(key))
			results <- result{key, err}
			if err != nil {
				failures++
			} else {
				failures = 0
			}
			if i == 5 {
				close(progressed)
			}
		}
	}()
	<-progressed
	srv.Stop()
	<-writerDone
	close(results)

	var acked []string
	failed := 0
	for r := range results {
		if r.err == nil {
			acked = append(acked, r.key)
			continue
		}
		failed++
		require.ErrorIs(t, r.err, objstore.ErrUnavailable, "create %s", r.key)
		require.NotErrorIs(t, r.err, objstore.ErrExists, "create %s", r.key)
		require.NotErrorIs(t, r.err, objstore.ErrNotFound, "create %s", r.key)
	}
	require.GreaterOrEqual(t, failed, 3)
	require.NotEmpty(t, acked)

	// The zone is down: nothing may read as absent or present.
	remotetest.ZoneDown(t, ctx, b)

	// Back up: the acknowledged objects survived.
	srv.Restart()
	for _, key := range append(acked, "before") {
		got, err := b.Get(ctx, key)
		require.NoError(t, err, "acknowledged %s", key)
		if key != "before" {
			require.Equal(t, key, string(got))
		}
	}
}

func TestS3VersityGWWrongCredentialsAreDenied(t *testing.T) {
	srv := testservers.StartVersityGW(t, testservers.S3Options{SecretKey: "the-real-secret-0123456789"})
	const wrong = "a-wrong-secret-9876543210"
	client, err := s3.NewClient(t.Context(), s3.ClientConfig{
		Endpoint:   srv.Endpoint,
		Region:     srv.Region,
		AccessKey:  srv.AccessKey,
		SecretKey:  wrong,
		PathStyle:  true,
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
	require.NoError(t, err)
	b, err := s3.New(client, srv.Bucket, s3.Options{})
	require.NoError(t, err)

	_, err = b.Get(t.Context(), "anything")
	require.ErrorIs(t, err, objstore.ErrAccessDenied)
	require.NotErrorIs(t, err, objstore.ErrNotFound, "a refusal must never read as absent")
	require.NotErrorIs(t, err, objstore.ErrUnavailable)
	err = b.Create(t.Context(), "anything", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrAccessDenied)
	require.NotErrorIs(t, err, objstore.ErrExists)
	for _, secret := range []string{wrong, srv.SecretKey} {
		require.NotContains(t, err.Error(), secret)
	}
}

// TestS3VersityGWVerify: versitygw enforces If-None-Match one request at
// a time and under concurrent creates, so Verify accepts it, in every one
// of many runs.
func TestS3VersityGWVerify(t *testing.T) {
	_, b := newVersityBucket(t)
	remotetest.VerifyRuns(t, b, 20)
}

// TestS3VersityGWVerifyDistinct: one S3 bucket listed under two zone
// names is refused; two buckets, even on one server, are two zones; no
// probe is left behind either way.
func TestS3VersityGWVerifyDistinct(t *testing.T) {
	srv := testservers.StartVersityGW(t, testservers.S3Options{})
	ctx := t.Context()
	open := func(bucket, name string) *s3.Bucket {
		b, err := s3.New(srv.Client, bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: name}})
		require.NoError(t, err)
		return b
	}
	other := srv.NewBucketName(t)
	a, b := open(srv.Bucket, "zone-a"), open(other, "zone-b")
	require.NoError(t, objstore.VerifyDistinct(ctx, a, b))

	// The same bucket again, through another client, under another name.
	again, err := s3.New(srv.NewClient(nil), srv.Bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "zone-c"}})
	require.NoError(t, err)
	err = objstore.VerifyDistinct(ctx, a, b, again)
	require.ErrorIs(t, err, objstore.ErrAliased)
	var ae *objstore.AliasError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, objstore.AliasError{A: "zone-a", B: "zone-c"}, *ae)

	for _, z := range []*s3.Bucket{a, b} {
		page, err := z.List(ctx, "", "", 10)
		require.NoError(t, err)
		require.Empty(t, page, "%s: the probes are deleted", z.Name())
	}

	// A zone whose server is down fails the check; it never passes.
	srv.Stop()
	err = objstore.VerifyDistinct(ctx, a, b)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrAliased)
}

func TestS3VersityGWNoSuchBucket(t *testing.T) {
	srv := testservers.StartVersityGW(t, testservers.S3Options{})
	b, err := s3.New(srv.Client, "no-such-bucket", s3.Options{})
	require.NoError(t, err)
	_, err = b.Get(t.Context(), "k")
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	require.ErrorIs(t, b.Delete(t.Context(), "k"), objstore.ErrNoSuchBucket)
}

// TestS3VersityGWEmptyAndRangeEdges pins the answers that depend on how the
// server treats Range headers.
func TestS3VersityGWEmptyAndRangeEdges(t *testing.T) {
	_, b := newVersityBucket(t)
	ctx := t.Context()
	require.NoError(t, b.Create(ctx, "empty", nil))
	got, err := b.GetRange(ctx, "empty", 0, 1)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, b.Create(ctx, "ten", []byte("0123456789")))
	got, err = b.GetRange(ctx, "ten", 10, 1)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = b.GetRange(ctx, "ten", 9, 1<<40)
	require.NoError(t, err)
	require.Equal(t, "9", string(got))
}

// BenchmarkS3VersityGW runs the shared create/get benchmarks (1 KiB
// objects) against a local versitygw, a fresh bucket per sub-benchmark.
func BenchmarkS3VersityGW(b *testing.B) {
	srv := testservers.StartVersityGW(b, testservers.S3Options{})
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket {
		bk, err := s3.New(srv.Client, srv.NewBucketName(b), s3.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return bk
	})
}

// BenchmarkS3VersityGWCreateContended has every caller race for the same
// few keys: three of four creates lose with a 412.
func BenchmarkS3VersityGWCreateContended(b *testing.B) {
	srv := testservers.StartVersityGW(b, testservers.S3Options{})
	bk, err := s3.New(srv.Client, srv.Bucket, s3.Options{})
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte{0xab}, 1024)
	var next atomic.Int64
	b.SetBytes(int64(len(data)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) / 4
			err := bk.Create(b.Context(), fmt.Sprintf("contended/%09d", i), data)
			if err != nil && !errors.Is(err, objstore.ErrExists) {
				b.Error(err)
				return
			}
		}
	})
}
