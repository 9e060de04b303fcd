// Package objstoretest is the conformance suite for objstore.Bucket
// implementations. Every backend (mem, fs, s3, gcs) and every wrapper
// (fault, latency) runs it, and so can a host's own backend:
//
//	func TestConformance(t *testing.T) {
//		objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
//			return mybackend.New(...)
//		})
//	}
//
// Run executes one named subtest per property, so a single one can be
// selected with -run 'TestConformance/ConcurrentCreators':
//
//   - CreateOnly: a second Create fails with objstore.ErrExists and leaves
//     the first bytes untouched.
//   - ConcurrentCreators: 32 creators race on one key with different
//     payloads; exactly one wins, the others get ErrExists, and readers
//     polling during and after the race only ever see the winner's bytes
//     (never a partial or a losing payload).
//   - NotFound, Exists: definite answers are classified as ErrNotFound and
//     ErrExists and never as objstore.ErrUnavailable.
//   - GetRange: prefix, middle, past the end (empty, no error), huge
//     lengths, and ErrInvalidRange for negative offsets or lengths ≤ 0.
//   - Delete: deleting a missing object succeeds; a deleted key can be
//     created again.
//   - List, ListPaging: lexical key order with prefix, startAfter and limit
//     (with names around '/' that trip directory walks), and paging through
//     more than one page of objstore.All.
//   - LargeObject (8 MiB), EmptyObject, KeyCharacters (spaces, '%', '?',
//     '#', non-ASCII: whatever needs escaping on the wire).
//   - InvalidKeys: every method refuses "..", a leading '/', NUL and other
//     control characters, empty segments and over-long keys with
//     objstore.ErrInvalidKey, and nothing is created.
//   - CanceledContext: a done context yields an error matching
//     context.Canceled (or DeadlineExceeded); a Create is never reported as
//     a success.
//   - DataOwnership: Create does not keep the caller's slice; slices
//     returned by Get belong to the caller.
//
// newBucket is called once per subtest. It may return a fresh bucket each
// time, or one shared real bucket: each subtest works under its own random
// prefix "objstoretest/<random>/<subtest>/" and deletes its objects when it
// ends. A shared bucket only needs to allow keys under "objstoretest/".
//
// Key layouts on a file system cannot hold an object "a" together with an
// object "a/b"; the suite never creates such a pair, so the fs backend is
// held to the same suite as the others.
//
// RunBenchmarks reports create and get throughput of 1 KiB objects, with
// one goroutine and with GOMAXPROCS goroutines, the same way for every
// backend:
//
//	func BenchmarkBucket(b *testing.B) {
//		objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket { return memblob.New("zone-a") })
//	}
package objstoretest
