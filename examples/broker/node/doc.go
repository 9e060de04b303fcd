// Package node is the model broker's server: a small log broker with an
// HTTP API on cutline, the way a team would build its own, meant to be
// read in one sitting, copied and changed. The command above runs it
// (Run); the demonstration (../demo) imports it. ../README.md is the
// operator's reference: the API and its errors, the flags, the metrics,
// a cluster.
//
// A node holds the domain's authority grant from the controller, runs
// one star (package lease) under it, and serves every stream that star
// leads. Each record is one flight of its stream's chain; the index in
// the metastore maps offsets to flights, then to segments.
//
// Read the files in this order:
//
//  1. format.go: a flight's payload, one record of one stream, and
//     Locate, the settle.Locator that says which offset it holds.
//  2. node.go: a node: its control channel (authority.Connector), whose
//     agent holds the grant and runs the health links it votes with; the
//     star it starts under each grant and aborts when the grant ends;
//     recovery and release for the controller.
//  3. holding.go: the star under one grant, and the appender that
//     serves its streams to the producers (batch.DedupAppender): it opens
//     a stream on its first produce, rebuilds its idempotent producers'
//     table (batch.DedupStore), judges retries, and saves the table by
//     count, by time and at every departure.
//  4. read.go: a read, one page of the stream (settle.RefIndex.Page,
//     bounded by records and by the bytes of the answer) read across
//     segments and flights (StreamReader.ReadPage), and the listing.
//  5. fencing.go: the producers' fencing tokens, installed per stream
//     (DedupAppender.Fence) and judged at each produce.
//  6. lifecycle.go: retention, compaction, trim and collection.
//  7. server.go: the HTTP API and its errors (one adapter parses, refuses
//     and answers for every route; produce is where an append starts);
//     metrics.go: its metrics (the object requests counted through
//     objstore/observe).
//  8. controller.go: the authority controller (authority.Elector).
//  9. process.go: one process (Run): what its role starts, its
//     listeners (examples/internal/connlimit), its shutdown. flags.go:
//     the flags and their CUTLINE_ variables (examples/internal/cliflags);
//     backends.go the metastore and zones they name, localetcd.go the
//     embedded etcd; security.go the certificates and the token
//     (examples/internal/selfsigned) and the commands a run logs.
//
// A file's tests are in its _test.go; helpers_test.go holds what they
// share.
package node
