// Package lease is stream tenure: who may write a stream, and when a
// takeover is safe. It is built on the core packages (epoch, chain, fence,
// settle) and on a metastore.Store; a host composes it into its server.
//
// # What it keeps
//
// Under the metastore root shared with the star's epoch.Minter, a
// registry entry per star and, per stream, its lease, its last-writer
// record, its clean-release mark, its producer fencing token and its
// state snapshot (see "Metastore keys").
//
// A star is one writer identity with one chain. Every stream it leads
// rides in that chain: one flight may bundle records of several streams,
// and the coverage index holds span refs (stream and offset range → star,
// epoch, slot and byte range; see settle.Span and settle.RefIndex).
//
// # The rules
//
// The writer lease names the holder and nothing more; the epoch is never
// derived from it. The last-writer record is written before the first
// acknowledgement of a tenure can exist, and moved to the star's new epoch
// by every roll before anything is placed there, so it always names the
// last epoch that may hold the stream's acknowledged records. The open
// gate judges it, with precedence over anything the index says.
//
// Every departure goes through Finish (ReasonClose, ReasonHandoff,
// ReasonDrain, ReasonSupersede, ReasonReestablish, ReasonEvict): it waits
// for the stream's appends in flight, writes the stream's span refs
// straight from the star's flight index and runs the host's flush (the
// star's epoch stays open for its other streams), then stamps the
// clean-release mark as its final write. A Finish that cannot land keeps
// the lease and retries, Options.Backoff apart (limbo): coverage
// outranks availability.
//
// Open takes the lease and passes the gate:
//
//   - no last-writer record: a fresh stream;
//   - a mark for the recorded tenure: consumed by compare-and-set in the
//     transaction that admits the new tenure, so it certifies one tenure
//     only; a mark for any other tenure certifies nothing;
//   - no mark, the predecessor's epoch below its class head: settled
//     inline, whatever the registry says;
//   - no mark, the predecessor's epoch its head and the star alive in the
//     registry: a retryable *DeferredError until the mark lands, the star
//     restarts (which supersedes the head) or the registry converges on
//     its death, after which the open fences and settles the epoch.
//
// The registry's word is only ever a reason to wait: a star it calls dead
// is fenced before anything is trusted, and the fence is safe against a
// star that is in fact still running. Racing opens are decided by the
// lease and by compare-and-set on the last-writer record: exactly one is
// admitted.
//
// # Producer fencing tokens are policy
//
// Fence installs a producer's fencing token on a stream; exact equality
// judges it at Open and at a one-shot append (CheckToken), cooperatively
// on Any streams (a request without a token passes) and mandatorily on
// Fenced streams. A token is coordination between producers. It never
// decides what is in a stream: a stale writer is kept out by the epoch
// fence, because its slots can no longer reach the copy quorum, whatever
// token it holds.
//
// # State snapshots
//
// A host that rebuilds state from a stream when it opens it (a producer
// de-duplication table, say) need not read the whole stream: the holder
// saves a snapshot, opaque bytes valid at an offset (the state after
// every record below it), with SaveSnapshot, and a new holder loads it
// with LoadSnapshot and replays only the records from that offset on.
// A save compares the tenure's last-writer record and lease in its
// transaction, so only the current holder's lands; it never moves the
// stored offset backwards, never claims records the Index does not cover
// (Absorb first), and is bounded by Options.MaxSnapshot. A save in
// Options.Flush lands before the clean-release mark: the successor then
// has nothing to replay. Corrupt snapshot bytes load as ErrBadSnapshot,
// and the host rebuilds from offset 0.
//
// # Wiring a host, step by step
//
//  1. Build the core parts over your stores: an epoch.Minter, a
//     fence.Fencer, a settle.RefIndex with your payload's Locator, and a
//     settle.Settler with the Fencer that settles into the RefIndex.
//  2. Create a session (Store.NewSession) and Start the star with them and
//     its epoch constants. Start registers the star, settles what an
//     earlier run of it left, and mints its epoch.
//  3. Open each stream the star is to lead (OpenMany for many at once). On a *DeferredError, retry
//     later (or route the producer elsewhere); on a *TokenError, refuse
//     the producer. The Tenure says where the stream continues (Next).
//  4. Submit payloads whose spans continue their streams exactly at Next
//     (Star.Next tells the current one), and acknowledge a producer when
//     its Future's Wait returns nil. The star covers acknowledged flights
//     in the index every Options.AbsorbEvery, and on Absorb.
//  5. Leave a stream with Finish; leave every stream with Drain (keep
//     running) or Close (shut down); on SIGTERM, Close before exiting.
//  6. Watch Lost: when the session ends, the star evicts every stream on
//     its own; start a new Star on a new session.
//
// # What it costs
//
// The metadata a star writes grows with flights and streams, never with
// records. Absorb covers a whole batch of acknowledged flights in one
// Index.CoverFlights call: one write per stream the batch touches, 128 to
// a transaction (settle.RefIndex). The answers wait while AbsorbEvery
// plus the window flights are acknowledged and not covered, and Submit
// waits while a window of appends waits for an answer, so memory follows
// what the index absorbs (AbsorbStats shows the backlog). OpenMany opens N
// streams in about N ÷ 128 lease transactions and N ÷ 32 admissions, 16
// reads at a time, and settles each predecessor epoch once, whatever the
// number of streams it left; a takeover of a dead star's streams costs
// one settlement per epoch of it, not one per stream.
//
// See the Example for the whole sequence on in-memory backends, and
// package leasetest for the scenarios every backend passes.
//
// # Metastore keys
//
// Under Config.Root ("" or ending in '/'; the root given to NewRegistry
// and ReadSnapshot), the same root as the Minter's (epoch.Options.Root):
//
//	stars/<star>           registry entry, bound to the star's session (Registry)
//	streams/<id>/lease     advisory writer lease: the holder, bound to its session
//	streams/<id>/writer    last-writer record (Writer): star, epoch, class, tenure
//	streams/<id>/release   clean-release mark (Mark), single-use
//	streams/<id>/token     producer fencing token and mode, Any or Fenced (Token)
//	streams/<id>/snapshot  the host's state snapshot and the offset it holds (Snapshot)
//
// The writes:
//
//   - Start creates the star's registry entry bound to its session, and
//     Close deletes it;
//   - an open creates the lease bound to the star's session (OpenMany:
//     128 leases to a transaction), then admits the tenure in one
//     transaction: it writes the last-writer record and deletes the mark
//     it consumes, compared with the last-writer record, the mark, the
//     lease and the token (OpenMany: 32 admissions to a transaction);
//   - a departure's final write (Finish) stamps the mark and deletes the
//     lease, compared with the last-writer record, the mark and the lease
//     (without the lease once its session has ended);
//   - a roll moves each held stream's last-writer record to the new
//     epoch, compared with that record and the stream's lease;
//   - SaveSnapshot writes the snapshot, compared with the snapshot, the
//     last-writer record and the lease;
//   - Fence writes the token by compare-and-set on its revision.
package lease
