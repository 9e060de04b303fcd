package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/racystore"
	"github.com/cutline/cutline/objstore/memblob"
)

// createsElsewhere acknowledges creates that land in another store, so
// its own reads never see them.
type createsElsewhere struct {
	*memblob.Bucket
	sink *memblob.Bucket
}

func (c createsElsewhere) Create(ctx context.Context, key string, data []byte) error {
	return c.sink.Create(ctx, key, data)
}

func TestVerifyDistinctAcceptsDistinctBuckets(t *testing.T) {
	a, b, c := memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")
	require.NoError(t, objstore.VerifyDistinct(t.Context(), a, b, c))
	for _, z := range []*memblob.Bucket{a, b, c} {
		require.Equal(t, 0, z.Len(), "%s: the probe is deleted", z.Name())
	}
	require.NoError(t, objstore.VerifyDistinct(t.Context(), a), "one bucket has nothing to compare")
	err := objstore.VerifyZones(t.Context(), nil, objstore.VerifyOptions{})
	require.ErrorIs(t, err, cutline.ErrInvalid, "a zone set of no bucket")
	require.NoError(t, objstore.VerifyZones(t.Context(), []objstore.Bucket{a, b, c}, objstore.VerifyOptions{Prefix: "tenant/x"}))
	require.Equal(t, 0, a.Len()+b.Len()+c.Len())
}

func TestVerifyDistinctRefusesAliases(t *testing.T) {
	a, b := memblob.New("zone-a"), memblob.New("zone-b")
	for _, tc := range []struct {
		name    string
		buckets []objstore.Bucket
		want    objstore.AliasError
	}{
		{"one store under two names", []objstore.Bucket{a, b, sameStore{a, "zone-c"}}, objstore.AliasError{A: "zone-a", B: "zone-c"}},
		{"alias listed first", []objstore.Bucket{sameStore{b, "zone-c"}, a, b}, objstore.AliasError{A: "zone-c", B: "zone-b"}},
		{"one handle twice", []objstore.Bucket{a, b, a}, objstore.AliasError{A: "zone-a", B: "zone-a"}},
		{"two stores under one name", []objstore.Bucket{a, memblob.New("zone-a")}, objstore.AliasError{A: "zone-a", B: "zone-a"}},
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

// verifyGets is how many Gets Verify sends to a bucket that passes: two
// in the sequential check, one read-back per key in the concurrent one.
const verifyGets = 2 + objstore.VerifyRaceKeys

// TestVerifyDistinctNeverPassesSilently: a bucket that cannot answer fails
// the check as unavailable (never as a pass, never as an alias), and the
// probes already created elsewhere are removed. The failures of the
// comparison come after the create-only checks, which each bucket passes.
func TestVerifyDistinctNeverPassesSilently(t *testing.T) {
	for _, tc := range []struct {
		name        string
		broken      func(inner *memblob.Bucket) objstore.Bucket
		unavailable bool
		contains    string
	}{
		{name: "create-unavailable", unavailable: true, contains: "create probe",
			broken: func(m *memblob.Bucket) objstore.Bucket {
				return &failing{Bucket: m, op: "create", calls: map[string]int{}}
			}},
		// After Verify, zone-b's first Get reads zone-a's probe, its
		// second its own.
		{name: "get-of-other-probe-unavailable", unavailable: true, contains: `of bucket "zone-a"`,
			broken: func(m *memblob.Bucket) objstore.Bucket {
				return &failing{Bucket: m, op: "get", n: verifyGets + 1, calls: map[string]int{}}
			}},
		{name: "get-of-own-probe-unavailable", unavailable: true, contains: "read back its own probe",
			broken: func(m *memblob.Bucket) objstore.Bucket {
				return &failing{Bucket: m, op: "get", n: verifyGets + 2, calls: map[string]int{}}
			}},
		// The create-only check already finds the probe missing.
		{name: "creates-land-elsewhere", contains: "verify bucket \"zone-b\": read back",
			broken: func(m *memblob.Bucket) objstore.Bucket { return createsElsewhere{Bucket: m, sink: memblob.New("sink")} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, inner := memblob.New("zone-a"), memblob.New("zone-b")
			err := objstore.VerifyDistinct(t.Context(), good, tc.broken(inner), memblob.New("zone-c"))
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
	a, b := memblob.New("zone-a"), memblob.New("zone-b")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := objstore.VerifyDistinct(ctx, a, b)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrAliased)
	require.Equal(t, 0, a.Len()+b.Len())
}

func TestVerifyDistinctNilBucket(t *testing.T) {
	err := objstore.VerifyDistinct(t.Context(), memblob.New("zone-a"), nil)
	require.ErrorContains(t, err, "bucket 1 is nil")
	require.ErrorIs(t, err, cutline.ErrInvalid)
	require.NotErrorIs(t, err, objstore.ErrAliased)
}

// TestVerifyZonesCatchesOneStoreTwice: two handles on one store each pass
// the create-only checks, and the one start-up check still refuses the
// set, so a host that runs it cannot miss the alias.
func TestVerifyZonesCatchesOneStoreTwice(t *testing.T) {
	a, b := memblob.New("zone-a"), memblob.New("zone-b")
	alias := sameStore{a, "zone-c"}
	for _, z := range []objstore.Bucket{a, b, alias} {
		require.NoError(t, objstore.Verify(t.Context(), z), "%s alone passes", z.Name())
	}
	err := objstore.VerifyZones(t.Context(), []objstore.Bucket{a, b, alias}, objstore.VerifyOptions{})
	var ae *objstore.AliasError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, objstore.AliasError{A: "zone-a", B: "zone-c"}, *ae)
	require.Equal(t, 0, a.Len()+b.Len())
}

// TestVerifyZonesRefusesARacyZone: one zone that is create-only only one
// request at a time fails the start-up check of the whole set, named.
func TestVerifyZonesRefusesARacyZone(t *testing.T) {
	inner := memblob.New("zone-b")
	racy := racystore.Wrap(inner, racystore.Options{Match: isRaceProbe})
	err := objstore.VerifyZones(t.Context(), []objstore.Bucket{memblob.New("zone-a"), racy, memblob.New("zone-c")}, objstore.VerifyOptions{})
	require.ErrorIs(t, err, objstore.ErrNotCreateOnly)
	require.NotErrorIs(t, err, objstore.ErrAliased)
	require.Contains(t, err.Error(), `"zone-b"`)
	require.Empty(t, racy.Missed())
	require.Equal(t, 0, inner.Len(), "the probes are deleted")
}

// TestVerifyZonesCost counts the requests of the start-up check of K
// zones: K × VerifyRequests, then 2K + K² for the comparison.
func TestVerifyZonesCost(t *testing.T) {
	for k := 1; k <= 5; k++ {
		zones := make([]objstore.Bucket, k)
		counters := make([]*counting, k)
		for i := range zones {
			counters[i] = &counting{Bucket: memblob.New(fmt.Sprintf("zone-%c", 'a'+i))}
			zones[i] = counters[i]
		}
		require.NoError(t, objstore.VerifyZones(t.Context(), zones, objstore.VerifyOptions{}))
		total := 0
		for _, c := range counters {
			total += int(c.n.Load())
		}
		require.Equal(t, k*objstore.VerifyRequests+2*k+k*k, total, "K=%d", k)
	}
}
