package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/internal/racystore"
	"github.com/cutline/cutline/objstore/memblob"
)

// overwriting is the broken bucket Verify exists for: it accepts every
// Create, replacing what was there, like a store that ignores
// If-None-Match.
type overwriting struct{ *memblob.Bucket }

func (o overwriting) Create(ctx context.Context, key string, data []byte) error {
	if err := o.Bucket.Delete(ctx, key); err != nil {
		return err
	}
	return o.Bucket.Create(ctx, key, data)
}

// lyingOverwrite overwrites but still answers ErrExists.
type lyingOverwrite struct{ *memblob.Bucket }

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
type garbled struct{ *memblob.Bucket }

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
	*memblob.Bucket
	op    string
	n     int
	mu    sync.Mutex
	calls map[string]int
}

func (f *failing) fail(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
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
type staleDelete struct{ *memblob.Bucket }

func (staleDelete) Delete(context.Context, string) error { return nil }

func TestVerifyAcceptsCreateOnlyBucket(t *testing.T) {
	b := memblob.New("zone-a")
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
		{name: "overwriting", bucket: overwriting{memblob.New("cheap-s3")}, notCreate: true, contains: "second create"},
		{name: "lying-overwrite", bucket: lyingOverwrite{memblob.New("cheap-s3")}, notCreate: true, contains: "overwrote"},
		{name: "garbled", bucket: garbled{memblob.New("cheap-s3")}, notCreate: true, contains: "never written"},
		{name: "first-create-unavailable", bucket: &failing{Bucket: memblob.New("cheap-s3"), op: "create", n: 1, calls: map[string]int{}}, unavailable: true, contains: "create probe"},
		{name: "second-create-unavailable", bucket: &failing{Bucket: memblob.New("cheap-s3"), op: "create", n: 2, calls: map[string]int{}}, unavailable: true, contains: "did not answer ErrExists"},
		{name: "get-unavailable", bucket: &failing{Bucket: memblob.New("cheap-s3"), op: "get", calls: map[string]int{}}, unavailable: true, contains: "read back"},
		{name: "delete-unavailable", bucket: &failing{Bucket: memblob.New("cheap-s3"), op: "delete", calls: map[string]int{}}, unavailable: true, contains: "delete probe"},
		{name: "not-found-misclassified", bucket: &failing{Bucket: memblob.New("cheap-s3"), op: "get", n: 2, calls: map[string]int{}}, unavailable: true, contains: "did not answer ErrNotFound"},
		{name: "delete-ignored", bucket: staleDelete{memblob.New("cheap-s3")}, contains: "still readable"},
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
	inner := memblob.New("cheap-s3")
	err := objstore.Verify(t.Context(), overwriting{inner})
	require.ErrorIs(t, err, objstore.ErrNotCreateOnly)
	require.Equal(t, 0, inner.Len(), "the probe is removed even when the bucket is refused")
}

func TestVerifyCanceled(t *testing.T) {
	b := memblob.New("zone-a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := objstore.Verify(ctx, b)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrNotCreateOnly)
	require.Equal(t, 0, b.Len())
}

func TestVerifyUnderBadPrefix(t *testing.T) {
	err := objstore.VerifyUnder(t.Context(), memblob.New("zone-a"), "../x")
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	require.True(t, strings.Contains(err.Error(), "zone-a"))
}

// isRaceProbe matches the keys of Verify's concurrent check.
func isRaceProbe(key string) bool { return strings.Contains(key, "-race-") }

// counting counts every request.
type counting struct {
	objstore.Bucket
	n atomic.Int64
}

func (c *counting) Create(ctx context.Context, key string, data []byte) error {
	c.n.Add(1)
	return c.Bucket.Create(ctx, key, data)
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, error) {
	c.n.Add(1)
	return c.Bucket.Get(ctx, key)
}

func (c *counting) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.n.Add(1)
	return c.Bucket.GetRange(ctx, key, off, n)
}

func (c *counting) Delete(ctx context.Context, key string) error {
	c.n.Add(1)
	return c.Bucket.Delete(ctx, key)
}

func (c *counting) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	c.n.Add(1)
	return c.Bucket.List(ctx, prefix, after, limit)
}

// TestVerifyRefusesCheckThenPut: a store that refuses a second create one
// request at a time but checks and then writes, with a gap, under
// concurrent creates is refused, every time: its gap is held open until
// every create of a key has checked, so the outcome does not depend on
// timing. That the gates fill also shows that Verify's creates of one key
// are in flight together.
func TestVerifyRefusesCheckThenPut(t *testing.T) {
	const runs = 50
	for range runs {
		inner := memblob.New("cheap-s3")
		racy := racystore.Wrap(inner, racystore.Options{Match: isRaceProbe})
		err := objstore.Verify(t.Context(), racy)
		require.ErrorIs(t, err, objstore.ErrNotCreateOnly)
		require.NotErrorIs(t, err, objstore.ErrUnavailable)
		require.Contains(t, err.Error(), `"cheap-s3"`)
		require.Contains(t, err.Error(), "4 of 4 concurrent creates of "+objstore.VerifyDir+"/")
		require.Empty(t, racy.Missed(), "every create of a key checked before any wrote")
		require.Equal(t, objstore.VerifyRaceKeys*objstore.VerifyRaceCreators, racy.Raced())
		require.Equal(t, 0, inner.Len(), "the probes are deleted after the refusal")
	}
}

