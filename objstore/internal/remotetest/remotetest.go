// Package remotetest holds the assertions that the tests of every
// backend over a remote store (objstore/s3, objstore/gcs,
// objstore/azblob) make alike, against a real server or an emulator:
// what New refuses, what a second create of a key answers, what Verify
// leaves behind, and what a zone that went down answers.
//
// The backend-specific part of each test (the server, the client's own
// error types) stays in the backend's package.
package remotetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/objstore"
)

// NewFunc is a backend's New over its client type C, its options given
// as objstore.RemoteOptions.
type NewFunc[C any] func(client *C, name string, opts objstore.RemoteOptions) (objstore.Bucket, error)

// NewValidates asserts that newBucket refuses a nil client, an empty
// name, each of badNames, and Retries outside [0, objstore.MaxRetries],
// each with a *cutline.ConfigError naming the field (field: the store's
// word for a bucket); and that a Bucket is named by name unless
// Options.Name says otherwise. client is a working client.
func NewValidates[C any](t testing.TB, newBucket NewFunc[C], client *C, field string, badNames ...string) {
	t.Helper()
	type refusal struct {
		what   string
		client *C
		name   string
		opts   objstore.RemoteOptions
		field  string
	}
	refusals := []refusal{
		{"nil client", nil, "zone-a", objstore.RemoteOptions{}, "client"},
		{"empty " + field, client, "", objstore.RemoteOptions{}, field},
		{"negative retries", client, "zone-a", objstore.RemoteOptions{Retries: -1}, "Retries"},
		{"too many retries", client, "zone-a", objstore.RemoteOptions{Retries: objstore.MaxRetries + 1}, "Retries"},
	}
	for _, name := range badNames {
		refusals = append(refusals, refusal{field + " " + name, client, name, objstore.RemoteOptions{}, field})
	}
	for _, r := range refusals {
		_, err := newBucket(r.client, r.name, r.opts)
		require.ErrorIs(t, err, cutline.ErrInvalid, r.what)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, r.what)
		require.Equal(t, r.field, ce.Field, r.what)
	}

	b, err := newBucket(client, "bkt", objstore.RemoteOptions{})
	require.NoError(t, err)
	require.Equal(t, "bkt", b.Name())
	b, err = newBucket(client, "bkt", objstore.RemoteOptions{Name: "zone-b"})
	require.NoError(t, err)
	require.Equal(t, "zone-b", b.Name())
}

// CreateTwice creates key "k" in b twice, with other bytes the second
// time, and asserts that the second create is refused as
// objstore.ErrExists (not ErrUnavailable), as an *objstore.OpError of
// "create" on "k", and that the first bytes stay. It returns the second
// create's error, for the backend to check the store's own answer in it.
func CreateTwice(t testing.TB, b objstore.Bucket) error {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, b.Create(ctx, "k", []byte("first")))
	err := b.Create(ctx, "k", []byte("second"))
	require.ErrorIs(t, err, objstore.ErrExists)
	require.NotErrorIs(t, err, objstore.ErrUnavailable)
	var op *objstore.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "create", op.Op)
	require.Equal(t, "k", op.Key)
	got, gerr := b.Get(ctx, "k")
	require.NoError(t, gerr)
	require.Equal(t, "first", string(got))
	return err
}

// VerifyRuns runs objstore.Verify on b runs times, each accepted, and
// asserts that no probe is left behind. b must be empty.
func VerifyRuns(t testing.TB, b objstore.Bucket, runs int) {
	t.Helper()
	ctx := t.Context()
	for i := range runs {
		require.NoError(t, objstore.Verify(ctx, b), "run %d", i)
	}
	page, err := b.List(ctx, "", "", 10)
	require.NoError(t, err)
	require.Empty(t, page, "Verify removes its probes")
}

// ZoneDown asserts what b answers once its store stopped, for the key
// "before" that was written and one never written: every Get, GetRange,
// Create, Delete and List is objstore.ErrUnavailable, never a missing
// object nor a taken key: an unknown outcome is not an absent one.
func ZoneDown(t testing.TB, ctx context.Context, b objstore.Bucket) {
	t.Helper()
	for _, key := range []string{"before", "never-written"} {
		_, err := b.Get(ctx, key)
		require.ErrorIs(t, err, objstore.ErrUnavailable, "get %s", key)
		require.NotErrorIs(t, err, objstore.ErrNotFound, "get %s: unknown is not absent", key)
		_, err = b.GetRange(ctx, key, 0, 1)
		require.ErrorIs(t, err, objstore.ErrUnavailable, "getrange %s", key)
		require.NotErrorIs(t, err, objstore.ErrNotFound, "getrange %s", key)
	}
	err := b.Create(ctx, "before", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotErrorIs(t, err, objstore.ErrExists, "a down zone cannot say the key is taken")
	require.ErrorIs(t, b.Delete(ctx, "before"), objstore.ErrUnavailable, "a delete on a down zone is not a success")
	_, err = b.List(ctx, "", "", 10)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
}
