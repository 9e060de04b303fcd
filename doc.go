// Package cutline is the map of the library: the layers a record passes
// through, what a takeover does to them, how data leaves the chain, and
// every key the packages keep in the metastore, and the kinds every error
// matches. Besides the kinds it holds no code; each package's
// documentation is the reference for its part.
//
// # The path of a record
//
// A host's record goes down through these layers, one package per step,
// each named for what it does; each can be used without those above it
// (the README composes the lower ones by hand):
//
//	batch.Producer.Add     batch: gathers records of many streams into a bundle, one flight's
//	        │              payload, by size and linger time, at each stream's next offset
//	        ▼
//	lease.Star.Submit      lease: checks that the star holds every stream the bundle carries, under a
//	        │              tenure the open gate admitted, and that each span continues its stream
//	        ▼
//	roll.Roller.Submit     roll: the star's writer across epochs; a roll mints the next epoch in
//	        │              process and republishes what the old one did not acknowledge
//	        ▼
//	chain.Writer.Submit    chain: takes the epoch's next slot, creates the flight create-only at the
//	        │              same key in the epoch's K zones, acknowledges at W copies, in slot order
//	        ▼
//	objstore.Bucket        the flights, one object per slot per zone (layout: chain/wire)
//	metastore.Store        epoch records (epoch.Minter), span refs (settle.RefIndex), tenure (lease)
//
// The acknowledgement comes back up the same steps, one future per layer,
// each adding what its layer knows: chain.Future the slot in one epoch,
// roll.Future the final position across rolls, lease.Future the spans of
// the streams its flight carries (answered once the star recorded the
// flight for its index), batch.Ack each record's offset. On the way the
// Star covers the acknowledged flights in its index
// (settle.RefIndex.CoverFlights, every lease.Options.AbsorbEvery flights
// and on Absorb) and moves the epoch's checkpoint through its writer
// (roll.Roller.Checkpoint, then chain.Writer.Checkpoint).
//
// That is why batch and roll are top-level packages and not parts of the
// packages beside them: a reader following a record from the host's call
// to its acknowledgement meets one package per step. The batching
// producer is a client of a Star, not a part of tenure; the Roller is a
// writer that settles its own epochs through a settle.Settler, not a step
// of settlement. The packages below the path (epoch, fence, settle) are
// what the steps use: epoch records, the fence that ends an epoch, and
// the settlement that finishes it. The authority layer (authority) is
// top-level for the same reason from the other side: it decides which
// node holds a domain of streams, above the path and beside lease, and
// imports nothing of lease; a host that runs without it leaves it out.
//
// # Takeover: the fence and the settlement
//
// A star that dies leaves an open epoch. Whoever takes its streams over
// settles that epoch before serving or appending: the open gate
// (lease.Star.Open, when the predecessor left no clean-release mark),
// authority.RecoverChain under the authority layer, or roll.Open when the
// star itself restarts. A settle.Settler does it in two steps:
//
//   - the fence (fence.Fencer) walks the epoch's slots past its
//     checkpoint, completes the flights the writer started, writes poison
//     into the first empty slot in B = K−W+1 zones and publishes that slot
//     as the cut (epoch.Minter.Publish): nothing at or past it can ever be
//     acknowledged, however late the old writer's requests land;
//   - the settlement deletes the flights past the cut, covers every
//     committed flight below it in the index, and marks the epoch settled
//     (epoch.Minter.MarkSettled).
//
// The successor then continues each stream where its coverage ends
// (settle.RefIndex.Next). A planned roll (roll.Roller.Roll) fences its
// own epoch at the writer's release point instead (fence.Fencer.FenceAt)
// and settles it without the garbage sweep (settle.Settler.SettleFencedAt).
//
// # Lifecycle
//
// Three cursors of each epoch record and a retention point per stream say
// how far data has left the chain:
//
//   - settle.Compactor.Compact rewrites the flights below the checkpoint
//     into per-stream segments and moves the ref pages onto them (the
//     rewritten cursor);
//   - settle.Settler.Trim deletes an epoch's flights below a slot and
//     moves the trimmed cursor (TrimRewritten: up to the rewritten cursor;
//     TrimUnneeded: up to the lowest slot a retained ref needs);
//   - settle.RefIndex.Retain (RetainPolicy) moves a stream's retention
//     point and deletes its ref pages below it; Compactor.Collect deletes
//     the segments no page names any more.
//
// # Errors
//
// Every error a package returns matches, with errors.Is, one of the
// kinds defined here (errors.go) as well as the package's own sentinel
// or typed error: the kind says what the caller should do, the package's
// error what happened and where.
//
//	ErrInvalid      the call, input or configuration was refused: fix it, do not retry
//	ErrDenied       credentials, identity or permission refused: fix them
//	ErrNotFound     what the call names does not exist: a definite answer
//	ErrConflict     another party holds or changed what the call needs: re-read, decide
//	ErrStale        a right the caller no longer holds (fenced, tenure lost, stale token)
//	ErrUnavailable  no answer, or the outcome not known yet: retry or settle it
//	ErrClosed       the object called was closed by its owner: make a new one
//	ErrTrimmed      the data was trimmed, retained away or compacted: read from its start
//	ErrCorrupt      stored data does not verify or breaks a guarantee: an operator looks
//
// An error that wraps a cause matches the cause's kind as well. Where a
// package's error said no more than its kind (closed, unavailable), the
// package returns the kind itself, its message naming the package. This
// package imports nothing of the library, so that every package can
// import it.
//
// # Configuration
//
// Every constructor follows one rule. What it cannot work without (a
// store, the zones, a name, a callback) are its required inputs: one or
// two are positional arguments (settle.NewCompactor's identity,
// authority.NewDriver's send), more make a Config struct (lease.Config,
// settle.MaintainerConfig). Required inputs are validated, and a missing
// or invalid one is refused with a *ConfigError naming the argument or
// field. An Options struct (XOptions) only tunes: every field is
// optional, its zero value works and picks the documented defaults, and
// a value out of its bounds is refused with a *ConfigError naming the
// field.
//
// # Metastore keys
//
// Each package keeps its keys below a root prefix the host passes it
// (epoch.Options.Root, the root of settle.NewRefIndex, lease.Config.Root,
// which must be the Minter's, and the root of an authority Election); a
// backend may put every key under a root of its own as well (etcd:
// Options.Root). The packages' "Metastore keys" sections describe each
// record and the transactions that write it.
//
//	key                                          record                                                  package
//	chains/<star>                                counter: next epoch, head per class, settlement cursor  epoch
//	chains/<star>/<epoch, 20 digits>             epoch record: constants, state, cut, cursors            epoch
//	refpages/<stream>/<first offset, 20 digits>  a page of up to 64 span refs of one star's epoch        settle (RefIndex)
//	refstart/<stream>                            the stream's retention point                            settle (RefIndex.Retain)
//	refs/<stream>/<offset, 20 digits>            format 1 span ref: read and deleted by Migrate          settle (RefIndex.Migrate)
//	refheads/<stream>                            format 1 stream head: read and deleted by Migrate       settle (RefIndex.Migrate)
//	stars/<star>                                 registry entry, bound to the star's session             lease (Registry)
//	streams/<id>/lease                           advisory writer lease, bound to the holder's session    lease
//	streams/<id>/writer                          last-writer record: star, epoch, class, tenure          lease
//	streams/<id>/release                         clean-release mark, the final write of a departure      lease
//	streams/<id>/token                           producer fencing token and mode                         lease
//	streams/<id>/snapshot                        the host's state snapshot and the offset it holds       lease
//	authority/<domain>/state                     the domain's state: term, phase, holder, token          authority
//	authority/<domain>/token                     who may write the domain's progress; its revision       authority
//	                                             guards every progress write (Guard)
//	authority/<domain>/controller                the elected controller, bound to its session            authority
//
// Package metastore writes no key of its own: it is the contract the
// backends (metastore/etcd, metastore/memstore) implement. Nor do the two
// steps of the write path that only pass records on: roll mints and moves
// epoch records through the Settler's epoch.Minter (the epoch rows), and
// batch appends through a lease.Star (the lease rows).
package cutline
