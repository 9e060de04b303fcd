package etcd

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/metastore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	live := context.Background()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want error // sentinel the result must match
		not  []error
	}{
		{"no leader", live, rpctypes.ErrNoLeader, metastore.ErrUnavailable, nil},
		{"no leader (raw gRPC)", live, rpctypes.ErrGRPCNoLeader, metastore.ErrUnavailable, nil},
		{"leader changed", live, rpctypes.ErrLeaderChanged, metastore.ErrUnavailable, nil},
		{"request timed out", live, rpctypes.ErrTimeout, metastore.ErrUnavailable, nil},
		{"timed out, leader failed", live, rpctypes.ErrTimeoutDueToLeaderFail, metastore.ErrUnavailable, nil},
		{"server stopped", live, rpctypes.ErrStopped, metastore.ErrUnavailable, nil},
		{"not leader", live, rpctypes.ErrNotLeader, metastore.ErrUnavailable, nil},
		{"too many requests", live, rpctypes.ErrTooManyRequests, metastore.ErrUnavailable, nil},
		{"gRPC unavailable", live, status.Error(codes.Unavailable, "connection refused"), metastore.ErrUnavailable, nil},
		{"gRPC deadline", live, status.Error(codes.DeadlineExceeded, "deadline"), metastore.ErrUnavailable, nil},
		{"raft stopped (unknown code)", live, status.Error(codes.Unknown, "raft: stopped"), metastore.ErrUnavailable, nil},
		{"request timeout of the store", live, context.DeadlineExceeded, metastore.ErrUnavailable, []error{context.DeadlineExceeded}},
		{"client closed", live, context.Canceled, metastore.ErrUnavailable, []error{context.Canceled}},
		{"no endpoints", live, clientv3.ErrNoAvailableEndpoints, metastore.ErrUnavailable, nil},
		{"connection reset", live, fmt.Errorf("read: %w", io.ErrUnexpectedEOF), metastore.ErrUnavailable, nil},
		{"caller canceled", canceled, status.Error(codes.Canceled, "context canceled"), context.Canceled, []error{metastore.ErrUnavailable}},
		{"lease not found", live, rpctypes.ErrLeaseNotFound, metastore.ErrSessionExpired, []error{metastore.ErrUnavailable}},
		{"compacted", live, rpctypes.ErrCompacted, metastore.ErrCompacted, []error{metastore.ErrUnavailable}},
		{"permission denied is final", live, rpctypes.ErrPermissionDenied, rpctypes.ErrPermissionDenied, []error{metastore.ErrUnavailable}},
		{"too many ops is final", live, rpctypes.ErrTooManyOps, rpctypes.ErrTooManyOps, []error{metastore.ErrUnavailable}},
		{"not an etcd server is final", live, status.Error(codes.Unimplemented, "unknown service etcdserverpb.KV"), ErrNotEtcd, []error{metastore.ErrUnavailable}},
		{"request timeout (diagnosed)", live, fmt.Errorf("%w after 2s: no connection", errRequestTimeout), metastore.ErrUnavailable, []error{context.Canceled, context.DeadlineExceeded}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.ctx, "txn", "k", tc.err)
			require.ErrorIs(t, got, tc.want)
			for _, n := range append(tc.not, metastore.ErrNotFound, metastore.ErrConflict) {
				assert.NotErrorIs(t, got, n)
			}
			assert.Contains(t, got.Error(), `"k"`)
		})
	}
	assert.NoError(t, classify(live, "get", "k", nil))
}

// offlineClient is a client without a network and without services: New
// does no I/O, and a call that reached it would panic, so a test that
// passes proves that nothing was sent.
func offlineClient(t *testing.T) *clientv3.Client {
	cli := clientv3.NewCtxClient(t.Context())
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestOptions(t *testing.T) {
	cli := offlineClient(t)
	cases := []struct {
		name string
		opts Options
		err  string // the field the *cutline.ConfigError names
	}{
		{"zero value", Options{}, ""},
		{"custom root", Options{Root: "/apps/x/"}, ""},
		{"small pages", Options{ListPageSize: 2}, ""},
		{"root without slash", Options{Root: "/cutline"}, "Root"},
		{"root with control character", Options{Root: "/a\x01/"}, "Root"},
		{"negative timeout", Options{RequestTimeout: -time.Second}, "RequestTimeout"},
		{"negative page size", Options{ListPageSize: -1}, "ListPageSize"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := New(cli, tc.opts)
			if tc.err != "" {
				require.ErrorIs(t, err, cutline.ErrInvalid)
				var ce *cutline.ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.err, ce.Field)
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.NotEmpty(t, st.Root())
			assert.Equal(t, DefaultRequestTimeout, st.timeout)
			assert.Positive(t, st.page)
		})
	}
	st, err := New(cli, Options{})
	require.NoError(t, err)
	assert.Equal(t, DefaultRoot, st.Root())
	assert.Equal(t, DefaultListPageSize, st.page)
	for name, c := range map[string]*clientv3.Client{"nil client": nil, "zero client": {}} {
		_, err = New(c, Options{})
		require.ErrorIs(t, err, cutline.ErrInvalid, name)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, name)
		assert.Equal(t, "client", ce.Field, name)
	}
}

func TestInvalidInputSendsNothing(t *testing.T) {
	st, err := New(offlineClient(t), Options{})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = st.Get(ctx, "")
	require.ErrorIs(t, err, metastore.ErrInvalidKey)
	_, _, err = st.List(ctx, "bad\nprefix")
	require.ErrorIs(t, err, metastore.ErrInvalidKey)
	_, err = st.Txn(ctx, metastore.Txn{Then: []metastore.Op{{Key: "a"}, {Key: "a", Delete: true}}})
	require.ErrorIs(t, err, metastore.ErrInvalidKey)
	_, err = st.Txn(ctx, metastore.Txn{If: []metastore.Compare{{Key: "a", Revision: -1}}})
	require.ErrorIs(t, err, metastore.ErrInvalidKey)
	_, err = st.NewSession(ctx, 0)
	require.Error(t, err)
	for _, err := range st.Watch(ctx, "\x00", 0) {
		require.ErrorIs(t, err, metastore.ErrInvalidKey)
	}
}
