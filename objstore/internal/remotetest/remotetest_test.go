package remotetest_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/internal/remotetest"
	"github.com/cutline/cutline/objstore/memblob"
)

// client stands for a store's client.
type client struct{}

// store refuses names with a slash.
var store = objstore.RemoteStore{
	Kind:      "toy",
	NameField: "bucket",
	ValidName: func(name string) bool { return !strings.Contains(name, "/") },
	NameRule:  "no slash",
	Classify:  func(err error) error { return err },
}

// newToy is a backend's New: NewRemote's checks over an in-memory bucket.
func newToy(c *client, name string, opts objstore.RemoteOptions) (objstore.Bucket, error) {
	r, err := objstore.NewRemote(c, name, opts, store)
	if err != nil {
		return nil, err
	}
	return memblob.New(r.Name), nil
}

// overwriting is a bucket whose Create replaces what is there.
type overwriting struct{ objstore.Bucket }

func (b overwriting) Create(ctx context.Context, key string, data []byte) error {
	_ = b.Bucket.Delete(ctx, key)
	return b.Bucket.Create(ctx, key, data)
}

// recorder notes a failure instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) FailNow()              { r.failed = true; runtime.Goexit() }
func (r *recorder) Helper()               {}

// fails runs check on a recorder and asserts that it failed.
func fails(t *testing.T, check func(t testing.TB)) {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	require.True(t, r.failed)
}

func TestNewValidates(t *testing.T) {
	remotetest.NewValidates(t, newToy, &client{}, "bucket", "a/b")

	fails(t, func(t testing.TB) {
		lax := func(c *client, name string, opts objstore.RemoteOptions) (objstore.Bucket, error) {
			opts.Retries = 0 // a backend that ignores a bad Retries
			return newToy(c, name, opts)
		}
		remotetest.NewValidates(t, lax, &client{}, "bucket")
	})
	fails(t, func(t testing.TB) {
		remotetest.NewValidates(t, newToy, &client{}, "bucket", "a-valid-name")
	})
	fails(t, func(t testing.TB) {
		unnamed := func(c *client, name string, opts objstore.RemoteOptions) (objstore.Bucket, error) {
			opts.Name = ""
			return newToy(c, name, opts)
		}
		remotetest.NewValidates(t, unnamed, &client{}, "bucket")
	})
}

func TestCreateTwice(t *testing.T) {
	err := remotetest.CreateTwice(t, memblob.New("zone-a"))
	require.ErrorIs(t, err, objstore.ErrExists)
	fails(t, func(t testing.TB) { remotetest.CreateTwice(t, overwriting{memblob.New("zone-a")}) })
}

func TestVerifyRuns(t *testing.T) {
	remotetest.VerifyRuns(t, memblob.New("zone-a"), 3)
	fails(t, func(t testing.TB) { remotetest.VerifyRuns(t, overwriting{memblob.New("zone-a")}, 1) })
}

func TestZoneDown(t *testing.T) {
	b := fault.Wrap(memblob.New("zone-a"), fault.Options{})
	require.NoError(t, b.Create(t.Context(), "before", []byte("kept")))
	b.SetDown(true)
	remotetest.ZoneDown(t, t.Context(), b)

	b.SetDown(false)
	fails(t, func(t testing.TB) { remotetest.ZoneDown(t, t.Context(), b) })
}
