package s3

import (
	"errors"
	"fmt"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cutline/cutline/objstore"
)

// errConflict: an answer that Create settles itself; elsewhere it reads
// as the sentinel it wraps.
var (
	// errConflict: 409 ConditionalRequestConflict, another write to the key
	// was in flight. Create retries it; elsewhere the outcome is unknown.
	errConflict = fmt.Errorf("%w: conflicting write in progress", objstore.ErrUnavailable)
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
// the sentinel it means; objstore.Remote.Call applies it. The SDK's
// messages carry operation, status, request id and the store's message;
// they never contain the secret key. It looks at the API error code first, then at the
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
			return objstore.ErrUnsatisfiableRange
		case deniedCodes[code]:
			return objstore.ErrAccessDenied
		case unavailableCodes[code]:
			return objstore.ErrUnavailable
		}
	}
	// No HTTP response (status 0: connection refused or reset, DNS, TLS, a
	// timeout, a truncated body, a retry quota exhausted) is "unknown", as
	// is a 2xx/3xx with an error attached (a body that failed to decode).
	return objstore.ClassifyStatus(status)
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
