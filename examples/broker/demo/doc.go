// Command demo runs a takeover with a zombie writer on the model broker
// (package node, imported as a library), with nothing to install, in ten
// to fifteen seconds:
//
//	go -C examples/broker run ./demo
//
// It runs the controller and three broker nodes in one process, connected
// with authority.Local, each node with its HTTP API (TLS, a bearer
// token) and its direct health links, on an in-memory metastore and three
// filesystem zones (K=3, W=2). A producer drives load through the API.
// Then the holder fails: it loses all zones but W−1, where its PUTs are
// held back in the network, with appends in flight, and it is cut off
// from the controller, its peers and the metastore. The other nodes'
// health links detect it, the controller's fast fence ends its grant, a
// successor fences and settles its epoch (authority.RecoverChain) and is
// granted, its open gate admits the stream, and the producer goes on
// there, retrying what was not acknowledged with the same sequences.
// Then the old holder comes back as a zombie: its held-back PUTs land, it
// learns that its grant is gone, and it never acknowledges. Last, an
// operator hands the grant to the third broker, whose -producer-window is
// another (the brokers run different ones, as in the middle of a rolling
// change of configuration), and the producer sends every record again, as
// a client that lost its answers would: each is answered as a duplicate
// with its first acknowledgement, or refused as too old to judge (409);
// none is appended again. Then the new holder runs its lifecycle passes
// (see Compaction and retention in ../README.md) every 250 ms while a consumer reads the
// stream whole through its API, again and again: they settle the epoch
// the handoff left open, rewrite every flight into segments and trim
// them, and each read must hold every acknowledged record once; the
// zones' objects and the index's refs are counted before and after. The
// stream is read back through the API and
// checked against every acknowledgement, and cutlinetest.Check checks
// cutline's six guarantees over the zones and the store. It prints the
// timeline as it happens, taken from the nodes' logs and the grant's
// changes, with times from the start (and, on stderr, what it waits for): the gate's decisions, the grant changes, the fence's
// cut, what settlement deleted and covered; then the nodes' object
// requests by kind, and, last, the verdict: "acknowledged N, readable N,
// lost 0, duplicated 0". Among the findings before it: how many records
// the successor read back to rebuild its producers, past the snapshot its
// predecessor saved. It exits with status 1 if anything did not hold, 2
// for a bad flag. A position E/S in its output is slot S of epoch E.
//
// Its flags: -records, -crash-after, -inflight, -snapshot-every (records
// between the holder's producer snapshots, 50), -k, -w, -window, -latency,
// -seed, -session-ttl, -timeout, -logs (the brokers' logs on stderr), and
// -etcd and the S3 flags, which run it against real servers (each run
// keeps its metadata under /cutline-demo/<run>/ and its objects under
// demo-<run>/); -h lists them with their ranges.
//
// Its files, in reading order: demo.go (the setup and the story, from
// the first grant to the verification), demoflags.go (its flags),
// demonet.go (the network: which links are cut, the held-back PUTs),
// demoproducer.go (a client of the API, as a team would write one),
// demotimeline.go (the timeline, taken from the nodes' logs),
// demohandoff.go (the operator's handoff), demolifecycle.go (compaction
// and trim while a consumer reads) and demoreport.go (the read-back, the
// request counts and the verdict).
package main
