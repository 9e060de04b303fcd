package s3_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/racystore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/s3"
)

// s3Front serves a path-style S3 bucket named "front" over HTTP on
// 127.0.0.1 from an objstore.Bucket: PUT with "If-None-Match: *" is
// Create, GET (with a Range header or without) is Get, DELETE is Delete.
// Unlike scriptedS3 it serves requests concurrently, so the store behind
// it decides what concurrent creates get. It records the Range headers it
// is sent.
type s3Front struct {
	t     *testing.T
	store objstore.Bucket
	srv   *httptest.Server

	mu     sync.Mutex
	ranges []string
}

func newS3Front(t *testing.T, store objstore.Bucket) *s3Front {
	f := &s3Front{t: t, store: store}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *s3Front) bucket() *s3.Bucket {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	f.t.Cleanup(tr.CloseIdleConnections)
	client := awss3.New(awss3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(f.srv.URL),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDFRONT", "secret-front", ""),
		HTTPClient:                 &http.Client{Transport: tr},
		RetryMaxAttempts:           1,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	b, err := s3.New(client, "front", s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "front-" + f.store.Name()}})
	require.NoError(f.t, err)
	return b
}

func (f *s3Front) rangesSent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ranges)
}

func (f *s3Front) serve(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket != "front" {
		writeError(w, 404, "NoSuchBucket")
		return
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, 400, "IncompleteBody")
			return
		}
		if r.Header.Get("If-None-Match") != "*" {
			writeError(w, 501, "NotImplemented")
			return
		}
		f.answer(w, f.store.Create(ctx, key, body), 200)
	case http.MethodGet:
		rng := r.Header.Get("Range")
		if rng == "" {
			data, err := f.store.Get(ctx, key)
			if err != nil {
				f.answer(w, err, 0)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.WriteHeader(200)
			_, _ = w.Write(data)
			return
		}
		f.mu.Lock()
		f.ranges = append(f.ranges, rng)
		f.mu.Unlock()
		from, to, err := parseRange(rng)
		if err != nil || to < from {
			writeError(w, 400, "InvalidArgument")
			return
		}
		data, err := f.store.Get(ctx, key)
		switch {
		case err != nil:
			f.answer(w, err, 0)
			return
		case from >= int64(len(data)):
			writeError(w, 416, "InvalidRange")
			return
		}
		to = min(to, int64(len(data))-1)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(data)))
		w.Header().Set("Content-Length", strconv.FormatInt(to-from+1, 10))
		w.WriteHeader(206)
		_, _ = w.Write(data[from : to+1])
	case http.MethodDelete:
		f.answer(w, f.store.Delete(ctx, key), 204)
	default:
		writeError(w, 501, "NotImplemented")
	}
}

// answer writes ok for a nil error, else the S3 error the store's
// sentinel stands for.
func (f *s3Front) answer(w http.ResponseWriter, err error, ok int) {
	switch {
	case err == nil:
		w.WriteHeader(ok)
	case errors.Is(err, objstore.ErrExists):
		writeError(w, 412, "PreconditionFailed")
	case errors.Is(err, objstore.ErrNotFound):
		writeError(w, 404, "NoSuchKey")
	default:
		writeError(w, 500, "InternalError")
	}
}

func isRaceProbe(key string) bool { return strings.Contains(key, "-race-") }

// TestS3VerifyRefusesCheckThenPutOverHTTP: a store that checks for the key
// and then writes, with a gap between, reached through this package over
// HTTP, is refused by objstore.Verify in every run. Its gap is held open
// until all of a key's concurrent creates have checked, so it loses the
// race every time, not by chance; one request at a time it is create-only,
// so the sequential check alone would pass it.
func TestS3VerifyRefusesCheckThenPutOverHTTP(t *testing.T) {
	const runs = 20
	for i := range runs {
		inner := memblob.New("racy")
		racy := racystore.Wrap(inner, racystore.Options{Match: isRaceProbe})
		b := newS3Front(t, racy).bucket()
		err := objstore.Verify(t.Context(), b)
		require.ErrorIs(t, err, objstore.ErrNotCreateOnly, "run %d", i)
		require.NotErrorIs(t, err, objstore.ErrUnavailable, "run %d", i)
		require.Contains(t, err.Error(), `"front-racy"`)
		require.Contains(t, err.Error(), "concurrent creates of")
		require.Empty(t, racy.Missed(), "run %d: every create of a key checked before any wrote", i)
		require.Equal(t, 0, inner.Len(), "run %d: the probes are deleted", i)

		// The same store one request at a time passes the sequential
		// check that Verify starts with.
		require.NoError(t, b.Create(t.Context(), "seq", []byte("first")))
		require.ErrorIs(t, b.Create(t.Context(), "seq", []byte("second")), objstore.ErrExists)
	}
}

// TestS3VerifyPassesCreateOnlyFront: the same front end over a
// create-only store passes Verify in every run.
func TestS3VerifyPassesCreateOnlyFront(t *testing.T) {
	const runs = 20
	inner := memblob.New("create-only")
	b := newS3Front(t, inner).bucket()
	for i := range runs {
		require.NoError(t, objstore.Verify(t.Context(), b), "run %d", i)
	}
	require.Equal(t, 0, inner.Len())
}

// TestS3GetRangeOpenEnded: a range that runs past MaxObjectSize is sent
// open-ended, so that no store adds to an end near 2⁶³; a shorter one
// names its last byte.
func TestS3GetRangeOpenEnded(t *testing.T) {
	inner := memblob.New("ranges")
	f := newS3Front(t, inner)
	b := f.bucket()
	ctx := t.Context()
	require.NoError(t, b.Create(ctx, "k", []byte("0123456789")))
	for _, tc := range []struct {
		offset, length int64
		header, want   string
	}{
		{0, 4, "bytes=0-3", "0123"},
		{8, 100, "bytes=8-107", "89"},
		{0, s3.MaxObjectSize, fmt.Sprintf("bytes=0-%d", s3.MaxObjectSize-1), "0123456789"},
		{1, s3.MaxObjectSize, "bytes=1-", "123456789"},
		{1, math.MaxInt64, "bytes=1-", "123456789"},
		{9, math.MaxInt64 - 9, "bytes=9-", "9"},
		{10, math.MaxInt64, "bytes=10-", ""},
		{math.MaxInt64 - 1, 1, fmt.Sprintf("bytes=%d-", int64(math.MaxInt64-1)), ""},
	} {
		got, err := b.GetRange(ctx, "k", tc.offset, tc.length)
		require.NoError(t, err, "offset %d length %d", tc.offset, tc.length)
		require.Equal(t, tc.want, string(got), "offset %d length %d", tc.offset, tc.length)
		sent := f.rangesSent()
		require.Equal(t, tc.header, sent[len(sent)-1], "offset %d length %d", tc.offset, tc.length)
	}
}
