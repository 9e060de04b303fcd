package s3_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/remotetest"
	"github.com/cutline/cutline/objstore/internal/testclock"
	"github.com/cutline/cutline/objstore/s3"
)

// scriptedS3 is a minimal path-style S3 endpoint on 127.0.0.1 for the
// answers a real server will not give on demand (409 conflicts, 5xx, 403,
// ignored Range headers, unordered listings). Scripted answers are used
// first, in order, per operation; after that it behaves like a tiny
// create-only store.
type scriptedS3 struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	objects map[string][]byte
	script  map[string][]answer // by operation: "PUT", "GET", "LIST", "DELETE"
	calls   []string            // "PUT key", "GET key", ...
	// ignoreIfNoneMatch makes PUT overwrite, like stores that do not
	// support conditional writes.
	ignoreIfNoneMatch bool
	// unordered makes LIST return keys in reverse order, pageSize at a time.
	unordered bool
	pageSize  int
}

// answer is one scripted response. apply, when set, runs against the store
// before the response is written (a PUT that lands and then answers 500).
type answer struct {
	status int
	code   string
	apply  bool
	body   string // a 200 with this XML body instead of an error
}

func newScriptedS3(t *testing.T) *scriptedS3 {
	f := &scriptedS3{t: t, objects: map[string][]byte{}, script: map[string][]answer{}, pageSize: 1000}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *scriptedS3) push(op string, as ...answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[op] = append(f.script[op], as...)
}

func (f *scriptedS3) put(key string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[key] = data
}

func (f *scriptedS3) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// client returns a client for the endpoint whose retryer does not wait
// between attempts, with secret as the secret key.
func (f *scriptedS3) client(secret string, maxAttempts int) *awss3.Client {
	tr := &http.Transport{}
	f.t.Cleanup(tr.CloseIdleConnections)
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(f.srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDSCRIPTED", secret, ""),
		HTTPClient:   &http.Client{Transport: tr},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = maxAttempts
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		}),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

func (f *scriptedS3) bucket(opts s3.Options) *s3.Bucket {
	b, err := s3.New(f.client("secret-scripted", 3), "scripted", opts)
	require.NoError(f.t, err)
	return b
}

func (f *scriptedS3) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	op := r.Method
	if op == http.MethodGet && key == "" && r.URL.Query().Get("list-type") == "2" {
		op = "LIST"
	}
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(r.Body)

	f.mu.Lock()
	defer f.mu.Unlock()
	if op == "LIST" {
		q := r.URL.Query()
		f.calls = append(f.calls, fmt.Sprintf("LIST prefix=%q start-after=%q", q.Get("prefix"), q.Get("start-after")))
	} else {
		f.calls = append(f.calls, op+" "+key)
	}
	if bucket != "scripted" {
		writeError(w, 404, "NoSuchBucket")
		return
	}
	if q := f.script[op]; len(q) > 0 {
		a := q[0]
		f.script[op] = q[1:]
		if a.apply && op == http.MethodPut {
			f.objects[key] = body.Bytes()
		}
		if a.body != "" {
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte(a.body))
			return
		}
		if a.status != 0 {
			writeError(w, a.status, a.code)
			return
		}
	}
	switch op {
	case http.MethodPut:
		if _, ok := f.objects[key]; ok && r.Header.Get("If-None-Match") == "*" && !f.ignoreIfNoneMatch {
			writeError(w, 412, "PreconditionFailed")
			return
		}
		f.objects[key] = body.Bytes()
		w.WriteHeader(200)
	case http.MethodGet:
		data, ok := f.objects[key]
		if !ok {
			writeError(w, 404, "NoSuchKey")
			return
		}
		if rng := r.Header.Get("Range"); rng != "" && !strings.HasPrefix(key, "ignore-range") {
			from, to, err := parseRange(rng)
			require.NoError(f.t, err, rng)
			if from >= int64(len(data)) {
				writeError(w, 416, "InvalidRange")
				return
			}
			to = min(to, int64(len(data))-1)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(data)))
			w.Header().Set("Content-Length", strconv.FormatInt(to-from+1, 10))
			w.WriteHeader(206)
			_, _ = w.Write(data[from : to+1])
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(200)
		_, _ = w.Write(data)
	case http.MethodDelete:
		delete(f.objects, key)
		w.WriteHeader(204)
	case "LIST":
		f.list(w, r)
	}
}

