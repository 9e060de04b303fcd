package gcs_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/googleapis/gax-go/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/gcs"
	"github.com/cutline/cutline/objstore/internal/remotetest"
	"github.com/cutline/cutline/objstore/internal/testclock"
	"github.com/cutline/cutline/objstore/objstoretest"
)

// startFakeGCS starts fake-gcs-server in-process on 127.0.0.1 (plain
// HTTP), stopped at the end of the test.
func startFakeGCS(t testing.TB) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
	})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	require.True(t, strings.HasPrefix(srv.URL(), "http://127.0.0.1:"), srv.URL())
	return srv
}

// inProcessClient is the emulator's own client (requests go straight to
// its handler).
func inProcessClient(t testing.TB, srv *fakestorage.Server) *storage.Client {
	t.Helper()
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// networkClient talks to the emulator over TCP through rt (nil: a fresh
// transport), the way a host's client talks to GCS.
func networkClient(t testing.TB, srv *fakestorage.Server, rt http.RoundTripper) *storage.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	if rt == nil {
		rt = tr
	}
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint(srv.URL()+"/storage/v1/"),
		option.WithHTTPClient(&http.Client{Transport: rt, Timeout: 10 * time.Second}),
		// The emulator serves XML-API reads only on its public host name.
		storage.WithJSONReads(),
	)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var bucketSeq struct {
	sync.Mutex
	n int
}

func freshBucket(t testing.TB, srv *fakestorage.Server) string {
	bucketSeq.Lock()
	bucketSeq.n++
	name := fmt.Sprintf("bucket-%d", bucketSeq.n)
	bucketSeq.Unlock()
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	return name
}

func newBucket(t testing.TB, c *storage.Client, name string, opts gcs.Options) *gcs.Bucket {
	t.Helper()
	b, err := gcs.New(c, name, opts)
	require.NoError(t, err)
	return b
}

// TestGCSFakeServerConformance runs the objstore conformance suite against
// fake-gcs-server with the emulator's in-process client.
func TestGCSFakeServerConformance(t *testing.T) {
	srv := startFakeGCS(t)
	c := inProcessClient(t, srv)
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		name := freshBucket(t, srv)
		return newBucket(t, c, name, gcs.Options{Name: "fake-gcs-" + name})
	})
}

// TestGCSFakeServerNetworkConformance runs the suite again with a client
// that goes over TCP, as a host's would; its ConcurrentCreators property is
// the race of many creators on one key, exactly one winner.
func TestGCSFakeServerNetworkConformance(t *testing.T) {
	srv := startFakeGCS(t)
	c := networkClient(t, srv, nil)
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return newBucket(t, c, freshBucket(t, srv), gcs.Options{})
	})
}

func TestGCSPreconditionFailedIsExists(t *testing.T) {
	srv := startFakeGCS(t)
	b := newBucket(t, inProcessClient(t, srv), freshBucket(t, srv), gcs.Options{})
	err := remotetest.CreateTwice(t, b)
	require.ErrorContains(t, err, "412", "the server's conditionNotMet, read from Writer.Close")
}

// TestGCSVerify: fake-gcs-server enforces DoesNotExist one request at a
// time and under concurrent creates, so Verify accepts it, in every one
// of many runs, through the in-process client and over TCP.
func TestGCSVerify(t *testing.T) {
	srv := startFakeGCS(t)
	for _, c := range []*storage.Client{inProcessClient(t, srv), networkClient(t, srv, nil)} {
		remotetest.VerifyRuns(t, newBucket(t, c, freshBucket(t, srv), gcs.Options{}), 20)
	}
}

func TestGCSNoSuchBucket(t *testing.T) {
	srv := startFakeGCS(t)
	b := newBucket(t, networkClient(t, srv, nil), "no-such-bucket", gcs.Options{})
	_, err := b.List(t.Context(), "", "", 10)
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	err = b.Create(t.Context(), "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	require.NotErrorIs(t, err, objstore.ErrExists)

	// Reads cannot tell a missing bucket from a missing object (GCS answers
	// 404 to both), which is why Verify, which creates, must run first.
	err = objstore.Verify(t.Context(), b)
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotCreateOnly)
}

// TestGCSStoppedServerIsUnavailable: with the emulator gone, nothing reads
// as absent or taken.
func TestGCSStoppedServerIsUnavailable(t *testing.T) {
	srv := startFakeGCS(t)
	c := networkClient(t, srv, nil)
	// The client's own retries of reads are the host's business; keep them
	// short here.
	c.SetRetry(storage.WithMaxAttempts(2), storage.WithBackoff(gax.Backoff{Initial: time.Millisecond, Max: time.Millisecond}))
	b := newBucket(t, c, freshBucket(t, srv), gcs.Options{Clock: &testclock.Instant{}, Retries: 1})
	ctx := t.Context()
	require.NoError(t, b.Create(ctx, "before", []byte("kept")))
	srv.Stop()

	// Reads use the client's own retry policy; bound them.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	remotetest.ZoneDown(t, rctx, b)
}

// faultyTransport forwards requests to next, except for the uploads it is
// told to spoil.
type faultyTransport struct {
	next http.RoundTripper

	mu     sync.Mutex
	faults []fault
	seen   []string
}

type fault int

const (
	// refuse answers 503 without forwarding: the upload did not land.
	refuse fault = iota + 1
	// dropAnswer forwards the upload, then loses the answer: it landed.
	dropAnswer
	// deny answers 403 without forwarding.
	deny
)

