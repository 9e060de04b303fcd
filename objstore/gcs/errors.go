package gcs

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutline/cutline/objstore"
)

// errRange: 416 (or OUT_OF_RANGE), the offset is at or past the end.
// GetRange answers it with an empty result; elsewhere the request was
// rejected.
var errRange = fmt.Errorf("%w: range not satisfiable", objstore.ErrRejected)

// classify maps an error from the storage client onto the sentinel it
// means: the client's sentinels first, then the HTTP status (JSON and XML
// APIs), then the gRPC code (gRPC client). What it cannot place is
// ErrUnavailable: an unrecognised failure means "unknown", never "absent".
func classify(err error) error {
	if err == nil {
		panic("gcs: classify(nil)")
	}
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return objstore.ErrNoSuchBucket
	case errors.Is(err, storage.ErrObjectNotExist):
		return objstore.ErrNotFound
	}
	if code := httpCode(err); code > 0 {
		return classifyHTTP(code)
	}
	if st, ok := grpcStatus(err); ok {
		return classifyGRPC(st.Code())
	}
	return objstore.ErrUnavailable
}

func classifyHTTP(code int) error {
	switch {
	case code == http.StatusNotFound:
		return objstore.ErrNotFound
	case code == http.StatusPreconditionFailed:
		return objstore.ErrExists
	case code == http.StatusRequestedRangeNotSatisfiable:
		return errRange
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return objstore.ErrAccessDenied
	case code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500:
		return objstore.ErrUnavailable
	case code >= 400:
		return objstore.ErrRejected
	}
	return objstore.ErrUnavailable
}

func classifyGRPC(c codes.Code) error {
	switch c {
	case codes.NotFound:
		return objstore.ErrNotFound
	case codes.FailedPrecondition, codes.AlreadyExists:
		return objstore.ErrExists
	case codes.OutOfRange:
		return errRange
	case codes.PermissionDenied, codes.Unauthenticated:
		return objstore.ErrAccessDenied
	case codes.InvalidArgument, codes.Unimplemented:
		return objstore.ErrRejected
	}
	// Unavailable, DeadlineExceeded, ResourceExhausted, Internal, Aborted,
	// Unknown, Canceled (not by our context), DataLoss, OK-with-error.
	return objstore.ErrUnavailable
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

// classifyCall classifies err from a call made under ctx into the error a
// Bucket method returns (before the *objstore.OpError wrapper): when the
// caller's context has ended, that is the answer. errors.As still reaches
// the client's googleapi.Error or gRPC status.
func classifyCall(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return objstore.ContextEnded(ctxErr, err)
	}
	return objstore.Classify(classify(err), err)
}