// parseRange reads "bytes=from-to" or the open-ended "bytes=from-".
func parseRange(h string) (from, to int64, err error) {
	a, b, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	if !ok || !strings.HasPrefix(h, "bytes=") {
		return 0, 0, fmt.Errorf("not a byte range: %q", h)
	}
	if from, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, err
	}
	if b == "" {
		return from, math.MaxInt64, nil
	}
	to, err = strconv.ParseInt(b, 10, 64)
	return from, to, err
}

type listResult struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	IsTruncated           bool
	NextContinuationToken string `xml:",omitempty"`
	Contents              []listEntry
}

type listEntry struct {
	Key  string
	Size int64
}

// list serves ListObjectsV2. In unordered mode it ignores StartAfter and
// returns keys in reverse order, like a store that does not sort.
func (f *scriptedS3) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix, after, token := q.Get("prefix"), q.Get("start-after"), q.Get("continuation-token")
	var keys []string
	for k := range f.objects {
		if strings.HasPrefix(k, prefix) && (f.unordered || k > after) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if f.unordered {
		slices.Reverse(keys)
	}
	start, _ := strconv.Atoi(token)
	end := min(start+f.pageSize, len(keys))
	if mk, _ := strconv.Atoi(q.Get("max-keys")); mk > 0 && !f.unordered {
		end = min(start+mk, len(keys))
	}
	res := listResult{}
	for _, k := range keys[start:end] {
		res.Contents = append(res.Contents, listEntry{Key: k, Size: int64(len(f.objects[k]))})
	}
	if end < len(keys) {
		res.IsTruncated = true
		res.NextContinuationToken = strconv.Itoa(end)
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(200)
	require.NoError(f.t, xml.NewEncoder(w).Encode(res))
}

func writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>scripted %s</Message><RequestId>rid</RequestId></Error>`, code, code)
}

func TestS3ScriptedCreateConflictThenSuccess(t *testing.T) {
	f := newScriptedS3(t)
	clk := &testclock.Instant{}
	b := f.bucket(s3.Options{RemoteOptions: objstore.RemoteOptions{Clock: clk}})
	f.push("PUT", answer{status: 409, code: "ConditionalRequestConflict"})
	require.NoError(t, b.Create(t.Context(), "k", []byte("mine")))
	require.Equal(t, []string{"PUT k", "PUT k"}, f.callLog(), "one conflict, one retry, no read-back")
	require.Len(t, clk.Waits(), 1, "one backoff on the injected clock")
}

func TestS3ScriptedCreateConflictObservesOwnBytes(t *testing.T) {
	f := newScriptedS3(t)
	clk := &testclock.Instant{}
	b := f.bucket(s3.Options{RemoteOptions: objstore.RemoteOptions{Clock: clk}})
	// The first PUT lands but answers 409; the retry conflicts again and
	// the read-back finds our bytes.
	f.push("PUT",
		answer{status: 409, code: "ConditionalRequestConflict", apply: true},
		answer{status: 409, code: "ConditionalRequestConflict"})
	require.NoError(t, b.Create(t.Context(), "k", []byte("mine")))
	require.Equal(t, []string{"PUT k", "PUT k", "GET k"}, f.callLog())
}

func TestS3ScriptedCreateConflictObservesOtherBytes(t *testing.T) {
	f := newScriptedS3(t)
	clk := &testclock.Instant{}
	b := f.bucket(s3.Options{RemoteOptions: objstore.RemoteOptions{Clock: clk}})
	f.put("k", []byte("theirs"))
	f.push("PUT",
		answer{status: 409, code: "ConditionalRequestConflict"},
		answer{status: 409, code: "ConditionalRequestConflict"})
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrExists)
	require.NotErrorIs(t, err, objstore.ErrUnavailable)
}

func TestS3ScriptedCreateConflictAbsentRetriesThenUnavailable(t *testing.T) {
	f := newScriptedS3(t)
	clk := &testclock.Instant{}
	b := f.bucket(s3.Options{RemoteOptions: objstore.RemoteOptions{Clock: clk, Retries: 3}})
	for range 4 {
		f.push("PUT", answer{status: 409, code: "ConditionalRequestConflict"})
	}
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrUnavailable, "conflicts that never clear leave the outcome unknown")
	require.NotErrorIs(t, err, objstore.ErrExists)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	require.Equal(t, []string{"PUT k", "PUT k", "GET k", "PUT k", "GET k", "PUT k", "GET k"}, f.callLog())
}

func TestS3ScriptedCreateConflictAbsentThenWins(t *testing.T) {
	f := newScriptedS3(t)
	clk := &testclock.Instant{}
	b := f.bucket(s3.Options{RemoteOptions: objstore.RemoteOptions{Clock: clk}})
	f.push("PUT",
		answer{status: 409, code: "ConditionalRequestConflict"},
		answer{status: 409, code: "ConditionalRequestConflict"})
	require.NoError(t, b.Create(t.Context(), "k", []byte("mine")))
	require.Equal(t, []string{"PUT k", "PUT k", "GET k", "PUT k"}, f.callLog(), "absent on read-back → retry")
}

func TestS3ScriptedCreateCanceledDuringBackoff(t *testing.T) {
	f := newScriptedS3(t)
	clk := clock.NewFake(time.Unix(1000, 0))
	b := f.bucket(s3.Options{RemoteOptions: objstore.RemoteOptions{Clock: clk}})
	f.push("PUT", answer{status: 409, code: "ConditionalRequestConflict"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Create(ctx, "k", []byte("mine")) }()
	clk.BlockUntil(1) // Create waits for its backoff
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrExists)
}

func TestS3ScriptedCreateFirstPreconditionFailedIsExistsWithoutReadBack(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.put("k", []byte("theirs"))
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrExists)
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr, "the SDK's error stays reachable")
	require.Equal(t, "PreconditionFailed", apiErr.ErrorCode())
	require.Equal(t, []string{"PUT k"}, f.callLog())
}

// The SDK re-sends a PUT after a 500; the first attempt had landed, so the
// second gets 412. That 412 is our own object: Create succeeds.
func TestS3ScriptedCreateResentAfter500FindsOwnObject(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.push("PUT", answer{status: 500, code: "InternalError", apply: true})
	require.NoError(t, b.Create(t.Context(), "k", []byte("mine")))
	require.Equal(t, []string{"PUT k", "PUT k", "GET k"}, f.callLog())
}

func TestS3ScriptedCreateResentAfter500FindsOtherObject(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.push("PUT", answer{status: 503, code: "SlowDown"})
	f.put("k", []byte("theirs"))
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrExists)
	require.Equal(t, []string{"PUT k", "PUT k", "GET k"}, f.callLog())
}

// Every attempt ends with the outcome unknown (a store that answers a
// conditional PUT of a large body early and resets the connection looks
// so): the key is read back, and what it holds decides.
func TestS3ScriptedCreateUnknownSettledByReadBack(t *testing.T) {
	unknown := []answer{{status: 503, code: "SlowDown"}, {status: 503, code: "SlowDown"}, {status: 503, code: "SlowDown"}}

	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.put("k", []byte("theirs"))
	f.push("PUT", unknown...)
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrExists, "another writer's object")
	require.Equal(t, []string{"PUT k", "PUT k", "PUT k", "GET k"}, f.callLog())

	f = newScriptedS3(t)
	b = f.bucket(s3.Options{})
	first := unknown[0]
	first.apply = true
	f.push("PUT", first, unknown[1], unknown[2])
	require.NoError(t, b.Create(t.Context(), "k", []byte("mine")), "our own attempt landed")

	f = newScriptedS3(t)
	b = f.bucket(s3.Options{})
	f.push("PUT", unknown...)
	err = b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrUnavailable, "nothing there: the PUT may still land")
	require.NotErrorIs(t, err, objstore.ErrExists)
}

func TestS3ScriptedCreateResentAndUnreadableIsUnavailable(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.push("PUT", answer{status: 500, code: "InternalError", apply: true})
	f.push("GET", answer{status: 503, code: "SlowDown"}, answer{status: 503, code: "SlowDown"}, answer{status: 503, code: "SlowDown"})
	err := b.Create(t.Context(), "k", []byte("mine"))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrExists)
}

// A store that ignores If-None-Match overwrites silently; objstore.Verify
// refuses it.
func TestS3ScriptedVerifyRefusesStoreIgnoringIfNoneMatch(t *testing.T) {
	f := newScriptedS3(t)
	f.ignoreIfNoneMatch = true
	err := objstore.Verify(t.Context(), f.bucket(s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "lax"}}))
	require.ErrorIs(t, err, objstore.ErrNotCreateOnly)
	require.ErrorContains(t, err, "lax")

	f2 := newScriptedS3(t)
	require.NoError(t, objstore.Verify(t.Context(), f2.bucket(s3.Options{})))
}

func TestS3ScriptedServerErrorsAreUnavailable(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.put("k", []byte("data"))
	for _, a := range []answer{{status: 503, code: "SlowDown"}, {status: 500, code: "InternalError"}, {status: 502}, {status: 429, code: "TooManyRequests"}} {
		// Three attempts, all refused.
		f.push("GET", a, a, a)
		_, err := b.Get(t.Context(), "k")
		require.ErrorIs(t, err, objstore.ErrUnavailable, "%d %s", a.status, a.code)
		require.NotErrorIs(t, err, objstore.ErrNotFound, "%d %s", a.status, a.code)
	}
	f.push("PUT", answer{status: 503, code: "SlowDown"}, answer{status: 503, code: "SlowDown"}, answer{status: 503, code: "SlowDown"})
	err := b.Create(t.Context(), "new", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	f.push("LIST", answer{status: 500, code: "InternalError"}, answer{status: 500}, answer{status: 500})
	_, err = b.List(t.Context(), "", "", 10)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	f.push("DELETE", answer{status: 503, code: "SlowDown"}, answer{status: 503}, answer{status: 503})
	require.ErrorIs(t, b.Delete(t.Context(), "k"), objstore.ErrUnavailable)
}

func TestS3ScriptedAccessDeniedIsNeverNotFound(t *testing.T) {
	const secret = "secret-that-must-not-leak-0123456789"
	f := newScriptedS3(t)
	b, err := s3.New(f.client(secret, 3), "scripted", s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "zone-a"}})
	require.NoError(t, err)
	for _, code := range []string{"AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId"} {
		f.push("GET", answer{status: 403, code: code})
		_, err := b.Get(t.Context(), "k")
		require.ErrorIs(t, err, objstore.ErrAccessDenied, code)
		require.NotErrorIs(t, err, objstore.ErrNotFound, code)
		require.NotErrorIs(t, err, objstore.ErrUnavailable, "%s: denied is not retryable", code)
		require.NotContains(t, err.Error(), secret)
		require.Contains(t, err.Error(), "zone-a", "errors name the zone")

		f.push("PUT", answer{status: 403, code: code})
		err = b.Create(t.Context(), "k", []byte("x"))
		require.ErrorIs(t, err, objstore.ErrAccessDenied, code)
		require.NotErrorIs(t, err, objstore.ErrExists, code)

		f.push("DELETE", answer{status: 403, code: code})
		require.ErrorIs(t, b.Delete(t.Context(), "k"), objstore.ErrAccessDenied, "a refused delete is not a success")
	}
	require.Len(t, f.callLog(), 9, "denials are not retried")
}

func TestS3ScriptedNoSuchBucket(t *testing.T) {
	f := newScriptedS3(t)
	b, err := s3.New(f.client("s", 3), "other-bucket", s3.Options{})
	require.NoError(t, err)
	_, err = b.Get(t.Context(), "k")
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound, "a missing bucket must not look like an empty slot")
	require.ErrorIs(t, b.Delete(t.Context(), "k"), objstore.ErrNoSuchBucket, "delete in a missing bucket is not a success")
	err = b.Create(t.Context(), "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound)

	// A bare 404 on a PUT can only be the bucket too.
	f2 := newScriptedS3(t)
	b2 := f2.bucket(s3.Options{})
	f2.push("PUT", answer{status: 404})
	err = b2.Create(t.Context(), "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	_, err = b.List(t.Context(), "", "", 1)
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
}

func TestS3ScriptedGetRange(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.put("k", []byte("0123456789"))
	f.put("ignore-range", []byte("0123456789"))
	for _, key := range []string{"k", "ignore-range"} {
		got, err := b.GetRange(t.Context(), key, 2, 3)
		require.NoError(t, err, key)
		require.Equal(t, "234", string(got), key)
		got, err = b.GetRange(t.Context(), key, 8, 100)
		require.NoError(t, err, key)
		require.Equal(t, "89", string(got), key)
		got, err = b.GetRange(t.Context(), key, 10, 1)
		require.NoError(t, err, key)
		require.Empty(t, got, key)
	}
	_, err := b.GetRange(t.Context(), "missing", 0, 1)
	require.ErrorIs(t, err, objstore.ErrNotFound)
}

func TestS3ScriptedDirectoryBucketList(t *testing.T) {
	f := newScriptedS3(t)
	f.unordered = true
	f.pageSize = 3
	b := f.bucket(s3.Options{DirectoryBucket: true})
	var want []string
	for i := range 10 {
		k := fmt.Sprintf("dir/sub/k%02d", i)
		f.put(k, []byte{byte(i)})
		want = append(want, k)
	}
	f.put("dir/other", []byte("x"))
	f.put("elsewhere/k", []byte("x"))

	var got []string
	for o, err := range objstore.All(t.Context(), b, "dir/sub/k") {
		require.NoError(t, err)
		got = append(got, o.Key)
	}
	require.Equal(t, want, got)

	page, err := b.List(t.Context(), "dir/sub/k0", "dir/sub/k03", 2)
	require.NoError(t, err)
	require.Equal(t, []objstore.ObjectInfo{{Key: "dir/sub/k04", Size: 1}, {Key: "dir/sub/k05", Size: 1}}, page)

	// Requests carried only '/'-terminated prefixes and no start-after.
	calls := f.callLog()
	require.NotEmpty(t, calls)
	for _, c := range calls {
		require.Equal(t, `LIST prefix="dir/sub/" start-after=""`, c)
	}
}

func TestS3ScriptedListSkipsEmptyTruncatedPages(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.put("p/a", []byte("1"))
	f.put("p/b", []byte("22"))
	f.push("LIST", answer{body: `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>0</NextContinuationToken></ListBucketResult>`})
	page, err := b.List(t.Context(), "p/", "", 5)
	require.NoError(t, err)
	require.Equal(t, []objstore.ObjectInfo{{Key: "p/a", Size: 1}, {Key: "p/b", Size: 2}}, page,
		"an empty truncated page is not the end of the listing")
	require.Len(t, f.callLog(), 2)
}

func TestS3ScriptedConnectionRefusedIsUnavailable(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	f.srv.Close()
	_, err := b.Get(t.Context(), "k")
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	err = b.Create(t.Context(), "k", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrExists)
}

func TestS3ScriptedMalformedListIsUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte("<ListBucketResult><Contents><Key>trunc"))
	}))
	t.Cleanup(srv.Close)
	f := &scriptedS3{t: t, srv: srv}
	b, err := s3.New(f.client("s", 1), "scripted", s3.Options{})
	require.NoError(t, err)
	_, err = b.List(t.Context(), "", "", 10)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
}

func TestS3NewValidates(t *testing.T) {
	f := newScriptedS3(t)
	c := f.client("s", 1)
	remotetest.NewValidates(t, func(c *awss3.Client, name string, o objstore.RemoteOptions) (objstore.Bucket, error) {
		return s3.New(c, name, s3.Options{RemoteOptions: o})
	}, c, "bucket", "a/b", "a b", strings.Repeat("b", 256))
	b, err := s3.New(c, "bkt", s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "zone-b"}})
	require.NoError(t, err)
	require.Equal(t, "bkt", b.BucketName())
}

func TestS3NewClientValidates(t *testing.T) {
	ctx := t.Context()
	for _, cfg := range []s3.ClientConfig{
		{AccessKey: "a"},
		{SecretKey: "s"},
		{Endpoint: "ftp://x"},
		{Endpoint: "http://user:pass@host"},
		{Endpoint: "::"},
		{MaxAttempts: -1},
	} {
		_, err := s3.NewClient(ctx, cfg)
		require.Error(t, err, "%+v", cfg)
		require.NotContains(t, err.Error(), "pass@")
	}
	c, err := s3.NewClient(ctx, s3.ClientConfig{Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "s", PathStyle: true})
	require.NoError(t, err)
	require.NotNil(t, c)
}

// TestS3ScriptedCreateRefusesOversize: an object Get could not read back
// is refused before anything is sent.
func TestS3ScriptedCreateRefusesOversize(t *testing.T) {
	f := newScriptedS3(t)
	b := f.bucket(s3.Options{})
	err := b.Create(t.Context(), "k", make([]byte, s3.MaxObjectSize+1))
	require.ErrorIs(t, err, objstore.ErrObjectTooLarge)
	require.ErrorIs(t, err, objstore.ErrRejected)
	require.NotErrorIs(t, err, objstore.ErrExists)
	require.Empty(t, f.callLog(), "nothing was sent")
}
