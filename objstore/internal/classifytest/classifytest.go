// Package classifytest checks an object-store backend's error
// classification: the assertions that objstore/s3 and objstore/gcs each
// make over their classify and classifyCall functions, for every client
// error in their own tables.
//
// A backend's classify maps a client error to the class it stands for (an
// objstore sentinel, or one of the backend's own, narrower ones);
// classifyCall is what callers see: that class wrapped with the client's
// error, or the context's error when the context is done.
package classifytest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
)

// Narrowed is one of a backend's own classes, which only one operation
// tells apart: elsewhere callers must see it as Seen, for the reason Why.
type Narrowed struct {
	Class error
	Seen  error
	Why   string
}

// Backend is the classification under test.
type Backend struct {
	Classify func(error) error
	Call     func(context.Context, error) error
	// Narrowed lists the backend's own classes.
	Narrowed []Narrowed
}

// Check asserts that b classifies the client error err as exactly want,
// and that b.Call under a live context wraps both: it matches want (and
// a narrowed class's Seen), matches ErrNotFound or ErrExists only when
// want is that sentinel, and keeps err reachable.
func Check(t testing.TB, b Backend, err, want error) {
	t.Helper()
	got := b.Classify(err)
	require.Same(t, want, got, "classify(%v) = %v", err, got)

	// What callers see.
	w := b.Call(context.Background(), err)
	assert.ErrorIs(t, w, want)
	for _, n := range b.Narrowed {
		if want == n.Class {
			assert.ErrorIs(t, w, n.Seen, n.Why)
		}
	}
	if want != objstore.ErrNotFound {
		assert.NotErrorIs(t, w, objstore.ErrNotFound, "only a definite 404 may read as not found")
	}
	if want != objstore.ErrExists {
		assert.NotErrorIs(t, w, objstore.ErrExists)
	}
	assert.ErrorIs(t, w, err, "the client's error stays reachable")
}

// CallPrefersTheContext asserts that call reports a done context's error
// over the client's: canceled, a client error that wraps context.Canceled,
// must come back under a canceled context as context.Canceled (with
// canceled reachable) and neither ErrNotFound nor ErrUnavailable. A live
// context leaves the client's classification alone, even when the
// client's own timeout says "deadline exceeded": deadline, such an error,
// must come back as ErrUnavailable.
func CallPrefersTheContext(t testing.TB, call func(context.Context, error) error, canceled, deadline error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := call(ctx, canceled)
	require.ErrorIs(t, w, context.Canceled)
	require.ErrorIs(t, w, canceled)
	require.NotErrorIs(t, w, objstore.ErrNotFound)
	require.NotErrorIs(t, w, objstore.ErrUnavailable)

	w = call(context.Background(), deadline)
	require.ErrorIs(t, w, objstore.ErrUnavailable)
}
