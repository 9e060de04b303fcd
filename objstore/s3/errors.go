package s3

import (
	"context"
	"errors"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cutline/cutline/objstore"
)

// Errors specific to S3. They never match objstore.ErrNotFound or
// objstore.ErrExists, so callers treat them as "outcome unknown"; unlike
// objstore.ErrUnavailable they are not worth retrying without a change of
// configuration.
var (
	// ErrAccessDenied: the store refused the credentials or the permission
	// (401/403, AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch,
	// expired tokens). It says nothing about whether the object exists.
	ErrAccessDenied = errors.New("s3: access denied")
	// ErrNoSuchBucket: the bucket itself does not exist. It is not reported
	// as objstore.ErrNotFound because a misconfigured bucket name must not
	// look like an empty slot.
	ErrNoSuchBucket = errors.New("s3: no such bucket")
	// ErrRejected: the store refused the request as malformed or unsupported
	// (another 4xx). Retrying the same request will not help.
	ErrRejected = errors.New("s3: request rejected")
)

// kind is the classification of one failed S3 call.
type kind int

const (
	kindUnavailable  kind = iota // 5xx, throttling, timeouts, transport errors, anything unknown
	kindNotFound                 // 404 NoSuchKey / NotFound
	kindExists                   // 412 PreconditionFailed
	kindConflict                 // 409 ConditionalRequestConflict
	kindInvalidRange             // 416 InvalidRange
	kindDenied                   // 401/403
	kindNoBucket                 // 404 NoSuchBucket
	kindRejected                 // any other 4xx
	kindCanceled                 // the caller's context ended
)

func (k kind) String() string {
	switch k {
	case kindUnavailable:
		return "unavailable"
	case kindNotFound:
		return "not-found"
	case kindExists:
		return "exists"
	case kindConflict:
		return "conflict"
	case kindInvalidRange:
		return "invalid-range"
	case kindDenied:
		return "denied"
	case kindNoBucket:
		return "no-bucket"
	case kindRejected:
		return "rejected"
	case kindCanceled:
		return "canceled"
	}
	return "unknown"
}

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

// classify maps an error returned by the SDK (after its own retries) onto a
// kind. It looks at the API error code first, then at the HTTP status, then
// at the transport error. What it cannot place is kindUnavailable: an
// unrecognised failure means "unknown", never "absent".
func classify(err error) kind {
	if err == nil {
		panic("s3: classify(nil)")
	}
	status := httpStatus(err)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		switch {
		case code == "NoSuchBucket":
			return kindNoBucket
		case notFoundCodes[code]:
			return kindNotFound
		case code == "PreconditionFailed":
			return kindExists
		case code == "ConditionalRequestConflict":
			return kindConflict
		case code == "InvalidRange":
			return kindInvalidRange
		case deniedCodes[code]:
			return kindDenied
		case unavailableCodes[code]:
			return kindUnavailable
		}
	}
	switch {
	case status == 0:
		// No HTTP response: connection refused or reset, DNS, TLS, a timeout,
		// a truncated body, a retry quota exhausted... all "unknown".
		return kindUnavailable
	case status == 404:
		return kindNotFound
	case status == 412:
		return kindExists
	case status == 416:
		return kindInvalidRange
	case status == 401 || status == 403:
		return kindDenied
	case status == 408 || status == 409 || status == 429 || status >= 500:
		return kindUnavailable
	case status >= 400:
		return kindRejected
	}
	// A 2xx/3xx with an error attached (e.g. a body that failed to decode):
	// the answer was not understood.
	return kindUnavailable
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

// classifiedError pairs a sentinel with the SDK's error, so errors.Is finds
// the sentinel and errors.As still reaches the SDK's types (APIError,
// ResponseError). The SDK's messages carry operation, status, request id and
// the store's message; they never contain the secret key.
type classifiedError struct {
	sentinel error
	cause    error
}

func (e *classifiedError) Error() string   { return e.sentinel.Error() + ": " + e.cause.Error() }
func (e *classifiedError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// contextError reports the context's end in a form that matches both the
// context's error and the SDK's cause.
type contextError struct {
	ctxErr error
	cause  error
}

func (e *contextError) Error() string {
	if e.cause == nil {
		return e.ctxErr.Error()
	}
	return e.ctxErr.Error() + ": " + e.cause.Error()
}

func (e *contextError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.ctxErr}
	}
	return []error{e.ctxErr, e.cause}
}

// wrap turns an SDK error of kind k into the error a Bucket method returns
// (before the *objstore.OpError wrapper).
func wrap(k kind, err error) error {
	switch k {
	case kindNotFound:
		return &classifiedError{sentinel: objstore.ErrNotFound, cause: err}
	case kindExists:
		return &classifiedError{sentinel: objstore.ErrExists, cause: err}
	case kindDenied:
		return &classifiedError{sentinel: ErrAccessDenied, cause: err}
	case kindNoBucket:
		return &classifiedError{sentinel: ErrNoSuchBucket, cause: err}
	case kindRejected, kindInvalidRange:
		return &classifiedError{sentinel: ErrRejected, cause: err}
	case kindCanceled:
		return err
	}
	// kindUnavailable, and kindConflict outside Create.
	return objstore.Unavailable(err)
}

// classifyCall classifies err as returned by a call made under ctx: when the
// caller's context has ended, that is the answer, whatever the SDK made of
// it.
func classifyCall(ctx context.Context, err error) (kind, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return kindCanceled, &contextError{ctxErr: ctxErr, cause: err}
	}
	k := classify(err)
	return k, err
}
