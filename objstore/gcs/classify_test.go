package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutline/cutline/objstore"
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
	cases := []struct {
		name string
		err  error
		want kind
	}{
		{"ErrObjectNotExist", storage.ErrObjectNotExist, kindNotFound},
		{"ErrObjectNotExist wrapped over a 404", fmt.Errorf("%w: %w", storage.ErrObjectNotExist, httpErr(404, "notFound")), kindNotFound},
		{"ErrBucketNotExist", fmt.Errorf("%w: %w", storage.ErrBucketNotExist, httpErr(404, "notFound")), kindNoBucket},
		{"412 conditionNotMet", httpErr(412, "conditionNotMet"), kindExists},
		{"412 wrapped by the writer", fmt.Errorf("writer: %w", httpErr(412, "conditionNotMet")), kindExists},
		{"404 bare", httpErr(404, "notFound"), kindNotFound},
		{"416", httpErr(416, "requestedRangeNotSatisfiable"), kindInvalidRange},
		{"401", httpErr(401, "required"), kindDenied},
		{"403", httpErr(403, "forbidden"), kindDenied},
		{"403 as apierror", func() error { ae, _ := apierror.FromError(httpErr(403, "forbidden")); return ae }(), kindDenied},
		{"408", httpErr(408, ""), kindUnavailable},
		{"409", httpErr(409, "conflict"), kindUnavailable},
		{"429", httpErr(429, "rateLimitExceeded"), kindUnavailable},
		{"500", httpErr(500, "backendError"), kindUnavailable},
		{"503", httpErr(503, "backendError"), kindUnavailable},
		{"400", httpErr(400, "invalid"), kindRejected},
		{"grpc NotFound", grpcErr(codes.NotFound), kindNotFound},
		{"grpc FailedPrecondition", grpcErr(codes.FailedPrecondition), kindExists},
		{"grpc PermissionDenied", grpcErr(codes.PermissionDenied), kindDenied},
		{"grpc Unauthenticated", grpcErr(codes.Unauthenticated), kindDenied},
		{"grpc OutOfRange", grpcErr(codes.OutOfRange), kindInvalidRange},
		{"grpc Unavailable", grpcErr(codes.Unavailable), kindUnavailable},
		{"grpc DeadlineExceeded", grpcErr(codes.DeadlineExceeded), kindUnavailable},
		{"grpc ResourceExhausted", grpcErr(codes.ResourceExhausted), kindUnavailable},
		{"grpc Internal", grpcErr(codes.Internal), kindUnavailable},
		{"grpc InvalidArgument", grpcErr(codes.InvalidArgument), kindRejected},
		{"raw grpc status", status.Error(codes.Unavailable, "x"), kindUnavailable},
		{"connection refused", &url.Error{Op: "Post", URL: "http://127.0.0.1:1/upload",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, kindUnavailable},
		{"unexpected EOF", fmt.Errorf("upload: %w", io.ErrUnexpectedEOF), kindUnavailable},
		{"deadline not ours", context.DeadlineExceeded, kindUnavailable},
		{"unknown", errors.New("odd"), kindUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			require.Equal(t, tc.want, got, "classify(%v)", tc.err)
			w := wrap(got, tc.err)
			switch got {
			case kindNotFound:
				assert.ErrorIs(t, w, objstore.ErrNotFound)
			case kindExists:
				assert.ErrorIs(t, w, objstore.ErrExists)
			case kindUnavailable:
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
			assert.ErrorIs(t, w, tc.err, "the client's error stays reachable")
		})
	}
}

func TestGCSClassifyCallPrefersTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cause := &url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}
	k, err := classifyCall(ctx, cause)
	require.Equal(t, kindCanceled, k)
	w := wrap(k, err)
	require.ErrorIs(t, w, context.Canceled)
	require.NotErrorIs(t, w, objstore.ErrNotFound)
	k, _ = classifyCall(context.Background(), context.DeadlineExceeded)
	require.Equal(t, kindUnavailable, k)
}

func TestGCSKindString(t *testing.T) {
	for k := kindUnavailable; k <= kindCanceled; k++ {
		require.NotEqual(t, "unknown", k.String(), "kind %d", int(k))
	}
}
