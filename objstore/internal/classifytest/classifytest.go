// Package classifytest checks an object-store backend's error
// classification: the assertions that objstore/s3, objstore/gcs and
// objstore/azblob each make over their classify function and the
// objstore.Remote that calls it, for every client error in their own
// tables.
//
// A backend's classify maps a client error to the class it stands for (an
// objstore sentinel, or one of the backend's own, narrower ones);
// Remote.Call is what callers see: that class wrapped with the client's
// error, or the context's error when the context is done.
package classifytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
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

// RangeRejected is the class every objstore.Remote narrows:
// ErrUnsatisfiableRange, which only GetRange settles.
var RangeRejected = Narrowed{Class: objstore.ErrUnsatisfiableRange, Seen: objstore.ErrRejected,
	Why: "a 416 outside GetRange is a rejection"}

// Remote is the Backend of an objstore.Remote over classify, whose own
// classes are RangeRejected and narrowed.
func Remote(classify func(error) error, narrowed ...Narrowed) Backend {
	return Backend{Classify: classify, Call: objstore.Remote{Classify: classify}.Call,
		Narrowed: append([]Narrowed{RangeRejected}, narrowed...)}
}

// Case is one row of a backend's table: the client error Err stands for
// Want. It is an unnamed struct type, so that a table lists its rows
// without field names.
type Case = struct {
	Name      string
	Err, Want error
}

// Run checks each case of the tables with Check, in a subtest of its
// name.
func Run(t *testing.T, b Backend, tables ...[]Case) {
	t.Helper()
	for _, cases := range tables {
		for _, c := range cases {
			t.Run(c.Name, func(t *testing.T) { Check(t, b, c.Err, c.Want) })
		}
	}
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
// over the client's: a canceled request, as the client reports it (an
// *url.Error over context.Canceled, wrapped by wrap), must come back
// under a canceled context as context.Canceled (with the client's error
// reachable) and neither ErrNotFound nor ErrUnavailable. A live context
// leaves the client's classification alone, even when the client's own
// timeout says "deadline exceeded": such an error must come back as
// ErrUnavailable. A nil wrap leaves the errors as they are.
func CallPrefersTheContext(t testing.TB, call func(context.Context, error) error, wrap func(error) error) {
	t.Helper()
	wrap = orSelf(wrap)
	canceled := wrap(&url.Error{Op: "Get", URL: "http://x", Err: context.Canceled})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := call(ctx, canceled)
	require.ErrorIs(t, w, context.Canceled)
	require.ErrorIs(t, w, canceled)
	require.NotErrorIs(t, w, objstore.ErrNotFound)
	require.NotErrorIs(t, w, objstore.ErrUnavailable)

	w = call(context.Background(), wrap(context.DeadlineExceeded))
	require.ErrorIs(t, w, objstore.ErrUnavailable)
}

// Transport is the rows every backend's table shares: failures below the
// store's protocol (a refused or reset connection, a truncated body, a
// timeout, a deadline of the client's own, an error nobody knows), each
// wrapped by wrap as the client returns it (nil: as they are). All are
// ErrUnavailable: the outcome is unknown, never "absent".
func Transport(wrap func(error) error) []Case {
	wrap = orSelf(wrap)
	return []Case{
		{"connection refused", wrap(&url.Error{Op: "Put", URL: "http://127.0.0.1:1/b/k",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), objstore.ErrUnavailable},
		{"connection reset", wrap(&url.Error{Op: "Get", URL: "http://127.0.0.1:1/b/k", Err: syscall.ECONNRESET}), objstore.ErrUnavailable},
		{"unexpected EOF", wrap(fmt.Errorf("reading the body: %w", io.ErrUnexpectedEOF)), objstore.ErrUnavailable},
		{"timeout", wrap(&net.DNSError{IsTimeout: true}), objstore.ErrUnavailable},
		{"deadline not ours", wrap(context.DeadlineExceeded), objstore.ErrUnavailable},
		{"unknown", errors.New("something odd"), objstore.ErrUnavailable},
	}
}

func orSelf(wrap func(error) error) func(error) error {
	if wrap == nil {
		return func(err error) error { return err }
	}
	return wrap
}