// TestVerifyPassesCreateOnlyStoresEveryTime runs Verify many times on the
// in-process backends: a correct store never fails it.
func TestVerifyPassesCreateOnlyStoresEveryTime(t *testing.T) {
	const runs = 100
	m := memblob.New("zone-a")
	f, err := fs.New(t.TempDir(), fs.Options{Name: "zone-b"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	for _, b := range []objstore.Bucket{m, f} {
		for i := range runs {
			require.NoError(t, objstore.Verify(t.Context(), b), "%s, run %d", b.Name(), i)
		}
		page, err := b.List(t.Context(), "", "", 10)
		require.NoError(t, err)
		require.Empty(t, page, "%s: the probes are deleted", b.Name())
	}
}

func TestVerifyCost(t *testing.T) {
	c := &counting{Bucket: memblob.New("zone-a")}
	require.NoError(t, objstore.Verify(t.Context(), c))
	require.Equal(t, int64(objstore.VerifyRequests), c.n.Load())
	require.Equal(t, 29, objstore.VerifyRequests, "the documented figure")
}

// raceBroken answers the concurrent creates of a key in a scripted way.
type raceBroken struct {
	*memblob.Bucket
	// create answers one create of a race key; nil means create-only.
	create func(b *memblob.Bucket, ctx context.Context, key string, data []byte) error
}

func (r raceBroken) Create(ctx context.Context, key string, data []byte) error {
	if r.create == nil || !isRaceProbe(key) {
		return r.Bucket.Create(ctx, key, data)
	}
	return r.create(r.Bucket, ctx, key, data)
}

func TestVerifyConcurrentVerdicts(t *testing.T) {
	var mu sync.Mutex
	for _, tc := range []struct {
		name        string
		create      func(b *memblob.Bucket, ctx context.Context, key string, data []byte) error
		notCreate   bool
		unavailable bool
		contains    string
	}{
		{name: "last-writer-wins-behind-exists", notCreate: true, contains: "was refused but overwrote the survivor's bytes",
			// Every create lands; all but the first answer ErrExists.
			create: func(b *memblob.Bucket, ctx context.Context, key string, data []byte) error {
				mu.Lock()
				defer mu.Unlock()
				_, err := b.Get(ctx, key)
				_ = b.Delete(ctx, key)
				_ = b.Create(ctx, key, data)
				if err == nil {
					return objstore.ErrExists
				}
				return nil
			}},
		{name: "fresh-key-exists", notCreate: true, contains: "answered ErrExists",
			create: func(*memblob.Bucket, context.Context, string, []byte) error { return objstore.ErrExists }},
		{name: "loser-unavailable", unavailable: true, contains: "did not answer ErrExists",
			create: func(b *memblob.Bucket, ctx context.Context, key string, data []byte) error {
				if err := b.Create(ctx, key, data); err != nil {
					return objstore.Unavailable(errors.New("connection reset"))
				}
				return nil
			}},
		{name: "torn-object", notCreate: true, contains: "never written",
			create: func(b *memblob.Bucket, ctx context.Context, key string, data []byte) error {
				return b.Create(ctx, key, bytes.ToUpper(data))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := memblob.New("cheap-s3")
			err := objstore.Verify(t.Context(), raceBroken{inner, tc.create})
			require.Error(t, err)
			require.Equal(t, tc.notCreate, errors.Is(err, objstore.ErrNotCreateOnly), "ErrNotCreateOnly: %v", err)
			require.Equal(t, tc.unavailable, errors.Is(err, objstore.ErrUnavailable), "ErrUnavailable: %v", err)
			require.Contains(t, err.Error(), `"cheap-s3"`)
			require.Contains(t, err.Error(), tc.contains)
			require.Equal(t, 0, inner.Len(), "the probes are deleted")
		})
	}
}

// blocking holds every create of a race key until its context ends.
type blocking struct {
	*memblob.Bucket
	held chan struct{}
	once sync.Once
}

func (b *blocking) Create(ctx context.Context, key string, data []byte) error {
	if !isRaceProbe(key) {
		return b.Bucket.Create(ctx, key, data)
	}
	b.once.Do(func() { close(b.held) })
	<-ctx.Done()
	return ctx.Err()
}

// TestVerifyConcurrentHonoursContext: a store that never answers the
// concurrent creates holds Verify only as long as the caller's context.
func TestVerifyConcurrentHonoursContext(t *testing.T) {
	b := &blocking{Bucket: memblob.New("slow"), held: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- objstore.Verify(ctx, b) }()
	select {
	case <-b.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the concurrent creates were never sent")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, objstore.ErrNotCreateOnly)
	case <-time.After(30 * time.Second):
		t.Fatal("Verify did not return after its context ended")
	}
}
