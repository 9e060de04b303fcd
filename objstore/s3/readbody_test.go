package s3

import (
	"context"
	"errors"
	"io"
	"runtime"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
)

// largestFlight is the largest object a chain writes: 64 MiB of payload
// and a header of at most 97 bytes.
const largestFlight = 64<<20 + 97

// fakeBody is a response body of n bytes, handed out in network-sized
// chunks without allocating, followed by end (io.EOF when nil).
type fakeBody struct {
	n      int64
	end    error
	read   int64
	closed bool
}

func (f *fakeBody) Read(p []byte) (int, error) {
	if f.read >= f.n {
		if f.end != nil {
			return 0, f.end
		}
		return 0, io.EOF
	}
	m := int(min(int64(len(p)), f.n-f.read, 32<<10))
	f.read += int64(m)
	return m, nil
}

func (f *fakeBody) Close() error {
	f.closed = true
	return nil
}

func testBucket(t testing.TB) *Bucket {
	b, err := New(awss3.New(awss3.Options{Region: "us-east-1"}), "bkt", Options{RemoteOptions: objstore.RemoteOptions{Name: "zone-a"}})
	require.NoError(t, err)
	return b
}

// TestReadBodyAllocatesTheObjectSize: reading the largest flight allocates
// about its size, not the 128 to 256 MiB a doubling buffer reaches.
func TestReadBodyAllocatesTheObjectSize(t *testing.T) {
	b := testBucket(t)
	for _, size := range []int64{0, 1, 4 << 10, 1 << 20, 64 << 20, largestFlight, MaxObjectSize} {
		body := &fakeBody{n: size}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		data, err := b.remote.ReadBody(t.Context(), "get", "k", body, &size)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.Len(t, data, int(size))
		require.NotNil(t, data)
		require.True(t, body.closed)
		allocated := after.TotalAlloc - before.TotalAlloc
		require.LessOrEqual(t, allocated, uint64(size)+64<<10, "size %d: allocated %d bytes", size, allocated)
	}
}

func TestReadBodyRefusesOversizeAndBrokenBodies(t *testing.T) {
	b := testBucket(t)
	broken := errors.New("checksum mismatch")
	for _, tc := range []struct {
		name        string
		declared    int64 // Content-Length; -1: none
		body        *fakeBody
		want        []error
		maxRead     int64 // the body may be read this far at most
		unavailable bool
	}{
		{name: "declared larger than the limit", declared: MaxObjectSize + 1, body: &fakeBody{n: MaxObjectSize + 1},
			want: []error{objstore.ErrRejected, objstore.ErrObjectTooLarge}, maxRead: 0},
		{name: "undeclared larger than the limit", declared: -1, body: &fakeBody{n: 2 * MaxObjectSize},
			want: []error{objstore.ErrRejected, objstore.ErrObjectTooLarge}, maxRead: MaxObjectSize + 32<<10},
		{name: "longer than declared", declared: 10, body: &fakeBody{n: 2 * MaxObjectSize},
			want: []error{objstore.ErrUnavailable}, maxRead: 32 << 10},
		{name: "shorter than declared", declared: 100, body: &fakeBody{n: 10},
			want: []error{objstore.ErrUnavailable, io.ErrUnexpectedEOF}, maxRead: 10},
		{name: "empty but declared", declared: 100, body: &fakeBody{n: 0},
			want: []error{objstore.ErrUnavailable, io.ErrUnexpectedEOF}, maxRead: 0},
		{name: "failure at the end", declared: 100, body: &fakeBody{n: 100, end: broken},
			want: []error{objstore.ErrUnavailable, broken}, maxRead: 100},
		{name: "failure at the end, undeclared", declared: -1, body: &fakeBody{n: 100, end: broken},
			want: []error{objstore.ErrUnavailable, broken}, maxRead: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var size *int64
			if tc.declared >= 0 {
				size = &tc.declared
			}
			data, err := b.remote.ReadBody(t.Context(), "get", "k", tc.body, size)
			require.True(t, data == nil, "no data with an error")
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			require.NotErrorIs(t, err, objstore.ErrNotFound)
			var op *objstore.OpError
			require.ErrorAs(t, err, &op)
			require.Equal(t, "zone-a", op.Bucket)
			require.LessOrEqual(t, tc.body.read, tc.maxRead, "read without bound")
			require.True(t, tc.body.closed)
		})
	}
}

func TestReadBodyUndeclaredLength(t *testing.T) {
	b := testBucket(t)
	for _, n := range []int64{0, 1, 100 << 10, MaxObjectSize} {
		data, err := b.remote.ReadBody(t.Context(), "get", "k", &fakeBody{n: n}, nil)
		require.NoError(t, err)
		require.NotNil(t, data)
		require.Len(t, data, int(n))
	}
}

func TestReadBodyCanceled(t *testing.T) {
	b := testBucket(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	size := int64(100)
	_, err := b.remote.ReadBody(ctx, "get", "k", &fakeBody{n: 10, end: errors.New("request canceled")}, &size)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrUnavailable)
}

// BenchmarkReadBodyLargestFlight reports the bytes allocated to read the
// largest flight: about its size (64 MiB + 97 B).
func BenchmarkReadBodyLargestFlight(b *testing.B) {
	bk := testBucket(b)
	size := int64(largestFlight)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bk.remote.ReadBody(b.Context(), "get", "k", &fakeBody{n: size}, &size); err != nil {
			b.Fatal(err)
		}
	}
}
