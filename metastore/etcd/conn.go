package etcd

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// probeTimeout bounds the look at the connection's last error.
const probeTimeout = 250 * time.Millisecond

// noConnection returns why the client has no connection to etcd, or nil
// when it has one (then a call that ran out of time met a slow server or
// one without quorum) or is an in-process client without a network.
//
// The etcd client's calls wait for a connection until their context ends.
// gRPC then fails them with a status that quotes its last connection error
// (connection refused, no such host, a TLS handshake failure), but the
// client replaces that status by the bare context error
// (clientv3.ContextError). A call that does not wait for a connection gets
// the connection error itself, at once and before anything is sent, while
// the connection is in TRANSIENT_FAILURE. One such call is made here,
// bounded by probeTimeout; if the connection came up meanwhile, it is a
// count of the store's root key, which changes nothing.
func (s *Store) noConnection(ctx context.Context) error {
	conn := s.client.ActiveConnection()
	if conn == nil {
		return nil
	}
	state := conn.GetState()
	switch state {
	case connectivity.Ready:
		return nil
	case connectivity.TransientFailure:
	default:
		return fmt.Errorf("no connection to %s (%s)", redactEndpoints(s.client.Endpoints()), state)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	t := s.clock.AfterFunc(min(probeTimeout, s.timeout), cancel)
	defer t.Stop()
	_, err := pb.NewKVClient(conn).Range(pctx, &pb.RangeRequest{Key: []byte(s.root), CountOnly: true}, grpc.WaitForReady(false))
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable && st.Message() != "" {
		return fmt.Errorf("no connection to %s (%s): %s", redactEndpoints(s.client.Endpoints()), state, st.Message())
	}
	return fmt.Errorf("no connection to %s (%s)", redactEndpoints(s.client.Endpoints()), state)
}
