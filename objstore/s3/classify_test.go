package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
)

// sdkError builds the error chain the SDK returns for an HTTP answer:
// OperationError → aws ResponseError → smithy ResponseError → API error.
func sdkError(status int, api error) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: "GetObject",
		Err: &awshttp.ResponseError{
			RequestID: "req-1",
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err:      api,
			},
		},
	}
}

func apiErr(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: "message for " + code}
}

func transportError(err error) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: err}
}

func TestS3Classify(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want kind
	}{
		{"NoSuchKey typed", sdkError(404, &types.NoSuchKey{}), kindNotFound},
		{"NoSuchKey generic", sdkError(404, apiErr("NoSuchKey")), kindNotFound},
		{"HEAD NotFound typed", sdkError(404, &types.NotFound{}), kindNotFound},
		{"bare 404", sdkError(404, apiErr("")), kindNotFound},
		{"NoSuchBucket is not not-found", sdkError(404, &types.NoSuchBucket{}), kindNoBucket},
		{"PreconditionFailed", sdkError(412, apiErr("PreconditionFailed")), kindExists},
		{"bare 412", sdkError(412, apiErr("")), kindExists},
		{"ConditionalRequestConflict", sdkError(409, apiErr("ConditionalRequestConflict")), kindConflict},
		{"other 409 OperationAborted", sdkError(409, apiErr("OperationAborted")), kindUnavailable},
		{"bare 409", sdkError(409, apiErr("")), kindUnavailable},
		{"InvalidRange", sdkError(416, apiErr("InvalidRange")), kindInvalidRange},
		{"bare 416", sdkError(416, apiErr("")), kindInvalidRange},
		{"AccessDenied", sdkError(403, apiErr("AccessDenied")), kindDenied},
		{"AccessDenied on a 404 status still denied", sdkError(404, apiErr("AccessDenied")), kindDenied},
		{"InvalidAccessKeyId", sdkError(403, apiErr("InvalidAccessKeyId")), kindDenied},
		{"SignatureDoesNotMatch", sdkError(403, apiErr("SignatureDoesNotMatch")), kindDenied},
		{"ExpiredToken 400", sdkError(400, apiErr("ExpiredToken")), kindDenied},
		{"bare 403", sdkError(403, apiErr("")), kindDenied},
		{"bare 401", sdkError(401, apiErr("")), kindDenied},
		{"SlowDown 503", sdkError(503, apiErr("SlowDown")), kindUnavailable},
		{"InternalError 500", sdkError(500, apiErr("InternalError")), kindUnavailable},
		{"bare 502", sdkError(502, apiErr("")), kindUnavailable},
		{"bare 504", sdkError(504, apiErr("")), kindUnavailable},
		{"RequestTimeout 400", sdkError(400, apiErr("RequestTimeout")), kindUnavailable},
		{"429", sdkError(429, apiErr("")), kindUnavailable},
		{"408", sdkError(408, apiErr("")), kindUnavailable},
		{"InvalidArgument 400", sdkError(400, apiErr("InvalidArgument")), kindRejected},
		{"NotImplemented 501 is a 5xx", sdkError(501, apiErr("NotImplemented")), kindUnavailable},
		{"411", sdkError(411, apiErr("MissingContentLength")), kindRejected},
		{"max attempts wraps 503", &retry.MaxAttemptsError{Attempt: 3, Err: sdkError(503, apiErr("SlowDown"))}, kindUnavailable},
		{"max attempts wraps 404", &retry.MaxAttemptsError{Attempt: 3, Err: sdkError(404, &types.NoSuchKey{})}, kindNotFound},
		{"retry quota joined with 500", errors.Join(sdkError(500, apiErr("InternalError")),
			fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{Available: 1, Requested: 5})), kindUnavailable},
		{"retry quota alone", fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{}), kindUnavailable},
		{"connection refused", transportError(&url.Error{Op: "Put", URL: "http://127.0.0.1:1/b/k",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), kindUnavailable},
		{"connection reset", transportError(&url.Error{Op: "Get", URL: "http://x/b/k", Err: syscall.ECONNRESET}), kindUnavailable},
		{"unexpected EOF", transportError(io.ErrUnexpectedEOF), kindUnavailable},
		{"timeout", transportError(&net.DNSError{IsTimeout: true}), kindUnavailable},
		{"deadline not ours", transportError(context.DeadlineExceeded), kindUnavailable},
		{"deserialization", transportError(&smithy.DeserializationError{Err: io.ErrUnexpectedEOF}), kindUnavailable},
		{"200 with a decode error", sdkError(200, &smithy.DeserializationError{Err: errors.New("bad xml")}), kindUnavailable},
		{"unknown", errors.New("something odd"), kindUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			require.Equal(t, tc.want, got, "classify(%v)", tc.err)

			// What callers see after wrapping.
			w := wrap(got, tc.err)
			switch got {
			case kindNotFound:
				assert.ErrorIs(t, w, objstore.ErrNotFound)
			case kindExists:
				assert.ErrorIs(t, w, objstore.ErrExists)
			case kindUnavailable, kindConflict:
				assert.ErrorIs(t, w, objstore.ErrUnavailable)
			case kindDenied:
				assert.ErrorIs(t, w, ErrAccessDenied)
			case kindNoBucket:
				assert.ErrorIs(t, w, ErrNoSuchBucket)
			case kindRejected, kindInvalidRange:
				assert.ErrorIs(t, w, ErrRejected)
			}
			if got != kindNotFound {
				assert.NotErrorIs(t, w, objstore.ErrNotFound, "only a definite 404 may read as not found")
			}
			if got != kindExists {
				assert.NotErrorIs(t, w, objstore.ErrExists)
			}
			// The SDK's error stays reachable.
			assert.ErrorIs(t, w, tc.err)
		})
	}
}

func TestS3ClassifyCallPrefersTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cause := transportError(&url.Error{Op: "Get", URL: "http://x", Err: context.Canceled})
	k, err := classifyCall(ctx, cause)
	require.Equal(t, kindCanceled, k)
	w := wrap(k, err)
	require.ErrorIs(t, w, context.Canceled)
	require.ErrorIs(t, w, cause)
	require.NotErrorIs(t, w, objstore.ErrNotFound)

	// A live context leaves the SDK's classification alone, even when the
	// SDK's own timeout says "deadline exceeded".
	k, _ = classifyCall(context.Background(), transportError(context.DeadlineExceeded))
	require.Equal(t, kindUnavailable, k)
}

func TestS3KindString(t *testing.T) {
	for k := kindUnavailable; k <= kindCanceled; k++ {
		require.NotEqual(t, "unknown", k.String(), "kind %d", int(k))
	}
}
