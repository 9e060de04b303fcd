// Package cutlinetest is a harness for testing hosts built on cutline, as
// raft has rafttest: an environment over any buckets and store, a
// reference host loop, and a checker of the six guarantees the README
// makes, which a host's own tests import.
//
// # The environment
//
// An Env is one metastore and K zones. New takes any store and any buckets
// (S3, GCS, a directory, memory; etcd or memory), NewMem makes in-memory
// ones. Every zone is wrapped in fault injection (objstore/fault), which is
// what the parties see: a test takes a zone down with Zones[i].SetDown or
// adds fault rules there (Options.Wrap wraps each zone once more, in a
// request interceptor or latency of the test's own). Put, Layout and Delete place objects (a flight,
// poison, a corrupt, misplaced or conflicting object) directly in a zone's
// backend, behind every party's back, State reads a slot in every zone
// as a row like "F P E", and States reads every slot of an epoch that
// some zone holds an object at.
//
// A Party is one process's view of the Env, with its own minter, fencer,
// RefIndex, settler and reader; a writer that one party made is what
// another party fences, settles and reads. Everything that fails in setup
// fails the test, so a scenario reads as its steps.
//
// # The reference host
//
// StartHost runs the loop every host needs over a chain.Writer (StartRoller
// over a roll.Roller): a producer calls Submit with a record id; the host
// gives the record the stream's next offset (a Record payload, which Locate
// reads back) and submits it pipelined; an absorb loop waits for the
// answers in slot order, covers each acknowledged flight in the index and,
// every AbsorbEvery records, advances the epoch's checkpoint past them (or,
// LagCheckpoint, one batch behind). A cover or checkpoint the metastore
// refuses is recorded (Errors) and retried at the next batch, or with Flush
// once the host is closed; Covered and Checkpoint say how far it got. It
// ends cleanly with Close or crashes with Kill. Every step a producer sees
// is recorded in a History: submitted, acknowledged (where), failed (why),
// refused. Hosts with a loop of their own record into a History with Add.
//
// # Payloads
//
// The reference host's payloads are Records, "<stream>|<offset>|<id>": one
// producer record per flight. A star that leads several streams may bundle
// records of several streams in one flight: Bundle makes such a transit
// bundle, each record keeping its stream, offset and id, and ParseBundle
// reads it back. Locate, the settle.Locator of both formats, reads one span
// per stream from a bundle (a stream's records follow each other there, at
// consecutive offsets), so that every stream's refs point at the bytes of
// its own records.
//
// # The checker
//
// Check takes a finished run (its History, the store, the zones' buckets)
// and checks all six guarantees, returning every violation with its
// guarantee's number; Require fails a test listing them all. It reads the
// zones directly, slot by slot and copy by copy, fences each fenced epoch
// again, reads every ref and the whole chain, and replays the store's
// history of every epoch record. It writes nothing. What a producer may
// see twice is spelled out: a record whose append failed with an unknown
// outcome (an aborted writer, a killed host) and was retried may be found
// twice, at-least-once; an acknowledged one must be found exactly once.
// Records inside bundles count one by one: each acknowledged record of an
// acknowledged bundle must be found exactly once through its stream's
// refs, and every ref's bytes must hold the records it claims.
//
// CheckEpoch checks one fenced epoch as it lies in storage, for a test
// that keeps no History but knows which slots were acknowledged: none at
// or past the cut, the cut dead and stable, every slot of [trimmed, cut)
// committed and served by a reader, nothing served at the cut. VerifyEpoch
// fails the test with every violation it finds.
//
// # A takeover test
//
//	env := cutlinetest.NewMem(t, 3) // or cutlinetest.New(t, store, buckets, opts)
//	var hist cutlinetest.History
//	a := env.Party("star-a")
//	wa := a.Writer(a.Mint("star-a", env.Constants(2, 16)), chain.WriterOptions{})
//	ha := cutlinetest.StartHost(a, wa, cutlinetest.HostOptions{History: &hist, AbsorbEvery: 4})
//	for i := range 20 {
//		ha.Submit(ctx, fmt.Sprint("p", i))
//	}
//	ha.Kill() // mid-flight
//
//	b := env.Party("star-b")
//	b.Settler.SettleAll(ctx, "star-a") // fence and settle A's epochs
//	wb := b.Writer(b.Mint("star-b", env.Constants(2, 16)), chain.WriterOptions{})
//	hb := cutlinetest.StartHost(b, wb, cutlinetest.HostOptions{History: &hist})
//	for _, id := range ha.Failed() {
//		hb.Submit(ctx, id) // the producer retries
//	}
//	hb.Close(ctx)
//	env.Verify(&hist) // fails the test with every violation
//
// # Your own buckets and store
//
// Pass them to New: the harness needs nothing but objstore.Bucket and
// metastore.Store. Give each test its own metastore root (Options.Root)
// and key prefix (Options.Prefix) when they share a server. Run the
// conformance suites (objstore/objstoretest, metastore/metastoretest) on
// them first: the guarantees rest on create-only writes and
// compare-and-set. When the store compacts its history, Check checks the
// records' final state only.
//
// # Timers
//
// The Env gives Options.Clock to every party; a writer given a clock.Fake
// never retries until the test advances it, which is how a test holds a
// ragged tail of appends in flight. The harness itself starts no timer and
// never sleeps.
package cutlinetest
