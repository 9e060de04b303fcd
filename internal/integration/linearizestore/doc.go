// Package linearizestore checks linearizability on real processes: histories
// of appends and reads on one stream, recorded by the reference workload
// of cutlinetest/linearize (lease.Star hosts appending, consumers reading
// the stream back through the index and the chain reader) on an embedded
// etcd server and three versitygw S3 zones (K=3, W=2), with one zone's
// server process killed mid-history and restarted later, while the serving
// star crashes and is taken over through the open gate, rolls, and hands
// the stream off. Each history is checked with porcupine against the
// model of an append-only log.
//
// When the servers cannot be started the test is skipped, except with
// CI=true, where it fails.
package linearizestore
