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

	"github.com/cutline/cutline/metastore"
)

// classify maps an error of the etcd client to the metastore sentinels.
// ctx is the caller's context: when it has ended, its error is returned
// (the caller gave up); every other sign that the cluster did not answer
// (including the store's own request timeout and a closed client) is
// metastore.ErrUnavailable, never an answer such as ErrNotFound.
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
