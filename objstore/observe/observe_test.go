package observe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/objstoretest"
	"github.com/cutline/cutline/objstore/observe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		b, err := observe.Wrap(memblob.New("zone-a"), func(string, observe.Op, error) {})
		require.NoError(t, err)
		return b
	})
}

// Every request is reported once, with its bucket, operation and
// outcome.
func TestReportsEveryRequest(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	b, err := observe.Wrap(memblob.New("zone-a"), func(bucket string, op observe.Op, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%s %s %s", bucket, op, observe.Outcome(err)))
	})
	require.NoError(t, err)
	require.NoError(t, b.Create(ctx, "k", []byte("v")))
	require.ErrorIs(t, b.Create(ctx, "k", []byte("w")), objstore.ErrExists)
	data, err := b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(data))
	_, err = b.Get(ctx, "none")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	_, err = b.GetRange(ctx, "k", 0, 1)
	require.NoError(t, err)
	_, err = b.List(ctx, "", "", 0)
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, "k"))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.Get(canceled, "k")
	require.Error(t, err)
	require.Equal(t, []string{
		"zone-a create ok", "zone-a create exists", "zone-a get ok", "zone-a get not_found",
		"zone-a get_range ok", "zone-a list ok", "zone-a delete ok", "zone-a get canceled",
	}, got)
}

func TestOutcome(t *testing.T) {
	require.Equal(t, "ok", observe.Outcome(nil))
	require.Equal(t, "not_found", observe.Outcome(fmt.Errorf("x: %w", objstore.ErrNotFound)))
	require.Equal(t, "exists", observe.Outcome(fmt.Errorf("x: %w", objstore.ErrExists)))
	require.Equal(t, "canceled", observe.Outcome(fmt.Errorf("x: %w", context.Canceled)))
	require.Equal(t, "error", observe.Outcome(objstore.ErrUnavailable))
	require.Equal(t, "error", observe.Outcome(errors.New("boom")))
}

func TestWrapRefusesNil(t *testing.T) {
	_, err := observe.Wrap(nil, func(string, observe.Op, error) {})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	_, err = observe.Wrap(memblob.New("zone-a"), nil)
	require.ErrorIs(t, err, cutline.ErrInvalid)
}
