package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// apiError stands for a client's typed error that callers reach with
// errors.As through the classification.
type apiError struct{ code int }

func (e *apiError) Error() string { return fmt.Sprintf("api error %d", e.code) }

var sentinels = []error{
	objstore.ErrNotFound, objstore.ErrExists, objstore.ErrUnavailable,
	objstore.ErrInvalidKey, objstore.ErrNotCreateOnly, objstore.ErrInvalidRange,
	objstore.ErrAccessDenied, objstore.ErrNoSuchBucket, objstore.ErrRejected,
}

func TestClassify(t *testing.T) {
	wrapped := fmt.Errorf("%w: range not satisfiable", objstore.ErrRejected)
	cases := []struct {
		name     string
		sentinel error
		cause    error
		matches  []error // sentinels the result matches; it matches no other
		message  string
	}{
		{"not found", objstore.ErrNotFound, &apiError{404}, []error{objstore.ErrNotFound}, "objstore: not found: api error 404"},
		{"exists", objstore.ErrExists, &apiError{412}, []error{objstore.ErrExists}, "objstore: already exists: api error 412"},
		{"unavailable", objstore.ErrUnavailable, &apiError{503}, []error{objstore.ErrUnavailable}, "objstore: unavailable: api error 503"},
		{"access denied", objstore.ErrAccessDenied, &apiError{403}, []error{objstore.ErrAccessDenied}, "objstore: access denied: api error 403"},
		{"no such bucket", objstore.ErrNoSuchBucket, &apiError{404}, []error{objstore.ErrNoSuchBucket}, "objstore: no such bucket: api error 404"},
		{"rejected", objstore.ErrRejected, &apiError{400}, []error{objstore.ErrRejected}, "objstore: request rejected: api error 400"},
		{"backend sentinel wrapping one of ours", wrapped, &apiError{416}, []error{objstore.ErrRejected, wrapped},
			"objstore: request rejected: range not satisfiable: api error 416"},
		{"wrapped cause", objstore.ErrUnavailable, fmt.Errorf("get: %w", &apiError{500}), []error{objstore.ErrUnavailable},
			"objstore: unavailable: get: api error 500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := objstore.Classify(tc.sentinel, tc.cause)
			require.EqualError(t, err, tc.message)
			// Through the *OpError a backend adds, as callers see it.
			op := &objstore.OpError{Op: "get", Bucket: "zone-a", Key: "k", Err: err}
			for _, s := range sentinels {
				want := false
				for _, m := range tc.matches {
					want = want || m == s
				}
				assert.Equal(t, want, errors.Is(op, s), "errors.Is(%v, %v)", op, s)
			}
			for _, m := range tc.matches {
				assert.ErrorIs(t, op, m)
			}
			assert.ErrorIs(t, op, tc.cause)
			var api *apiError
			require.ErrorAs(t, op, &api, "the client's error stays reachable")
		})
	}
}

func TestClassifyWithoutCauseIsTheSentinel(t *testing.T) {
	for _, s := range sentinels {
		require.Same(t, s, objstore.Classify(s, nil))
	}
	require.Same(t, objstore.ErrUnavailable, objstore.Unavailable(nil))
	require.Panics(t, func() { _ = objstore.Classify(nil, io.EOF) })
}

func TestUnavailableIsClassify(t *testing.T) {
	cause := fmt.Errorf("reading body: %w", io.ErrUnexpectedEOF)
	err := objstore.Unavailable(cause)
	require.Equal(t, objstore.Classify(objstore.ErrUnavailable, cause).Error(), err.Error())
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
}

