package racystore_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/racystore"
	"github.com/cutline/cutline/objstore/memblob"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Keys that do not match are create-only; a burst of Creators creates of
// a matching key all succeed, and the last write stays.
func TestRacyStore(t *testing.T) {
	ctx := t.Context()
	inner := memblob.New("racy")
	b := racystore.Wrap(inner, racystore.Options{Creators: 3, Match: func(k string) bool { return k == "burst" }})
	require.NoError(t, b.Create(ctx, "seq", []byte("first")))
	require.ErrorIs(t, b.Create(ctx, "seq", []byte("second")), objstore.ErrExists)

	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = b.Create(ctx, "burst", []byte{byte('a' + i)}) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "create %d", i)
	}
	require.Empty(t, b.Missed())
	require.Equal(t, 3, b.Raced())
	got, err := b.Get(ctx, "burst")
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// Keys that do not match are create-only even under a burst.
func TestRacyStoreMatch(t *testing.T) {
	ctx := t.Context()
	b := racystore.Wrap(memblob.New("racy"), racystore.Options{Match: func(string) bool { return false }})
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = b.Create(ctx, "k", []byte{byte(i)}) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			require.ErrorIs(t, err, objstore.ErrExists)
		}
	}
	require.Equal(t, 1, won)
	require.Zero(t, b.Raced())
}
