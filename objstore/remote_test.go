package objstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
)

func TestClassifyStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   error
	}{
		{0, objstore.ErrUnavailable},
		{200, objstore.ErrUnavailable},
		{304, objstore.ErrUnavailable},
		{400, objstore.ErrRejected},
		{401, objstore.ErrAccessDenied},
		{403, objstore.ErrAccessDenied},
		{404, objstore.ErrNotFound},
		{405, objstore.ErrRejected},
		{408, objstore.ErrUnavailable},
		{409, objstore.ErrUnavailable},
		{412, objstore.ErrExists},
		{416, objstore.ErrUnsatisfiableRange},
		{429, objstore.ErrUnavailable},
		{500, objstore.ErrUnavailable},
		{503, objstore.ErrUnavailable},
	} {
		require.Equal(t, tc.want, objstore.ClassifyStatus(tc.status), "status %d", tc.status)
	}
	require.ErrorIs(t, objstore.ErrUnsatisfiableRange, objstore.ErrRejected)
}

// remote classifies every failure as ErrExists, so that a test can tell
// its classifier was asked.
var remote = objstore.Remote{RemoteOptions: objstore.RemoteOptions{Name: "zone-a"}, Classify: func(error) error { return objstore.ErrExists }}

func TestRemoteChecks(t *testing.T) {
	ctx := t.Context()
	var op *objstore.OpError

	require.NoError(t, remote.Check(ctx, "get", "a/b"))
	err := remote.Check(ctx, "get", "a//b")
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	require.ErrorAs(t, err, &op)
	require.Equal(t, objstore.OpError{Op: "get", Bucket: "zone-a", Key: "a//b", Err: op.Err}, *op)

	require.NoError(t, remote.CheckCreate(ctx, "k", make([]byte, 10)))
	err = remote.CheckCreate(ctx, "k", make([]byte, objstore.MaxObjectSize+1))
	require.ErrorIs(t, err, objstore.ErrRejected)
	require.ErrorIs(t, err, objstore.ErrObjectTooLarge)
	require.ErrorAs(t, err, &op)
	require.Equal(t, "create", op.Op)
	require.NoError(t, remote.CheckCreate(ctx, "k", make([]byte, objstore.MaxObjectSize)))
	require.ErrorIs(t, remote.CheckCreate(ctx, "", nil), objstore.ErrInvalidKey)

	require.NoError(t, remote.CheckRange(ctx, "k", 0, 1))
	for _, r := range [][2]int64{{-1, 1}, {0, 0}, {5, -1}} {
		err := remote.CheckRange(ctx, "k", r[0], r[1])
		require.ErrorIs(t, err, objstore.ErrInvalidRange, "offset %d length %d", r[0], r[1])
		require.ErrorAs(t, err, &op)
		require.Equal(t, "getrange", op.Op)
	}
	require.ErrorIs(t, remote.CheckRange(ctx, "/k", 0, 1), objstore.ErrInvalidKey)

	for _, tc := range []struct{ limit, want int }{{0, 100}, {-1, 100}, {1, 1}, {100, 100}, {101, 100}} {
		got, err := remote.CheckList(ctx, "a/", tc.limit, 100)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "limit %d", tc.limit)
	}
	_, err = remote.CheckList(ctx, "", 10, 100)
	require.NoError(t, err)
	_, err = remote.CheckList(ctx, "/", 10, 100)
	require.ErrorIs(t, err, objstore.ErrInvalidKey)

	ended, cancel := context.WithCancel(ctx)
	cancel()
	for name, err := range map[string]error{
		"Check":       remote.Check(ended, "get", "k"),
		"CheckCreate": remote.CheckCreate(ended, "k", nil),
		"CheckRange":  remote.CheckRange(ended, "k", 0, 1),
		"CheckList":   func() error { _, err := remote.CheckList(ended, "", 10, 100); return err }(),
	} {
		require.ErrorIs(t, err, context.Canceled, name)
	}
}