func (f *faultyTransport) spoil(fs ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fs...)
}

func (f *faultyTransport) uploads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.seen {
		if strings.HasPrefix(s, "upload") {
			n++
		}
	}
	return n
}

func (f *faultyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	isUpload := strings.Contains(r.URL.Path, "/upload/")
	f.mu.Lock()
	var ft fault
	if isUpload {
		f.seen = append(f.seen, "upload "+r.URL.RawQuery)
		if len(f.faults) > 0 {
			ft, f.faults = f.faults[0], f.faults[1:]
		}
	} else {
		f.seen = append(f.seen, r.Method+" "+r.URL.Path)
	}
	f.mu.Unlock()
	switch ft {
	case refuse, deny:
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
		}
		code, reason := http.StatusServiceUnavailable, "backendError"
		if ft == deny {
			code, reason = http.StatusForbidden, "forbidden"
		}
		body := fmt.Sprintf(`{"error":{"code":%d,"message":"injected","errors":[{"reason":%q}]}}`, code, reason)
		return &http.Response{
			StatusCode: code,
			Status:     http.StatusText(code),
			Header:     http.Header{"Content-Type": []string{"application/json"}},
			Body:       io.NopCloser(strings.NewReader(body)),
			Request:    r,
		}, nil
	case dropAnswer:
		res, err := f.next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return f.next.RoundTrip(r)
}

func faultyBucket(t *testing.T, opts gcs.Options) (*fakestorage.Server, *faultyTransport, *gcs.Bucket) {
	srv := startFakeGCS(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ft := &faultyTransport{next: tr}
	name := freshBucket(t, srv)
	return srv, ft, newBucket(t, networkClient(t, srv, ft), name, opts)
}

// An upload lands but its answer is lost; the re-sent upload gets 412 from
// our own object: Create succeeds.
func TestGCSCreateLostAnswerFindsOwnObject(t *testing.T) {
	clk := &testclock.Instant{}
	_, ft, b := faultyBucket(t, gcs.Options{Clock: clk})
	ft.spoil(dropAnswer)
	require.NoError(t, b.Create(t.Context(), "k", []byte("mine")))
	require.Equal(t, 2, ft.uploads())
	require.Len(t, clk.Waits(), 1, "one backoff on the injected clock")
	got, err := b.Get(t.Context(), "k")
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
}

// The first upload is refused with 503; meanwhile another writer takes the
// key; the re-sent upload gets 412 and the read-back finds other bytes.
func TestGCSCreateRetryLosesToAnotherWriter(t *testing.T) {
	srv, ft, b := faultyBucket(t, gcs.Options{Clock: &testclock.Instant{}})
	ft.spoil(refuse)
	srv.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: b.BucketName(), Name: "k"},
		Content:     []byte("theirs"),
	})
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrExists)
	require.NotErrorIs(t, err, objstore.ErrUnavailable)
}

func TestGCSCreateRetriesRunOut(t *testing.T) {
	clk := &testclock.Instant{}
	_, ft, b := faultyBucket(t, gcs.Options{Clock: clk, Retries: 2})
	ft.spoil(refuse, refuse, refuse)
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrExists)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	require.Equal(t, 3, ft.uploads(), "one attempt and two retries, none by the client itself")
	require.Len(t, clk.Waits(), 2)
}

func TestGCSCreateRefusedThenWins(t *testing.T) {
	_, ft, b := faultyBucket(t, gcs.Options{Clock: &testclock.Instant{}})
	ft.spoil(refuse)
	require.NoError(t, b.Create(t.Context(), "k", []byte("mine")))
	require.Equal(t, 2, ft.uploads())
}

func TestGCSCreateCanceledDuringBackoff(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	_, ft, b := faultyBucket(t, gcs.Options{Clock: clk})
	ft.spoil(refuse)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Create(ctx, "k", []byte("mine")) }()
	clk.BlockUntil(1)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrExists)
}

func TestGCSAccessDeniedIsNeverNotFound(t *testing.T) {
	_, ft, b := faultyBucket(t, gcs.Options{Name: "zone-c"})
	ft.spoil(deny)
	err := b.Create(t.Context(), "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrAccessDenied)
	require.NotErrorIs(t, err, objstore.ErrExists)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	require.NotErrorIs(t, err, objstore.ErrUnavailable, "a refusal is not retried")
	require.Equal(t, 1, ft.uploads())
	require.Contains(t, err.Error(), "zone-c")
}

func TestGCSNewValidates(t *testing.T) {
	srv := startFakeGCS(t)
	c := inProcessClient(t, srv)
	remotetest.NewValidates(t, func(c *storage.Client, name string, o gcs.Options) (objstore.Bucket, error) {
		return gcs.New(c, name, o)
	}, c, "bucket", "a/b", "a b", strings.Repeat("b", 223))
	b := newBucket(t, c, "bkt", gcs.Options{Name: "zone-c"})
	require.Equal(t, "zone-c", b.Name())
	require.Equal(t, "bkt", b.BucketName())
}

// BenchmarkGCSFakeServer runs the shared create/get benchmarks against the
// emulator over TCP.
func BenchmarkGCSFakeServer(b *testing.B) {
	srv := startFakeGCS(b)
	c := networkClient(b, srv, nil)
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket {
		bk, err := gcs.New(c, freshBucket(b, srv), gcs.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return bk
	})
}
