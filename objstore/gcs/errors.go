package gcs

import (
	"errors"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutline/cutline/objstore"
)

// classify maps an error from the storage client onto the sentinel it
// means: the client's sentinels first, then the HTTP status (JSON and XML
// APIs, objstore.ClassifyStatus), then the gRPC code (gRPC client);
// objstore.Remote.Call applies it. What it cannot place is
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
		return objstore.ClassifyStatus(code)
	}
	if st, ok := grpcStatus(err); ok {
		return classifyGRPC(st.Code())
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
		return objstore.ErrUnsatisfiableRange
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
