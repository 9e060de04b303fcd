// Package node is the model broker's server: a small log broker with an
// HTTP API on cutline, the way a team would build its own, meant to be
// read in one sitting, copied and changed. The command in the directory
// above runs it (Run); the takeover demonstration (../demo) imports it.
// ../README.md is the operator's reference: how to try it, its data
// directory, its API and errors, its flags and variables, its metrics,
// and how to run a cluster.
//
// A broker node holds the domain's authority grant from the controller,
// runs one star (package lease) under it, and serves every stream that
// star leads. Each record is one flight of its stream's chain; the index
// in the metastore maps offsets to flights, then to segments once the
// lifecycle compacts them.
//
// Read the files in this order:
//
//  1. format.go: the payload of a flight, one record of one stream
//     (magic, stream, producer, sequence, data), and Locate, the
//     settle.Locator that says which offset of which stream it holds.
//  2. node.go: a node (NodeConfig, NewNode, Start, Shutdown): the agent
//     that holds the grant, the star it opens under each grant, the
//     gate that admits a stream only once its former holder's epoch is
//     settled, and the health links it votes with.
//  3. holding.go: the star a node runs under one grant and the streams
//     it opened; Ack, what a produce answers.
//  4. produce.go: one append, from the producer checks to the
//     acknowledgement. read.go: a read across segments and flights.
//  5. snapshots.go: the idempotent producers' table of each stream (a
//     batch.Dedup: a sequence per producer, a bounded window of
//     retries), its snapshots, and how a new holder rebuilds it.
//  6. fencing.go: the producers' fencing tokens, installed per stream.
//  7. lifecycle.go: retention, compaction into segments, trim and
//     collection, run by the holder.
//  8. server.go: the HTTP API (produce, consume, list, token, health,
//     metrics) and its errors; metrics.go: its Prometheus metrics. The
//     bounds of its connections are package examples/internal/connlimit.
//  9. controller.go: the authority controller: the election, the
//     grants, the handoff requests of the operators.
//  10. process.go and flags.go: one process (Run): its flags and their
//     CUTLINE_ variables (parsed by package examples/internal/cliflags,
//     their bounds checked from one table), what its role starts, its
//     listeners, its shutdown. backends.go opens the metastore and the
//     zones the flags name (filesystem, S3 or Azure, the last two checked
//     and opened alike), localetcd.go the etcd embedded by default;
//     security.go the certificates and the token (package
//     examples/internal/selfsigned makes them for a run); tryit.go logs
//     the commands to paste.
//
// The tests sit next to the code they test: a file's tests are in its
// _test.go; helpers_test.go holds what they share (settings, an API
// client, waits).
package node
