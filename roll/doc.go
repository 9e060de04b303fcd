// Package roll is a star's writer across epochs: the third step of the
// write path, between a star's tenure (package lease) and one epoch's
// writer (package chain). A Roller appends through a chain.Writer and,
// when the chain's configuration changes or its epoch is fenced under
// it, turns over to a new epoch in process: it mints the next epoch,
// fences and settles its own old one through a settle.Settler, and
// republishes what the old epoch did not acknowledge. The producer sees
// a delayed acknowledgement, not an error.
//
// # Using it, step by step
//
//  1. Build a settle.Settler with a Fencer (settle.Options.Fencer) over
//     the star's minter, zones and the host's index.
//  2. Open(ctx, settler, star, constants, Options{…}) settles whatever
//     an earlier incarnation of the star left and mints the first epoch.
//  3. Submit (or Append) payloads; a Future's Wait gives the position
//     where the payload is durable. Cover each acknowledged flight in the
//     host's index before answering the producer, and move the checkpoint
//     with Roller.Checkpoint (the host's duties, as in package settle).
//  4. Roll(ctx, constants) changes class, W, window or buckets in
//     process; with Options.RollOnHalt a fence of the current epoch rolls
//     too.
//  5. Close waits for every pending append and closes the writer.
//
// # What each future adds
//
// A record's acknowledgement passes through one future per layer, each
// adding what its layer knows: a chain.Future is the slot in one epoch;
// a Future here is the final position across rolls (a roll may move a
// pooled append into the next epoch, so its position is known only when
// the Roller decides it); a lease.Future adds the spans of the streams
// its flight carries; a batch.Ack adds each record's offset.
//
// # Turning over
//
// Open settles every unsettled epoch of the star (a previous
// incarnation's, crashed or not), mints a new epoch and appends there. A
// Roller turns over in process:
//
//   - on Roll, a planned change of class, W, window or buckets: the old
//     writer drains first, so usually nothing needs republishing;
//   - when its writer halts because the epoch was fenced (chain.ErrFenced) and
//     RollOnHalt is set: a fence it did not ask for then costs a delayed
//     acknowledgement, not an error. The writer drains here too, for at
//     most 10 s on the Roller's clock: the slots below the halt point that
//     commit meanwhile are acknowledged where they are.
//
// A planned roll whose old writer closed cleanly (Close returned nil, the
// writer never halted, and every slot it assigned was acknowledged) does
// not walk: it fences at the writer's release point
// (fence.Fencer.FenceAt), poisoning that slot in B buckets in one round
// trip and publishing it as the cut by compare-and-set, and its
// settlement skips the garbage sweep (settle.Settler.SettleFencedAt,
// settle.SettleReport.NoGarbageSweep): the writer created no flight at or past
// its release point, and garbage past the cut is harmless anyway (nothing
// reads past the cut).
// With every append acknowledged and covered, the roll then costs one
// round trip to object storage, B creates. Safety: every slot below the
// release point was acknowledged, so it holds W copies that no poison can
// displace; B poisons make the release slot dead, so nothing at or past
// it can ever be acknowledged (acknowledgements go out in slot order); the
// cut is the first dead slot, as a walk would find (see "A writer that
// closed cleanly" in package fence). A straggling flight at the release
// slot sends the roll to the full fence and a full settlement, as does
// every other roll: a halt, a writer that did not drain in time, or a
// retry after the new epoch was fenced.
//
// # The unratified tail
//
// A turnover mints the new epoch, fences and settles the old one, and
// partitions the pooled appends by the cut: those below it were committed
// at their old positions and are acknowledged there; the rest (the
// unratified tail: flights at or past the cut were never acknowledged) are
// republished, in order, into the new epoch's first slots. No payload is
// acknowledged twice or at two positions, no position inside an epoch is
// skipped, and positions grow in submission order. Each step is retried,
// Options.Backoff apart, until it succeeds or the Roller is closed; a
// crash anywhere leaves epochs that the next Open settles.
//
// Options.Republish lets the host decide, in every roll, which of the
// unratified tail goes into the new epoch, before anything is placed
// there (appends submitted meanwhile wait for the roll): it sees the new
// epoch's record and the pooled payloads in order, and answers one error
// per payload. A dropped append fails with ErrDropped; it was never
// acknowledged. A failed hook is retried, Backoff apart, and the new
// epoch stays empty until it succeeds. Payloads are republished as they
// are, so a host that drops a record keeps its streams tiled only if no
// later record of the same stream is republished (or it drops those too):
// their refs would leave the dropped offsets uncovered (settle.ErrGap).
//
// Set RollOnHalt only while the host still owns its streams. If another
// star fenced the epoch to take them over, rolling would keep writing
// records nobody serves; without RollOnHalt, appends at or past the dead
// slot fail with the writer's *chain.FencedError and the host steps down.
//
// # Closing
//
// Close waits until every pending append is decided. If its context ends
// first, the appends still pending fail with an error matching cutline.ErrClosed (they may or
// may not be in the chain: the next settlement decides); an append whose
// slot was acknowledged before the writer stopped is reported acknowledged.
//
// # Errors
//
// A Roller returns an error matching cutline.ErrClosed after Close (or for an append Close
// gave up on), ErrDropped for an append the Republish hook dropped, and
// the writer's, fencer's and settler's errors otherwise. Invalid options
// and constants are a *cutline.ConfigError naming the field, refused before
// anything is fenced, settled or minted.
//
// # Metastore keys
//
// A Roller keeps no key of its own: it mints, reads and advances epoch
// records through the Settler's epoch.Minter, and its settlements cover
// through the Settler's Coverage (the host's index, such as a
// settle.RefIndex).
package roll
