package classifytest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/classifytest"
)

var (
	errMissing = errors.New("toy: missing")
	errTaken   = errors.New("toy: taken")
	errBusy    = errors.New("toy: busy")
	// errNarrow is the toy's own class, seen as ErrUnavailable elsewhere.
	errNarrow = fmt.Errorf("toy: narrow: %w", objstore.ErrUnavailable)
)

// toy is a backend in the shape of objstore/s3 and objstore/gcs.
func toy(err error) error {
	switch {
	case errors.Is(err, errMissing):
		return objstore.ErrNotFound
	case errors.Is(err, errTaken):
		return objstore.ErrExists
	case errors.Is(err, errBusy):
		return errNarrow
	}
	return objstore.ErrUnavailable
}

func toyCall(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return objstore.ContextEnded(ctxErr, err)
	}
	return objstore.Classify(toy(err), err)
}

var backend = classifytest.Backend{Classify: toy, Call: toyCall, Narrowed: []classifytest.Narrowed{
	{Class: errNarrow, Seen: objstore.ErrUnavailable, Why: "narrow outside its operation"},
}}

func TestCheck(t *testing.T) {
	classifytest.Check(t, backend, errMissing, objstore.ErrNotFound)
	classifytest.Check(t, backend, fmt.Errorf("wrapped: %w", errTaken), objstore.ErrExists)
	classifytest.Check(t, backend, errBusy, errNarrow)
	classifytest.Check(t, backend, context.DeadlineExceeded, objstore.ErrUnavailable)
	classifytest.CallPrefersTheContext(t, toyCall, nil)
	classifytest.CallPrefersTheContext(t, toyCall, func(err error) error { return fmt.Errorf("get: %w", err) })
}

// recorder notes a failure instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) FailNow()              { r.failed = true; runtime.Goexit() }

func TestCheckFails(t *testing.T) {
	for _, c := range []struct {
		name      string
		b         classifytest.Backend
		err, want error
	}{
		{"wrong class", backend, errMissing, objstore.ErrExists},
		{"narrowed class not seen as its sentinel", classifytest.Backend{Classify: toy, Call: toyCall,
			Narrowed: []classifytest.Narrowed{{Class: errNarrow, Seen: objstore.ErrRejected}}}, errBusy, errNarrow},
		{"cause dropped", classifytest.Backend{Classify: toy, Call: func(_ context.Context, err error) error {
			return toy(err)
		}}, errMissing, objstore.ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				classifytest.Check(r, c.b, c.err, c.want)
			}()
			<-done
			require.True(t, r.failed)
		})
	}
}

func TestRun(t *testing.T) {
	classifytest.Run(t, backend, []classifytest.Case{
		{"missing", errMissing, objstore.ErrNotFound},
		{"narrow", errBusy, errNarrow},
	}, classifytest.Transport(nil), classifytest.Transport(func(err error) error { return fmt.Errorf("op: %w", err) }))
}

// TestRemote: the Backend of a Remote calls through objstore.Remote and
// narrows ErrUnsatisfiableRange besides the backend's own classes.
func TestRemote(t *testing.T) {
	b := classifytest.Remote(toy, classifytest.Narrowed{Class: errNarrow, Seen: objstore.ErrUnavailable})
	require.Equal(t, []classifytest.Narrowed{classifytest.RangeRejected, b.Narrowed[1]}, b.Narrowed)
	require.Equal(t, errNarrow, b.Narrowed[1].Class)
	classifytest.Check(t, b, errBusy, errNarrow)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.Call(ctx, errMissing), context.Canceled)
	classifytest.Check(t, classifytest.Remote(func(error) error { return objstore.ErrUnsatisfiableRange }),
		errors.New("416"), objstore.ErrUnsatisfiableRange)
}