func TestRemoteClassifies(t *testing.T) {
	ctx := t.Context()
	cause := errors.New("the store's answer")

	err := remote.Fail(ctx, "get", "k", cause)
	require.ErrorIs(t, err, objstore.ErrExists, "the backend's classifier decides")
	require.ErrorIs(t, err, cause, "the cause stays reachable")
	var op *objstore.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "get", op.Op)

	ended, cancel := context.WithCancel(ctx)
	cancel()
	err = remote.Call(ended, cause)
	require.ErrorIs(t, err, context.Canceled, "an ended context is the answer")
	require.NotErrorIs(t, err, objstore.ErrExists)
	require.ErrorIs(t, err, cause)

	as := func(sentinel error) objstore.Remote {
		return objstore.Remote{RemoteOptions: objstore.RemoteOptions{Name: "zone-a"}, Classify: func(error) error { return sentinel }}
	}
	sent := 0
	send := func(err error) func(context.Context) error {
		return func(context.Context) error { sent++; return err }
	}
	require.NoError(t, as(objstore.ErrExists).Delete(ctx, "k", send(nil)))
	require.NoError(t, as(objstore.ErrNotFound).Delete(ctx, "k", send(cause)), "deleting a missing object succeeds")
	err = as(objstore.ErrNoSuchBucket).Delete(ctx, "k", send(cause))
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket, "a missing bucket does not")
	require.ErrorIs(t, err, cause)
	require.ErrorAs(t, err, &op)
	require.Equal(t, "delete", op.Op)
	require.Equal(t, 3, sent)
	err = as(objstore.ErrNotFound).Delete(ctx, "a//b", send(nil))
	require.ErrorIs(t, err, objstore.ErrInvalidKey, "checked before anything is sent")
	err = as(objstore.ErrNotFound).Delete(ended, "k", send(nil))
	require.ErrorIs(t, err, context.Canceled, "an ended context is not a missing object")
	require.Equal(t, 3, sent, "nothing sent")

	data, err := as(objstore.ErrUnsatisfiableRange).RangeFailed(ctx, "k", cause)
	require.NoError(t, err, "a range past the end is an empty result")
	require.NotNil(t, data)
	require.Empty(t, data)
	_, err = as(objstore.ErrRejected).RangeFailed(ctx, "k", cause)
	require.ErrorIs(t, err, objstore.ErrRejected)
	require.ErrorAs(t, err, &op)
	require.Equal(t, "getrange", op.Op)
}

type body struct {
	*strings.Reader
	closed bool
}

func (b *body) Close() error { b.closed = true; return nil }

func TestRemoteReadBody(t *testing.T) {
	b := &body{Reader: strings.NewReader("hello")}
	size := int64(5)
	data, err := remote.ReadBody(t.Context(), "get", "k", b, &size)
	require.NoError(t, err)
	require.Equal(t, "hello", string(data))
	require.True(t, b.closed)

	size = objstore.MaxObjectSize + 1
	_, err = remote.ReadBody(t.Context(), "get", "k", &body{Reader: strings.NewReader("")}, &size)
	require.ErrorIs(t, err, objstore.ErrRejected)
	require.ErrorIs(t, err, objstore.ErrObjectTooLarge)
	var op *objstore.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "zone-a", op.Bucket)
}

func TestOpenEndedRange(t *testing.T) {
	require.False(t, objstore.OpenEndedRange(0, 10))
	require.False(t, objstore.OpenEndedRange(0, objstore.MaxObjectSize))
	require.True(t, objstore.OpenEndedRange(0, objstore.MaxObjectSize+1))
	require.False(t, objstore.OpenEndedRange(objstore.MaxObjectSize-10, 10))
	require.True(t, objstore.OpenEndedRange(objstore.MaxObjectSize-10, 11))
	require.True(t, objstore.OpenEndedRange(5, 1<<62))
}

func TestRangeOf(t *testing.T) {
	whole := []byte("0123456789")
	require.Equal(t, "345", string(objstore.RangeOf(whole, 3, 3, true)))
	require.Equal(t, "789", string(objstore.RangeOf(whole, 7, 100, true)))
	require.Equal(t, []byte{}, objstore.RangeOf(whole, 10, 1, true))
	require.Equal(t, []byte{}, objstore.RangeOf(whole, 20, 1, true))
	require.Equal(t, "0123", string(objstore.RangeOf(whole, 3, 4, false)), "a ranged body starts at the offset")
	require.Equal(t, "0123456789", string(objstore.RangeOf(whole, 3, 100, false)))
}
