package objstoretest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cutline/cutline/objstore"
)

// BenchObjectSize is the payload size of every benchmark object: about the
// size of a small flight.
const BenchObjectSize = 1 << 10

// benchGetObjects is how many objects the Get benchmarks cycle through.
const benchGetObjects = 256

// RunBenchmarks reports create and get throughput of the buckets made by
// newBucket, the same way for every backend, so their numbers compare:
//
//	Create/1KiB          one goroutine, a new key per call
//	CreateParallel/1KiB  GOMAXPROCS goroutines (see -cpu), new keys
//	Get/1KiB             one goroutine, 256 existing keys in turn
//	GetParallel/1KiB     GOMAXPROCS goroutines
//	Verify               objstore.Verify, the start-up check of one bucket
//
// Each reports bytes/s (b.SetBytes) and allocations. newBucket is called once
// per sub-benchmark; like Run, the benchmarks work under a random prefix and
// delete their objects at the end.
func RunBenchmarks(b *testing.B, newBucket func(b *testing.B) objstore.Bucket) {
	b.Helper()
	b.Run("Create/1KiB", func(b *testing.B) { BenchmarkCreate(b, newBucket(b)) })
	b.Run("CreateParallel/1KiB", func(b *testing.B) { BenchmarkCreateParallel(b, newBucket(b)) })
	b.Run("Get/1KiB", func(b *testing.B) { BenchmarkGet(b, newBucket(b)) })
	b.Run("GetParallel/1KiB", func(b *testing.B) { BenchmarkGetParallel(b, newBucket(b)) })
	b.Run("Verify", func(b *testing.B) { BenchmarkVerify(b, newBucket(b)) })
}

// BenchmarkVerify measures objstore.Verify on bucket: the time of one
// start-up check of a bucket that passes it, and its requests (the
// metric requests/op, counted at the Bucket interface, which does not
// depend on the machine).
func BenchmarkVerify(b *testing.B, bucket objstore.Bucket) {
	ctx := context.Background()
	c := &countingBucket{Bucket: bucket}
	b.ReportAllocs()
	for b.Loop() {
		if err := objstore.Verify(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(c.n.Load())/float64(b.N), "requests/op")
}

// countingBucket counts the requests made through it.
type countingBucket struct {
	objstore.Bucket
	n atomic.Int64
}

func (c *countingBucket) Create(ctx context.Context, key string, data []byte) error {
	c.n.Add(1)
	return c.Bucket.Create(ctx, key, data)
}

func (c *countingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	c.n.Add(1)
	return c.Bucket.Get(ctx, key)
}

func (c *countingBucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	c.n.Add(1)
	return c.Bucket.GetRange(ctx, key, offset, length)
}

func (c *countingBucket) Delete(ctx context.Context, key string) error {
	c.n.Add(1)
	return c.Bucket.Delete(ctx, key)
}

func (c *countingBucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	c.n.Add(1)
	return c.Bucket.List(ctx, prefix, startAfter, limit)
}

func benchPrefix(b *testing.B, bucket objstore.Bucket, name string) string {
	p := uniquePrefix("bench-" + name)
	b.Cleanup(func() { removeAll(b, bucket, p) })
	return p
}

// BenchmarkCreate measures sequential creates of new 1 KiB objects.
func BenchmarkCreate(b *testing.B, bucket objstore.Bucket) {
	ctx := context.Background()
	p := benchPrefix(b, bucket, "create")
	data := payload("bench", BenchObjectSize)
	b.SetBytes(BenchObjectSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := bucket.Create(ctx, fmt.Sprintf("%s%010d", p, i), data); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCreateParallel measures concurrent creates of new 1 KiB objects.
func BenchmarkCreateParallel(b *testing.B, bucket objstore.Bucket) {
	ctx := context.Background()
	p := benchPrefix(b, bucket, "create-parallel")
	data := payload("bench", BenchObjectSize)
	var next atomic.Int64
	b.SetBytes(BenchObjectSize)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := fmt.Sprintf("%s%010d", p, next.Add(1))
			if err := bucket.Create(ctx, k, data); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchSeed(b *testing.B, bucket objstore.Bucket, p string) []string {
	ctx := context.Background()
	data := payload("bench", BenchObjectSize)
	keys := make([]string, benchGetObjects)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%04d", p, i)
		if err := bucket.Create(ctx, keys[i], data); err != nil {
			b.Fatal(err)
		}
	}
	return keys
}

// BenchmarkGet measures sequential reads of existing 1 KiB objects.
func BenchmarkGet(b *testing.B, bucket objstore.Bucket) {
	ctx := context.Background()
	keys := benchSeed(b, bucket, benchPrefix(b, bucket, "get"))
	b.SetBytes(BenchObjectSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		got, err := bucket.Get(ctx, keys[i%len(keys)])
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != BenchObjectSize {
			b.Fatalf("got %d bytes, want %d", len(got), BenchObjectSize)
		}
		i++
	}
}

// BenchmarkGetParallel measures concurrent reads of existing 1 KiB objects.
func BenchmarkGetParallel(b *testing.B, bucket objstore.Bucket) {
	ctx := context.Background()
	keys := benchSeed(b, bucket, benchPrefix(b, bucket, "get-parallel"))
	var next atomic.Int64
	b.SetBytes(BenchObjectSize)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			got, err := bucket.Get(ctx, keys[int(next.Add(1))%len(keys)])
			if err != nil {
				b.Error(err)
				return
			}
			if len(got) != BenchObjectSize {
				b.Errorf("got %d bytes, want %d", len(got), BenchObjectSize)
				return
			}
		}
	})
}