func TestContextEnded(t *testing.T) {
	cases := []struct {
		name    string
		ctxErr  error
		cause   error
		message string
	}{
		{"canceled with the client's error", context.Canceled, &apiError{0}, "context canceled: api error 0"},
		{"deadline with the client's error", context.DeadlineExceeded, &apiError{0}, "context deadline exceeded: api error 0"},
		{"canceled without cause", context.Canceled, nil, "context canceled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := objstore.ContextEnded(tc.ctxErr, tc.cause)
			require.EqualError(t, err, tc.message)
			op := &objstore.OpError{Op: "create", Bucket: "zone-a", Key: "k", Err: err}
			require.ErrorIs(t, op, tc.ctxErr)
			if tc.cause != nil {
				var api *apiError
				require.ErrorAs(t, op, &api)
			}
			for _, s := range sentinels {
				require.NotErrorIs(t, op, s, "the context's end is none of the store's answers")
			}
		})
	}
	require.Panics(t, func() { _ = objstore.ContextEnded(nil, io.EOF) })
}

// getFails is a bucket whose Get fails with err.
type getFails struct {
	objstore.Bucket
	err error
}

func (b getFails) Get(context.Context, string) ([]byte, error) { return nil, b.err }

func TestReadBack(t *testing.T) {
	cause := &apiError{412}
	readErr := &objstore.OpError{Op: "get", Bucket: "zone-a", Key: "k", Err: objstore.Unavailable(&apiError{503})}
	cases := []struct {
		name    string
		stored  string // "" means absent
		bucket  func(objstore.Bucket) objstore.Bucket
		cancel  bool
		want    []error // matched; nil means success
		notWant []error
	}{
		{name: "our bytes", stored: "mine"},
		{name: "other bytes", stored: "theirs",
			want: []error{objstore.ErrExists, cause}, notWant: []error{objstore.ErrUnavailable}},
		{name: "gone", want: []error{objstore.ErrUnavailable, cause},
			notWant: []error{objstore.ErrNotFound, objstore.ErrExists}},
		{name: "context ended", stored: "mine", cancel: true, want: []error{context.Canceled},
			notWant: []error{objstore.ErrExists, objstore.ErrUnavailable}},
		{name: "unreadable", stored: "mine",
			bucket: func(b objstore.Bucket) objstore.Bucket { return getFails{b, readErr} },
			want:   []error{objstore.ErrUnavailable, cause, readErr}, notWant: []error{objstore.ErrExists, objstore.ErrNotFound}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var b objstore.Bucket = memblob.New("zone-a")
			if tc.stored != "" {
				require.NoError(t, b.Create(ctx, "k", []byte(tc.stored)))
			}
			if tc.bucket != nil {
				b = tc.bucket(b)
			}
			if tc.cancel {
				cancel()
			}
			err := objstore.ReadBack(ctx, b, "k", []byte("mine"), cause)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var op *objstore.OpError
			if errors.As(err, &op) {
				require.Equal(t, "get", op.Op, "only the read's own error may be a *OpError")
			}
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			for _, w := range tc.notWant {
				require.NotErrorIs(t, err, w)
			}
		})
	}
}

func TestReadBackLeavesTheObject(t *testing.T) {
	b := memblob.New("zone-a")
	require.NoError(t, b.Create(t.Context(), "k", []byte("theirs")))
	require.ErrorIs(t, objstore.ReadBack(t.Context(), b, "k", []byte("mine"), nil), objstore.ErrExists)
	got, err := b.Get(t.Context(), "k")
	require.NoError(t, err)
	require.Equal(t, "theirs", string(got))
}

func TestPrecheck(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		key  string
		want error
	}{
		{"fine", context.Background(), "p/star-1/00000001", nil},
		{"context ended", canceled, "p/star-1/00000001", context.Canceled},
		{"context ended wins over a bad key", canceled, "../x", context.Canceled},
		{"dot-dot", context.Background(), "p/../x", objstore.ErrInvalidKey},
		{"empty", context.Background(), "", objstore.ErrInvalidKey},
		{"too long", context.Background(), strings.Repeat("a", objstore.MaxKeyLen+1), objstore.ErrInvalidKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := objstore.Precheck(tc.ctx, tc.key)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var op *objstore.OpError
			require.False(t, errors.As(err, &op), "not wrapped in *OpError")
		})
	}
}
