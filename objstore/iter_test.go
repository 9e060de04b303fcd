package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// pagingErr fails List after a number of successful pages.
type pagingErr struct {
	*memblob.Bucket
	pages int
}

func (p *pagingErr) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	if p.pages == 0 {
		return nil, objstore.Unavailable(errors.New("timeout"))
	}
	p.pages--
	return p.Bucket.List(ctx, prefix, after, limit)
}

func TestAllPagesAndYieldsErrorOnce(t *testing.T) {
	ctx := t.Context()
	b := memblob.New("zone-a")
	for i := range 2500 {
		require.NoError(t, b.Create(ctx, fmt.Sprintf("k/%05d", i), nil))
	}
	require.NoError(t, b.Create(ctx, "other", nil))
	n := 0
	for o, err := range objstore.All(ctx, b, "k/") {
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("k/%05d", n), o.Key)
		n++
	}
	require.Equal(t, 2500, n)

	var errs []error
	n = 0
	for _, err := range objstore.All(ctx, &pagingErr{Bucket: b, pages: 2}, "k/") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	require.Equal(t, 2000, n)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], objstore.ErrUnavailable)
}
