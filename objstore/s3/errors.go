package s3

import (
	"context"
	"errors"
	"fmt"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cutline/cutline/objstore"
)

// Two answers that one method settles itself. Elsewhere they read as the
// sentinel they wrap.
var (
	// errConflict: 409 ConditionalRequestConflict, another write to the key
	// was in flight. Create retries it; elsewhere the outcome is unknown.
	errConflict = fmt.Errorf("%w: conflicting write in progress", objstore.ErrUnavailable)
	// errRange: 416 InvalidRange, the offset is at or past the end. GetRange
	// answers it with an empty result; elsewhere the request was rejected.
	errRange = fmt.Errorf("%w: range not satisfiable", objstore.ErrRejected)
)

// Error codes grouped by meaning. S3 and S3-compatible stores agree on these
// names; the HTTP status is the fallback when a code is missing or unknown.
var (
	notFoundCodes = map[string]bool{"NoSuchKey": true, "NotFound": true}
	deniedCodes   = map[string]bool{
		"AccessDenied": true, "Forbidden": true, "InvalidAccessKeyId": true,
		"SignatureDoesNotMatch": true, "ExpiredToken": true, "InvalidToken": true,
		"TokenRefreshRequired": true, "AllAccessDisabled": true,
		"AccountProblem": true, "InvalidSecurity": true, "Unauthorized": true,
	}
	unavailableCodes = map[string]bool{
		"SlowDown": true, "ServiceUnavailable": true, "InternalError": true,
		"RequestTimeout": true, "Throttling": true, "ThrottlingException": true,
		"RequestThrottled": true, "TooManyRequests": true,
		"TooManyRequestsException": true, "RequestLimitExceeded": true,
		"BandwidthLimitExceeded": true, "OperationAborted": true,
		"PriorRequestNotComplete": true,
	}
)

// classify maps an error returned by the SDK (after its own retries) onto
// the sentinel it means. It looks at the API error code first, then at the
// HTTP status, then at the transport error. What it cannot place is
// ErrUnavailable: an unrecognised failure means "unknown", never "absent".
func classify(err error) error {
	if err == nil {
		panic("s3: classify(nil)")
	}
	status := httpStatus(err)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		switch {
		case code == "NoSuchBucket":
			return objstore.ErrNoSuchBucket
		case notFoundCodes[code]:
			return objstore.ErrNotFound
		case code == "PreconditionFailed":
			return objstore.ErrExists
		case code == "ConditionalRequestConflict":
			return errConflict
		case code == "InvalidRange":
			return errRange
		case deniedCodes[code]:
			return objstore.ErrAccessDenied
		case unavailableCodes[code]:
			return objstore.ErrUnavailable
		}
	}
	switch {
	case status == 0:
		// No HTTP response: connection refused or reset, DNS, TLS, a timeout,
		// a truncated body, a retry quota exhausted... all "unknown".
		return objstore.ErrUnavailable
	case status == 404:
		return objstore.ErrNotFound
	case status == 412:
		return objstore.ErrExists
	case status == 416:
		return errRange
	case status == 401 || status == 403:
		return objstore.ErrAccessDenied
	case status == 408 || status == 409 || status == 429 || status >= 500:
		return objstore.ErrUnavailable
	case status >= 400:
		return objstore.ErrRejected
	}
	// A 2xx/3xx with an error attached (e.g. a body that failed to decode):
	// the answer was not understood.
	return objstore.ErrUnavailable
}

// httpStatus returns the status of the HTTP response behind err, or 0 when
// the request never got one.
func httpStatus(err error) int {
	var awsErr *awshttp.ResponseError
	if errors.As(err, &awsErr) && awsErr.ResponseError != nil && awsErr.Response != nil && awsErr.Response.Response != nil {
		return awsErr.Response.StatusCode
	}
	var smErr *smithyhttp.ResponseError
	if errors.As(err, &smErr) && smErr.Response != nil && smErr.Response.Response != nil {
		return smErr.Response.StatusCode
	}
	return 0
}

// classifyCall classifies err as returned by a call made under ctx, into
// the error a Bucket method returns (before the *objstore.OpError wrapper).
// When the caller's context has ended, that is the answer, whatever the SDK
// made of it. The SDK's messages carry operation, status, request id and
// the store's message; they never contain the secret key.
func classifyCall(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return objstore.ContextEnded(ctxErr, err)
	}
	return objstore.Classify(classify(err), err)
}
