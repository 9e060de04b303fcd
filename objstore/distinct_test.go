package objstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/mem"
)

// createsElsewhere acknowledges creates that land in another store, so
// its own reads never see them.
type createsElsewhere struct {
	*mem.Bucket
	sink *mem.Bucket
}

func (c createsElsewhere) Create(ctx context.Context, key string, data []byte) error {
	return c.sink.Create(ctx, key, data)
}

func TestVerifyDistinctAcceptsDistinctBuckets(t *testing.T) {
	a, b, c := mem.New("zone-a"), mem.New("zone-b"), mem.New("zone-c")
	require.NoError(t, objstore.VerifyDistinct(t.Context(), a, b, c))
	for _, z := range []*mem.Bucket{a, b, c} {
		require.Equal(t, 0, z.Len(), "%s: the probe is deleted", z.Name())
	}
	require.NoError(t, objstore.VerifyDistinct(t.Context(), a), "one bucket has nothing to compare")
	require.NoError(t, objstore.VerifyDistinct(t.Context()))
}

func TestVerifyDistinctRefusesAliases(t *testing.T) {
	a, b := mem.New("zone-a"), mem.New("zone-b")
	for _, tc := range []struct {
		name    string
		buckets []objstore.Bucket
		want    objstore.AliasError
	}{
		{"one store under two names", []objstore.Bucket{a, b, sameStore{a, "zone-c"}}, objstore.AliasError{A: "zone-a", B: "zone-c"}},
		{"alias listed first", []objstore.Bucket{sameStore{b, "zone-c"}, a, b}, objstore.AliasError{A: "zone-c", B: "zone-b"}},
		{"one handle twice", []objstore.Bucket{a, b, a}, objstore.AliasError{A: "zone-a", B: "zone-a"}},
		{"two stores under one name", []objstore.Bucket{a, mem.New("zone-a")}, objstore.AliasError{A: "zone-a", B: "zone-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := objstore.VerifyDistinct(t.Context(), tc.buckets...)
			require.ErrorIs(t, err, objstore.ErrAliased)
			var ae *objstore.AliasError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.want, *ae)
			require.Contains(t, err.Error(), `"`+tc.want.A+`"`)
			require.Contains(t, err.Error(), `"`+tc.want.B+`"`)
			require.Equal(t, 0, a.Len(), "the probes are deleted after a refusal")
			require.Equal(t, 0, b.Len(), "the probes are deleted after a refusal")
		})
	}
}

// TestVerifyDistinctNeverPassesSilently: a bucket that cannot answer fails
// the check as unavailable (never as a pass, never as an alias), and the
// probes already created elsewhere are removed.
func TestVerifyDistinctNeverPassesSilently(t *testing.T) {
	for _, tc := range []struct {
		name        string
		broken      func(inner *mem.Bucket) objstore.Bucket
		unavailable bool
		contains    string
	}{
		{name: "create-unavailable", unavailable: true, contains: "create probe",
			broken: func(m *mem.Bucket) objstore.Bucket { return &failing{Bucket: m, op: "create", calls: map[string]int{}} }},
		// zone-b's first Get reads zone-a's probe, its second its own.
		{name: "get-of-other-probe-unavailable", unavailable: true, contains: `of bucket "zone-a"`,
			broken: func(m *mem.Bucket) objstore.Bucket {
				return &failing{Bucket: m, op: "get", n: 1, calls: map[string]int{}}
			}},
		{name: "get-of-own-probe-unavailable", unavailable: true, contains: "read back its own probe",
			broken: func(m *mem.Bucket) objstore.Bucket {
				return &failing{Bucket: m, op: "get", n: 2, calls: map[string]int{}}
			}},
		{name: "creates-land-elsewhere", contains: "read back its own probe",
			broken: func(m *mem.Bucket) objstore.Bucket { return createsElsewhere{Bucket: m, sink: mem.New("sink")} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, inner := mem.New("zone-a"), mem.New("zone-b")
			err := objstore.VerifyDistinct(t.Context(), good, tc.broken(inner), mem.New("zone-c"))
			require.Error(t, err)
			require.NotErrorIs(t, err, objstore.ErrAliased)
			require.Equal(t, tc.unavailable, errors.Is(err, objstore.ErrUnavailable), "ErrUnavailable: %v", err)
			require.Contains(t, err.Error(), `"zone-b"`, "the error names the bucket")
			require.Contains(t, err.Error(), tc.contains)
			require.Contains(t, err.Error(), objstore.VerifyDir+"/")
			require.Equal(t, 0, good.Len(), "the probe of the good bucket is deleted")
			require.Equal(t, 0, inner.Len(), "the probe of the broken bucket is deleted")
		})
	}
}

func TestVerifyDistinctCanceled(t *testing.T) {
	a, b := mem.New("zone-a"), mem.New("zone-b")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := objstore.VerifyDistinct(ctx, a, b)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrAliased)
	require.Equal(t, 0, a.Len()+b.Len())
}

func TestVerifyDistinctNilBucket(t *testing.T) {
	err := objstore.VerifyDistinct(t.Context(), mem.New("zone-a"), nil)
	require.ErrorContains(t, err, "bucket 1 is nil")
	require.NotErrorIs(t, err, objstore.ErrAliased)
}
