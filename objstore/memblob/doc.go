// Package memblob is an in-memory objstore.Bucket: a map under a mutex. It
// enforces create-only writes exactly as the real backends do, passes the
// same conformance suite (objstore/objstoretest), and is what unit tests,
// examples and simulations use.
//
// Every method copies: Create keeps its own copy of the data, Get and
// GetRange return fresh slices. List keeps a sorted index that is brought up
// to date lazily, so a page costs O(log n + limit) while the bucket is not
// changing, and Create stays O(1).
//
// To test how code behaves when a zone misbehaves, wrap a memblob bucket with
// objstore/fault (injected errors, outages, lost answers, straggler writes)
// and objstore/latency (delays on an injected clock):
//
//	zone := fault.Wrap(memblob.New("zone-a"), fault.Options{Seed: 1})
//	zone.SetDown(true) // every call now fails with objstore.ErrUnavailable
package memblob
