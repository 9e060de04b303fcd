package s3

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/classifytest"
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

// backend is s3's classification: a Remote over classify, whose own
// class errConflict only Create tells apart.
var backend = classifytest.Remote(classify,
	classifytest.Narrowed{Class: errConflict, Seen: objstore.ErrUnavailable, Why: "a conflict outside Create is unknown"})

func TestS3Classify(t *testing.T) {
	classifytest.Run(t, backend, []classifytest.Case{
		{"NoSuchKey typed", sdkError(404, &types.NoSuchKey{}), objstore.ErrNotFound},
		{"NoSuchKey generic", sdkError(404, apiErr("NoSuchKey")), objstore.ErrNotFound},
		{"HEAD NotFound typed", sdkError(404, &types.NotFound{}), objstore.ErrNotFound},
		{"bare 404", sdkError(404, apiErr("")), objstore.ErrNotFound},
		{"NoSuchBucket is not not-found", sdkError(404, &types.NoSuchBucket{}), objstore.ErrNoSuchBucket},
		{"PreconditionFailed", sdkError(412, apiErr("PreconditionFailed")), objstore.ErrExists},
		{"bare 412", sdkError(412, apiErr("")), objstore.ErrExists},
		{"ConditionalRequestConflict", sdkError(409, apiErr("ConditionalRequestConflict")), errConflict},
		{"other 409 OperationAborted", sdkError(409, apiErr("OperationAborted")), objstore.ErrUnavailable},
		{"bare 409", sdkError(409, apiErr("")), objstore.ErrUnavailable},
		{"InvalidRange", sdkError(416, apiErr("InvalidRange")), objstore.ErrUnsatisfiableRange},
		{"bare 416", sdkError(416, apiErr("")), objstore.ErrUnsatisfiableRange},
		{"AccessDenied", sdkError(403, apiErr("AccessDenied")), objstore.ErrAccessDenied},
		{"AccessDenied on a 404 status still denied", sdkError(404, apiErr("AccessDenied")), objstore.ErrAccessDenied},
		{"InvalidAccessKeyId", sdkError(403, apiErr("InvalidAccessKeyId")), objstore.ErrAccessDenied},
		{"SignatureDoesNotMatch", sdkError(403, apiErr("SignatureDoesNotMatch")), objstore.ErrAccessDenied},
		{"ExpiredToken 400", sdkError(400, apiErr("ExpiredToken")), objstore.ErrAccessDenied},
		{"bare 403", sdkError(403, apiErr("")), objstore.ErrAccessDenied},
		{"bare 401", sdkError(401, apiErr("")), objstore.ErrAccessDenied},
		{"SlowDown 503", sdkError(503, apiErr("SlowDown")), objstore.ErrUnavailable},
		{"InternalError 500", sdkError(500, apiErr("InternalError")), objstore.ErrUnavailable},
		{"bare 502", sdkError(502, apiErr("")), objstore.ErrUnavailable},
		{"bare 504", sdkError(504, apiErr("")), objstore.ErrUnavailable},
		{"RequestTimeout 400", sdkError(400, apiErr("RequestTimeout")), objstore.ErrUnavailable},
		{"429", sdkError(429, apiErr("")), objstore.ErrUnavailable},
		{"408", sdkError(408, apiErr("")), objstore.ErrUnavailable},
		{"InvalidArgument 400", sdkError(400, apiErr("InvalidArgument")), objstore.ErrRejected},
		{"NotImplemented 501 is a 5xx", sdkError(501, apiErr("NotImplemented")), objstore.ErrUnavailable},
		{"411", sdkError(411, apiErr("MissingContentLength")), objstore.ErrRejected},
		{"max attempts wraps 503", &retry.MaxAttemptsError{Attempt: 3, Err: sdkError(503, apiErr("SlowDown"))}, objstore.ErrUnavailable},
		{"max attempts wraps 404", &retry.MaxAttemptsError{Attempt: 3, Err: sdkError(404, &types.NoSuchKey{})}, objstore.ErrNotFound},
		{"retry quota joined with 500", errors.Join(sdkError(500, apiErr("InternalError")),
			fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{Available: 1, Requested: 5})), objstore.ErrUnavailable},
		{"retry quota alone", fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{}), objstore.ErrUnavailable},
		{"deserialization", transportError(&smithy.DeserializationError{Err: io.ErrUnexpectedEOF}), objstore.ErrUnavailable},
		{"200 with a decode error", sdkError(200, &smithy.DeserializationError{Err: errors.New("bad xml")}), objstore.ErrUnavailable},
	}, classifytest.Transport(transportError))
}

func TestS3ClassifyCallPrefersTheContext(t *testing.T) {
	classifytest.CallPrefersTheContext(t, backend.Call, transportError)
}
