package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/metastore"
)

// ErrNotEtcd: the server at an endpoint answered, but not as etcd: it does
// not serve etcd's gRPC API (gRPC status Unimplemented), so the endpoint
// names some other gRPC server. Retrying does not help, so it does not
// match metastore.ErrUnavailable; the request was not applied. Fix the
// client's endpoints.
var ErrNotEtcd = errkind.New(cutline.ErrInvalid, "etcd: the endpoint is not an etcd server")

// fail classifies err, the failure of a call made with cctx, a context
// that s.call derived from the caller's ctx. When the call ran out of time
// (the store's request timeout, or the caller's deadline) because the
// client had no connection, the error says why there was none: the etcd
// client reports only the context's error, which hides a refused
// connection or a failed TLS handshake.
func (s *Store) fail(ctx, cctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && errors.Is(context.Cause(cctx), errRequestTimeout) && contextError(err) {
		cause := fmt.Errorf("%w after %v", errRequestTimeout, s.timeout)
		if nc := s.noConnection(ctx); nc != nil {
			cause = fmt.Errorf("%w: %w", cause, nc)
		}
		return fmt.Errorf("metastore %s %q: %w", op, key, metastore.Unavailable(cause))
	}
	if ctx.Err() != nil {
		return s.ended(ctx, fmt.Sprintf("metastore %s %q", op, key))
	}
	return classify(ctx, op, key, err)
}

// ended is the error of a call cut short by the caller's context, labelled
// where. After a deadline it names the missing connection, if that is why
// the call did not finish.
func (s *Store) ended(ctx context.Context, where string) error {
	cerr := ctx.Err()
	if errors.Is(cerr, context.DeadlineExceeded) {
		if nc := s.noConnection(ctx); nc != nil {
			return fmt.Errorf("%s: %w (%v)", where, cerr, nc)
		}
	}
	return fmt.Errorf("%s: %w", where, cerr)
}

// contextError reports whether err is how the etcd client reports a call
// whose context ended.
func contextError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	c := status.Code(err)
	return c == codes.Canceled || c == codes.DeadlineExceeded
}

// classify maps an error of the etcd client to the metastore sentinels.
// ctx is the caller's context: when it has ended, its error is returned
// (the caller gave up); every other sign that the cluster did not answer
// (including the store's own request timeout and a closed client) is
// metastore.ErrUnavailable, never an answer such as ErrNotFound. A server
// that does not implement etcd's API is ErrNotEtcd.
func classify(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("metastore %s %q", op, key)
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", where, cerr)
	}
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%s: %w", where, metastore.ErrSessionExpired)
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%s: %w: %w", where, metastore.ErrCompacted, err)
	case status.Code(err) == codes.Unimplemented:
		return fmt.Errorf("%s: %w: %w", where, ErrNotEtcd, err)
	case errors.Is(err, errRequestTimeout):
		return fmt.Errorf("%s: %w", where, metastore.Unavailable(err))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The store's request timeout or a closed client, not the caller's
		// context: keep the text but not the sentinel, so that the caller
		// does not take it for its own cancellation.
		return fmt.Errorf("%s: %w", where, metastore.Unavailable(fmt.Errorf("etcd: %v", err)))
	case unavailable(err):
		return fmt.Errorf("%s: %w", where, metastore.Unavailable(err))
	}
	return fmt.Errorf("%s: %w", where, err)
}

// unavailable reports whether err means that the cluster did not answer:
// the outcome of a write that failed with it is unknown.
func unavailable(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, clientv3.ErrNoAvailableEndpoints),
		errors.Is(err, rpctypes.ErrNotLeader), errors.Is(err, rpctypes.ErrTooManyRequests),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return transientCode(ee.Code())
	}
	if st, ok := status.FromError(err); ok {
		return transientCode(st.Code())
	}
	return false
}

// transientCode: the gRPC codes that mean no answer. Unknown is among them:
// it is what a server sends for a failure it has no code for, such as
// "raft: stopped" from a member shutting down or a dropped proposal.
func transientCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.Unknown:
		return true
	}
	return false
}
