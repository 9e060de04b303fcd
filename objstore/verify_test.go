package objstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/mem"
)

// overwriting is the broken bucket Verify exists for: it accepts every
// Create, replacing what was there, like a store that ignores
// If-None-Match.
type overwriting struct{ *mem.Bucket }

func (o overwriting) Create(ctx context.Context, key string, data []byte) error {
	if err := o.Bucket.Delete(ctx, key); err != nil {
		return err
	}
	return o.Bucket.Create(ctx, key, data)
}

// lyingOverwrite overwrites but still answers ErrExists.
type lyingOverwrite struct{ *mem.Bucket }

func (o lyingOverwrite) Create(ctx context.Context, key string, data []byte) error {
	_, err := o.Bucket.Get(ctx, key)
	existed := err == nil
	_ = o.Bucket.Delete(ctx, key)
	if err := o.Bucket.Create(ctx, key, data); err != nil {
		return err
	}
	if existed {
		return &objstore.OpError{Op: "create", Bucket: o.Name(), Key: key, Err: objstore.ErrExists}
	}
	return nil
}

// garbled returns bytes nobody wrote.
type garbled struct{ *mem.Bucket }

func (g garbled) Get(ctx context.Context, key string) ([]byte, error) {
	d, err := g.Bucket.Get(ctx, key)
	if err == nil && len(d) > 0 {
		d[0] ^= 0xff
	}
	return d, err
}

// failing answers ErrUnavailable to the n-th call of op (counting from 1),
// or to every call when n is 0.
type failing struct {
	*mem.Bucket
	op    string
	n     int
	calls map[string]int
}

func (f *failing) fail(op string) error {
	f.calls[op]++
	if op == f.op && (f.n == 0 || f.calls[op] == f.n) {
		return objstore.Unavailable(errors.New("connection reset"))
	}
	return nil
}

func (f *failing) Create(ctx context.Context, key string, data []byte) error {
	if err := f.fail("create"); err != nil {
		return err
	}
	return f.Bucket.Create(ctx, key, data)
}

func (f *failing) Get(ctx context.Context, key string) ([]byte, error) {
	if err := f.fail("get"); err != nil {
		return nil, err
	}
	return f.Bucket.Get(ctx, key)
}

func (f *failing) Delete(ctx context.Context, key string) error {
	if err := f.fail("delete"); err != nil {
		return err
	}
	return f.Bucket.Delete(ctx, key)
}

// staleDelete answers nil to Delete but keeps the object.
type staleDelete struct{ *mem.Bucket }

func (staleDelete) Delete(context.Context, string) error { return nil }

func TestVerifyAcceptsCreateOnlyBucket(t *testing.T) {
	b := mem.New("zone-a")
	require.NoError(t, objstore.Verify(t.Context(), b))
	require.Equal(t, 0, b.Len(), "the probe is deleted")

	require.NoError(t, objstore.VerifyUnder(t.Context(), b, "tenant/x"))
	require.Equal(t, 0, b.Len())
}

func TestVerifyRefusesBrokenBuckets(t *testing.T) {
	for _, tc := range []struct {
		name        string
		bucket      objstore.Bucket
		notCreate   bool // must match ErrNotCreateOnly
		unavailable bool // must match ErrUnavailable
		contains    string
	}{
		{name: "overwriting", bucket: overwriting{mem.New("cheap-s3")}, notCreate: true, contains: "second create"},
		{name: "lying-overwrite", bucket: lyingOverwrite{mem.New("cheap-s3")}, notCreate: true, contains: "overwrote"},
		{name: "garbled", bucket: garbled{mem.New("cheap-s3")}, notCreate: true, contains: "never written"},
		{name: "first-create-unavailable", bucket: &failing{Bucket: mem.New("cheap-s3"), op: "create", n: 1, calls: map[string]int{}}, unavailable: true, contains: "create probe"},
		{name: "second-create-unavailable", bucket: &failing{Bucket: mem.New("cheap-s3"), op: "create", n: 2, calls: map[string]int{}}, unavailable: true, contains: "did not answer ErrExists"},
		{name: "get-unavailable", bucket: &failing{Bucket: mem.New("cheap-s3"), op: "get", calls: map[string]int{}}, unavailable: true, contains: "read back"},
		{name: "delete-unavailable", bucket: &failing{Bucket: mem.New("cheap-s3"), op: "delete", calls: map[string]int{}}, unavailable: true, contains: "delete probe"},
		{name: "not-found-misclassified", bucket: &failing{Bucket: mem.New("cheap-s3"), op: "get", n: 2, calls: map[string]int{}}, unavailable: true, contains: "did not answer ErrNotFound"},
		{name: "delete-ignored", bucket: staleDelete{mem.New("cheap-s3")}, contains: "still readable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := objstore.Verify(t.Context(), tc.bucket)
			require.Error(t, err)
			require.Equal(t, tc.notCreate, errors.Is(err, objstore.ErrNotCreateOnly), "ErrNotCreateOnly: %v", err)
			require.Equal(t, tc.unavailable, errors.Is(err, objstore.ErrUnavailable), "ErrUnavailable: %v", err)
			require.Contains(t, err.Error(), `"cheap-s3"`, "the error names the bucket")
			require.Contains(t, err.Error(), tc.contains)
			require.Contains(t, err.Error(), objstore.VerifyDir+"/")
		})
	}
}

func TestVerifyCleansUpAfterRefusal(t *testing.T) {
	inner := mem.New("cheap-s3")
	err := objstore.Verify(t.Context(), overwriting{inner})
	require.ErrorIs(t, err, objstore.ErrNotCreateOnly)
	require.Equal(t, 0, inner.Len(), "the probe is removed even when the bucket is refused")
}

func TestVerifyCanceled(t *testing.T) {
	b := mem.New("zone-a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := objstore.Verify(ctx, b)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrNotCreateOnly)
	require.Equal(t, 0, b.Len())
}

func TestVerifyUnderBadPrefix(t *testing.T) {
	err := objstore.VerifyUnder(t.Context(), mem.New("zone-a"), "../x")
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	require.True(t, strings.Contains(err.Error(), "zone-a"))
}
