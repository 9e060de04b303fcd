package gcs

import (
	"context"
	"errors"
	"net/http"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutline/cutline/objstore"
)

// Errors specific to GCS. They never match objstore.ErrNotFound or
// objstore.ErrExists, so callers treat them as "outcome unknown"; unlike
// objstore.ErrUnavailable they are not worth retrying without a change of
// configuration.
var (
	// ErrAccessDenied: the credentials were refused or lack a permission
	// (401/403, PERMISSION_DENIED, UNAUTHENTICATED). It says nothing about
	// whether the object exists.
	ErrAccessDenied = errors.New("gcs: access denied")
	// ErrNoSuchBucket: the bucket does not exist. It is not reported as
	// objstore.ErrNotFound: a mistyped bucket must not look like an empty
	// slot.
	ErrNoSuchBucket = errors.New("gcs: no such bucket")
	// ErrRejected: the request was refused as invalid (another 4xx or
	// INVALID_ARGUMENT). Retrying the same request will not help.
	ErrRejected = errors.New("gcs: request rejected")
)

type kind int

const (
	kindUnavailable  kind = iota // 5xx, 408, 429, transport errors, anything unknown
	kindNotFound                 // object does not exist
	kindExists                   // 412 conditionNotMet on a create
	kindInvalidRange             // 416
	kindDenied                   // 401/403
	kindNoBucket                 // bucket does not exist
	kindRejected                 // other 4xx
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

// classify maps an error from the storage client onto a kind: the client's
// sentinels first, then the HTTP status (JSON and XML APIs), then the gRPC
// code (gRPC client). What it cannot place is kindUnavailable: an
// unrecognised failure means "unknown", never "absent".
func classify(err error) kind {
	if err == nil {
		panic("gcs: classify(nil)")
	}
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return kindNoBucket
	case errors.Is(err, storage.ErrObjectNotExist):
		return kindNotFound
	}
	if code := httpCode(err); code > 0 {
		return classifyHTTP(code)
	}
	if st, ok := grpcStatus(err); ok {
		return classifyGRPC(st.Code())
	}
	return kindUnavailable
}

func classifyHTTP(code int) kind {
	switch {
	case code == http.StatusNotFound:
		return kindNotFound
	case code == http.StatusPreconditionFailed:
		return kindExists
	case code == http.StatusRequestedRangeNotSatisfiable:
		return kindInvalidRange
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return kindDenied
	case code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500:
		return kindUnavailable
	case code >= 400:
		return kindRejected
	}
	return kindUnavailable
}

func classifyGRPC(c codes.Code) kind {
	switch c {
	case codes.NotFound:
		return kindNotFound
	case codes.FailedPrecondition, codes.AlreadyExists:
		return kindExists
	case codes.OutOfRange:
		return kindInvalidRange
	case codes.PermissionDenied, codes.Unauthenticated:
		return kindDenied
	case codes.InvalidArgument, codes.Unimplemented:
		return kindRejected
	}
	// Unavailable, DeadlineExceeded, ResourceExhausted, Internal, Aborted,
	// Unknown, Canceled (not by our context), DataLoss, OK-with-error.
	return kindUnavailable
}

// httpCode returns the HTTP status behind err, or 0.
func httpCode(err error) int {
	var gErr *googleapi.Error
	if errors.As(err, &gErr) && gErr.Code > 0 {
		return gErr.Code
	}
	var aErr *apierror.APIError
	if errors.As(err, &aErr) {
		if c := aErr.HTTPCode(); c > 0 {
			return c
		}
	}
	return 0
}

// grpcStatus returns the gRPC status behind err when there is one.
func grpcStatus(err error) (*status.Status, bool) {
	var aErr *apierror.APIError
	if errors.As(err, &aErr) && aErr.GRPCStatus() != nil {
		return aErr.GRPCStatus(), true
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) && se.GRPCStatus() != nil {
		return se.GRPCStatus(), true
	}
	return nil, false
}

// classifiedError pairs a sentinel with the client's error, so errors.Is
// finds the sentinel and errors.As still reaches googleapi.Error.
type classifiedError struct {
	sentinel error
	cause    error
}

func (e *classifiedError) Error() string   { return e.sentinel.Error() + ": " + e.cause.Error() }
func (e *classifiedError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// contextError reports the context's end, keeping the client's error.
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
	return objstore.Unavailable(err)
}

// classifyCall classifies err from a call made under ctx: when the caller's
// context has ended, that is the answer.
func classifyCall(ctx context.Context, err error) (kind, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return kindCanceled, &contextError{ctxErr: ctxErr, cause: err}
	}
	return classify(err), err
}
