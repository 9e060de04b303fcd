// Package linearize checks that a stream appended to and read back through
// cutline is linearizable, across takeovers and rolls, with
// github.com/anishathalye/porcupine. It is a test package for hosts, like
// its parent cutlinetest, and its own module, so that porcupine is no
// dependency of the module hosts build on:
//
//	go get github.com/cutline/cutline/cutlinetest/linearize
//
// # The model
//
// A stream is an append-only log of values with a retention point
// (Model):
//
//   - Append(v) at offset o, acknowledged: legal only where the log holds
//     exactly o values; v becomes the value at o.
//   - Append(v) at o, outcome unknown (a crashed host, an aborted writer,
//     a lost answer, a cover that did not land): it took effect at o or
//     not at all. Its return is recorded after every other operation's,
//     so the checker may linearize it anywhere after its call; it takes
//     effect where the log holds exactly o values and is a no-op anywhere
//     else, including after the last read, where nobody sees it.
//   - Append(v) at o, absent (refused before it was placed, or failed at
//     or past a dead slot, or dropped by a roll): a no-op.
//   - Read from offset f: the log's values from f to its end, in offset
//     order; legal only where they equal the log's. Or a trimmed answer
//     (settle.ErrBelowRetention) naming the retention point: legal only where f
//     lies below the retention point in effect and the answer names it.
//     A read from 0 of a log never retained is the whole log.
//   - Admit from f: a read from f passed the check of f against the
//     retention point; legal only where f is at or past it. A read goes
//     through the index page by page, so the moment it checks the point
//     (before its first answer) and the moment it sees the log's end
//     (its last page) are two: the read records both, Admit (from its call
//     to its first answer) and the Read (from its call to its end).
//   - Retain(p), acknowledged: legal only where the log holds p values at
//     least; the retention point moves up to p, never down. Of unknown
//     outcome: it took effect or not (placed as an unknown append is);
//     absent: a no-op.
//
// Every value is appended once (a client retries a failed append as a new
// value), so a read that shows a value twice, at another offset than its
// host gave it, after a read that showed it gone, or a value whose append
// was absent, has no linearization; nor has a read that misses an append
// acknowledged before it began, or two acknowledged appends at one offset;
// nor a trimmed answer at or past the retention point, or naming another
// point, or a read admitted below a retention point acknowledged before
// it began.
//
// # Recording
//
// A History records what several concurrent clients saw, on a logical
// clock: the call of each operation before it is sent (History.Append,
// History.Read, History.ReadFrom, History.Retain) and its return once its
// answer is in (Acked, Unknown, Absent; Done, Trimmed, Failed; a read's
// Admitted on its first answer). A read that failed changed nothing and
// is left out. A host with a loop of its own records into a History and checks it
// with Check, or Require in a test; a verdict of porcupine.Unknown (the
// check ran out of time) fails Require like Illegal does.
//
// Run is the reference workload: several clients append to one stream
// through the serving lease.Star, as a host does (the offset is the
// stream's next; the client is answered once the flight is acknowledged
// and covered in the index), others read the stream back through another
// process's index and chain reader (ReadStream), or, with a Maintenance
// process compacting, trimming, retaining and collecting meanwhile,
// through its settle.StreamReader from offset 0 and from the retention
// point a trimmed answer names (ReadFrom), and Steps crash the
// serving star, restart it, hand the stream off cleanly, end its session
// while it runs, roll its chain, or run a hook (take a zone down, kill a
// server), each once enough appends were acknowledged. It runs on any
// store and buckets: in memory with fault injection (this package's
// tests), on embedded etcd and versitygw (internal/integration).
//
// # A test
//
//	hist, rep, err := linearize.Run(ctx, linearize.Config{Store: store, Zones: zones, Constants: c}, linearize.Options{
//		Rolls: []epoch.Constants{c2, c}, Appends: 150, Steps: []linearize.Step{
//			{After: 30, Kind: linearize.Roll},
//			{After: 60, Kind: linearize.Crash},
//			{After: 90, Kind: linearize.Handoff},
//		},
//		Maintenance: linearize.Maintenance{Every: 5 * time.Millisecond, Keep: 75}})
//	require.NoError(t, err)
//	linearize.Require(t, hist, time.Minute) // Ok, or the test fails
package linearize
