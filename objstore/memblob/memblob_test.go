package memblob_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/objstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return memblob.New("zone-a") })
}

// TestConformanceShared runs the suite against one bucket shared by every
// subtest, as a real shared bucket would be.
func TestConformanceShared(t *testing.T) {
	shared := memblob.New("shared")
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return shared })
	require.Equal(t, 0, shared.Len(), "the suite removes what it created")
}

func BenchmarkBucket(b *testing.B) {
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket { return memblob.New("zone-a") })
}

// TestListIndex drives random creates, deletes and lists and compares every
// page with a plain sorted model, so the lazily merged index cannot drift.
func TestListIndex(t *testing.T) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(7, 11))
	b := memblob.New("zone-a")
	model := map[string]int{}
	keyOf := func() string {
		return fmt.Sprintf("%c/%02d", 'a'+r.IntN(3), r.IntN(40))
	}
	for step := range 5000 {
		switch op := r.IntN(10); {
		case op < 4:
			k := keyOf()
			size := r.IntN(5)
			err := b.Create(ctx, k, make([]byte, size))
			if _, ok := model[k]; ok {
				require.ErrorIs(t, err, objstore.ErrExists, "step %d", step)
			} else {
				require.NoError(t, err, "step %d", step)
				model[k] = size
			}
		case op < 7:
			k := keyOf()
			require.NoError(t, b.Delete(ctx, k))
			delete(model, k)
		default:
			prefix := []string{"", "a", "b/", "c/1", "z"}[r.IntN(5)]
			after := ""
			if r.IntN(2) == 0 {
				after = keyOf()
			}
			limit := r.IntN(6)
			var want []objstore.ObjectInfo
			for k, size := range model {
				if strings.HasPrefix(k, prefix) && k > after {
					want = append(want, objstore.ObjectInfo{Key: k, Size: int64(size)})
				}
			}
			slices.SortFunc(want, func(x, y objstore.ObjectInfo) int { return strings.Compare(x.Key, y.Key) })
			if n := limit; n > 0 && len(want) > n {
				want = want[:n]
			}
			got, err := b.List(ctx, prefix, after, limit)
			require.NoError(t, err)
			if len(want) == 0 {
				require.Empty(t, got, "step %d", step)
			} else {
				require.Equal(t, want, got, "step %d: prefix %q after %q limit %d", step, prefix, after, limit)
			}
		}
		require.Equal(t, len(model), b.Len())
	}
}

func TestOpErrorNamesBucket(t *testing.T) {
	b := memblob.New("zone-b")
	_, err := b.Get(t.Context(), "missing")
	var op *objstore.OpError
	require.True(t, errors.As(err, &op))
	require.Equal(t, objstore.OpError{Op: "get", Bucket: "zone-b", Key: "missing", Err: objstore.ErrNotFound}, *op)
}

func Example() {
	ctx := context.Background()
	b := memblob.New("zone-a")
	_ = b.Create(ctx, "p/s/00000001/00000000", []byte("flight"))
	err := b.Create(ctx, "p/s/00000001/00000000", []byte("poison"))
	fmt.Println(errors.Is(err, objstore.ErrExists))
	part, _ := b.GetRange(ctx, "p/s/00000001/00000000", 2, 3)
	fmt.Println(string(part))
	fmt.Println(b.Len())
	// Output:
	// true
	// igh
	// 1
}
