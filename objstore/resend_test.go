package objstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// scripted answers one attempt per call from its list, and lands the
// bytes in the bucket when told to (an upload whose answer was lost).
type scripted struct {
	b       objstore.Bucket
	answers []error
	land    []bool
	calls   int
}

func (s *scripted) send(data []byte) func(context.Context) error {
	return func(ctx context.Context) error {
		i := s.calls
		s.calls++
		if i < len(s.land) && s.land[i] {
			_ = s.b.Create(ctx, "k", data)
		}
		if i < len(s.answers) {
			return s.answers[i]
		}
		return nil
	}
}

// classifyAs passes the scripted errors through: they are sentinels.
func classifyAs(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return objstore.ContextEnded(ctx.Err(), err)
	}
	return err
}

func TestResender(t *testing.T) {
	unavailable := objstore.Unavailable(errors.New("503"))
	for _, tc := range []struct {
		name    string
		answers []error
		land    []bool
		other   bool // another writer's bytes at the key first
		retries int
		want    error // nil: success
		calls   int
	}{
		{name: "first answer", calls: 1},
		{name: "exists at once", answers: []error{objstore.ErrExists}, other: true, retries: 3, want: objstore.ErrExists, calls: 1},
		{name: "lost answer, own bytes read back", answers: []error{unavailable, objstore.ErrExists}, land: []bool{true}, retries: 3, calls: 2},
		{name: "lost answer, other bytes read back", answers: []error{unavailable, objstore.ErrExists}, other: true, retries: 3, want: objstore.ErrExists, calls: 2},
		{name: "unavailable until retries run out", answers: []error{unavailable, unavailable, unavailable}, retries: 2, want: objstore.ErrUnavailable, calls: 3},
		{name: "zero retries", answers: []error{unavailable}, want: objstore.ErrUnavailable, calls: 1},
		{name: "retries run out, own bytes read back", answers: []error{unavailable, unavailable}, land: []bool{true}, retries: 1, calls: 2},
		{name: "retries run out, other bytes read back", answers: []error{unavailable, unavailable}, other: true, retries: 1, want: objstore.ErrExists, calls: 2},
		{name: "not found is the bucket", answers: []error{objstore.ErrNotFound}, retries: 3, want: objstore.ErrNoSuchBucket, calls: 1},
		{name: "refused", answers: []error{objstore.ErrAccessDenied}, retries: 3, want: objstore.ErrAccessDenied, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b := memblob.New("zone-a")
			if tc.other {
				require.NoError(t, b.Create(ctx, "k", []byte("theirs")))
			}
			s := &scripted{b: b, answers: tc.answers, land: tc.land}
			r := objstore.Resender{Bucket: b, Kind: "test", Retries: tc.retries, Backoff: clock.Backoff{Min: time.Nanosecond, Max: time.Nanosecond}}
			err := r.Create(ctx, "k", []byte("ours"), s.send([]byte("ours")), classifyAs)
			require.Equal(t, tc.calls, s.calls, "attempts sent")
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var oe *objstore.OpError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, "create", oe.Op)
			require.Equal(t, "zone-a", oe.Bucket)
		})
	}
}

// A context that ends during the backoff ends the create with its error.
func TestResenderCanceledDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := memblob.New("zone-a")
	send := func(context.Context) error { cancel(); return objstore.Unavailable(errors.New("503")) }
	r := objstore.Resender{Bucket: b, Retries: 5, Backoff: clock.Backoff{Min: time.Hour, Max: time.Hour}}
	err := r.Create(ctx, "k", []byte("x"), send, classifyAs)
	require.ErrorIs(t, err, context.Canceled)
}
