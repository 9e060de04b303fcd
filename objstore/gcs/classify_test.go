package gcs

import (
	"fmt"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/classifytest"
)

func httpErr(code int, reason string) error {
	return &googleapi.Error{Code: code, Message: "message " + reason, Errors: []googleapi.ErrorItem{{Reason: reason}}}
}

func grpcErr(c codes.Code) error {
	ae, ok := apierror.FromError(status.Error(c, "grpc "+c.String()))
	if !ok {
		panic("apierror.FromError refused a status error")
	}
	return ae
}

func TestGCSClassify(t *testing.T) {
	classifytest.Run(t, classifytest.Remote(classify), []classifytest.Case{
		{"ErrObjectNotExist", storage.ErrObjectNotExist, objstore.ErrNotFound},
		{"ErrObjectNotExist wrapped over a 404", fmt.Errorf("%w: %w", storage.ErrObjectNotExist, httpErr(404, "notFound")), objstore.ErrNotFound},
		{"ErrBucketNotExist", fmt.Errorf("%w: %w", storage.ErrBucketNotExist, httpErr(404, "notFound")), objstore.ErrNoSuchBucket},
		{"412 conditionNotMet", httpErr(412, "conditionNotMet"), objstore.ErrExists},
		{"412 wrapped by the writer", fmt.Errorf("writer: %w", httpErr(412, "conditionNotMet")), objstore.ErrExists},
		{"404 bare", httpErr(404, "notFound"), objstore.ErrNotFound},
		{"416", httpErr(416, "requestedRangeNotSatisfiable"), objstore.ErrUnsatisfiableRange},
		{"401", httpErr(401, "required"), objstore.ErrAccessDenied},
		{"403", httpErr(403, "forbidden"), objstore.ErrAccessDenied},
		{"403 as apierror", func() error { ae, _ := apierror.FromError(httpErr(403, "forbidden")); return ae }(), objstore.ErrAccessDenied},
		{"408", httpErr(408, ""), objstore.ErrUnavailable},
		{"409", httpErr(409, "conflict"), objstore.ErrUnavailable},
		{"429", httpErr(429, "rateLimitExceeded"), objstore.ErrUnavailable},
		{"500", httpErr(500, "backendError"), objstore.ErrUnavailable},
		{"503", httpErr(503, "backendError"), objstore.ErrUnavailable},
		{"400", httpErr(400, "invalid"), objstore.ErrRejected},
		{"grpc NotFound", grpcErr(codes.NotFound), objstore.ErrNotFound},
		{"grpc FailedPrecondition", grpcErr(codes.FailedPrecondition), objstore.ErrExists},
		{"grpc PermissionDenied", grpcErr(codes.PermissionDenied), objstore.ErrAccessDenied},
		{"grpc Unauthenticated", grpcErr(codes.Unauthenticated), objstore.ErrAccessDenied},
		{"grpc OutOfRange", grpcErr(codes.OutOfRange), objstore.ErrUnsatisfiableRange},
		{"grpc Unavailable", grpcErr(codes.Unavailable), objstore.ErrUnavailable},
		{"grpc DeadlineExceeded", grpcErr(codes.DeadlineExceeded), objstore.ErrUnavailable},
		{"grpc ResourceExhausted", grpcErr(codes.ResourceExhausted), objstore.ErrUnavailable},
		{"grpc Internal", grpcErr(codes.Internal), objstore.ErrUnavailable},
		{"grpc InvalidArgument", grpcErr(codes.InvalidArgument), objstore.ErrRejected},
		{"raw grpc status", status.Error(codes.Unavailable, "x"), objstore.ErrUnavailable},
	}, classifytest.Transport(nil))
}

func TestGCSClassifyCallPrefersTheContext(t *testing.T) {
	classifytest.CallPrefersTheContext(t, classifytest.Remote(classify).Call, nil)
}
