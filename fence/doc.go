// Package fence ends an epoch: it finds the epoch's cut, makes sure nothing
// at or past it can ever be acknowledged, and publishes it on the epoch
// record.
//
// # What a fence is
//
// An epoch is one writer's tenure on a star's chain (package epoch); its
// writer (chain.Writer) appends flights to slots 0, 1, 2… in K buckets and
// acknowledges a slot once W buckets hold its flight and every lower slot
// is acknowledged. Object storage cannot reject a write because its writer
// is stale, so a successor cannot lock the old writer out. Instead the
// fencer takes the space the old writer would need: it creates poison, with
// the same create-only writes, in the slots the writer has not filled. Once
// poison holds B = K−W+1 buckets of a slot, the slot is dead: it can never
// reach W flights. The first dead slot is the cut. Every slot below it is
// committed; nothing at or past it is ever acknowledged, by anyone.
//
// A successor taking a star's streams over, the same star rolling to a new
// epoch after a halt or a configuration change, and a later leader finding
// an old epoch still open all end it the same way:
//
//	zones, err := chain.NewZones(a, b, c)
//	f, err := fence.New(minter, zones, fence.Options{Identity: "broker-7"})
//	cut, err := f.Fence(ctx, "star-1", ep)
//
// Fence returns once the cut is published (the record moves from open to
// fenced). Settlement (deleting the garbage past the cut, restoring the
// host's coverage) comes next and is not this package's job.
//
// # The walk
//
// A fence reads every slot it decides in all K buckets, in order, and
// classifies it from the K answers. Only byte-identical copies read whole
// whose checksum verifies count toward W (a copy whose header is intact
// but whose body is corrupt is foreign, never counted and never copied),
// and two different flights in one slot are a conflict, never committed:
//
//   - committed: the same flight is in at least W buckets. Advance.
//   - repair: a flight is in some bucket but fewer than W, and some bucket
//     is empty. The fencer reads the flight whole, verifies it, and copies
//     the identical bytes into every empty bucket, then reads the slot again
//     (unless the creates that succeeded make W copies by themselves: an
//     object is immutable, so reading it again could only say so).
//     One writer per epoch means a slot has exactly one possible content, so
//     the copy can only complete what the writer started. Completing a slot
//     always wins over killing it.
//   - poison: no flight anywhere reachable, and some bucket is empty. The
//     fencer creates poison in one empty bucket, in the epoch's bucket order,
//     then reads the slot again. A flight that appears meanwhile (the writer
//     raced in) sends the slot back to repair; otherwise the next empty bucket
//     is poisoned, until B hold poison. The read after the create that makes
//     B is skipped: B poisons make the slot dead whatever else it holds.
//   - dead: poison in at least B buckets. This is the cut; the walk stops.
//   - conflict: two buckets hold different well-formed flights, so two
//     writers wrote the epoch (which the claim on a minted record
//     prevents; see chain.NewWriter). The fence stops with a
//     *chain.ConflictError (chain.ErrConflictingFlight) naming the slot and
//     publishes nothing: an operator must look.
//
// Reading whole costs bytes, not requests: a whole read is one GET, as a
// header probe is. Still, the walk reads a copy whole only where a
// decision needs it. It reads each slot whole in W buckets (from a
// slot-dependent one on) and at most 256 KiB of it in the others, which
// reads a small object whole and of a larger flight only its header. A
// flight only probed never counts: while fewer than W verified identical
// copies agree, the slot's probed flights are read whole too, one at a
// time (a round trip more for that slot); once W agree, a probed copy with
// their header is left unread (the slot is committed whatever it holds),
// and one with another header is read, to tell a second writer's flight
// from a corrupt copy. So a slot whose flight landed in every bucket costs
// W whole reads and one round trip, and a large flight's size is read W
// times, not K.
//
// The walk decides at most about 2·window+Span slots. It keeps a digest
// of each copy, not the bytes, except one verified copy of a slot that
// needs a repair, so that the repair need not read it again: it holds at
// most about 3·MaxParallel objects at once (MaxParallel being read, one
// per slot whose reads are in flight, and at most MaxParallel kept for
// repairs), besides what it keeps for its caller.
//
// A caller that reads the flights below the cut next, as settlement's
// coverage does, fences with FenceKeep: the walk hands its Kept the
// payload of each committed flight it read whole and verified (or
// completed by a repair), up to the Kept's budget of bytes and the
// largest flights first, and the caller takes them (Kept.Take) instead
// of reading them again. Settling an epoch then reads its largest flight
// whole W times in all.
//
// The walk does not start at slot 0. First the fencer estimates where the
// chain ends: from the epoch's checkpoint it probes slots at growing
// distances until one holds no flight, then narrows the gap (a k-ary search,
// Options.Fanout probes per round trip; the first round probes the
// checkpoint itself too). Let x be the highest slot found holding a
// flight. Its writer assigned x, which a writer does only while
// x < release + window (the release point being its first unacknowledged
// slot); so the release point was past x − window, and every slot up to
// x − window is committed. The walk starts at max(checkpoint, x − window).
// One round trip reads x whole (it must verify, see below), the few slots
// past it where a stopped writer's cut lies, and the walk's first span;
// the walk then decides those slots without reading them again.
// A probe that cannot be answered counts as "no flight", which only lowers
// the estimate and the start: the estimate saves work, it never decides.
//
// # Why it is safe
//
// The guarantees are stated once, in the README ("Guarantees"). What the
// fence adds to them is one argument: objects are created once and never
// overwritten, and W + B = K + 1, so a slot can never hold both W copies
// and B poisons. Committed and dead are therefore permanent, every fencer
// (racing, restarted, finishing a crashed one's walk) reaches the same
// first dead slot, and the walk advances only past committed slots.
//
// K=1, W=1 degenerates to a single poison: whoever creates the next free
// slot first ends the epoch, and a writer that loses once halts.
//
// # A live writer
//
// The old writer may still be appending while the fence runs; that is
// safe, and the writer halts with chain.ErrFenced at the first dead slot it
// meets (the cut, or a barrier past it; its error moves down to the cut once
// it meets the cut). To be dead a slot needs B poison objects created one
// after another, while the writer needs W creates sent in parallel, so a
// writer that keeps appending wins every frontier slot it reaches first,
// and a walk alone would follow it for as long as it appends. A stopped
// writer's cut lies within 2·window+1 slots of the walk start; when the walk
// gets further (it is chasing a live writer, or it started low because
// probes of the estimate went unanswered), it plants a barrier: at the start
// of each span it poisons a slot ahead, 2·window+1 ahead at first and
// doubling the lead each time the writer gets there first, until that slot
// is dead. The writer can never acknowledge past the barrier, so the walk
// ends there at the latest. Barrier poison carries the fencer identity
// followed by BarrierSuffix and is counted in Report.Barriers; like any
// poison it only ever fills empty buckets, so it can never take a slot from
// an acknowledged flight, and the cut is still the first dead slot, which
// racing fencers find alike. Barrier poison past the cut stands like all
// poison.
//
// # A writer that closed cleanly
//
// A writer's own host knows more than a successor: when chain.Writer.Close
// returned nil, the writer never halted and every slot it assigned was
// acknowledged (Released() == Stats().Submitted), the writer stopped
// exactly at its release point and has nothing in flight. FenceAt ends
// such an epoch without a walk (a roll.Roller does it on a planned
// roll):
//
//	rep, err := f.FenceAt(ctx, "star-1", ep, w.Released())
//
// It creates poison at the release slot in B buckets at once (one round
// trip), reads back only a bucket that answered "exists" (a second round),
// and publishes the release point as the cut by compare-and-set
// (Report.AtRelease). Poison found there counts; a flight there (a
// straggling create of the same writer, or a fencer's repair of one) is
// what a fence would complete rather than kill, so FenceAt hands the
// epoch to the full fence, as it does with any request left without an
// answer or a foreign object.
//
// Why that is as safe as a walk. A walk's cut is the first dead slot,
// with every slot below it committed. The writer's clean Close vouches
// for the slots below the release point: each was acknowledged, so it
// holds W verified identical copies, which no poison can displace (W + B
// = K + 1); and the writer issued nothing at or past the release point,
// and never will. B poisons at the release slot make it dead for good, so
// it is the first dead slot: the cut that a racing walk finds too. Any
// straggling create at or past it can never be acknowledged, since that
// slot can never reach W copies and acknowledgements go out in slot
// order. Guarantees 1 to 4 hold as for a walk. The release point must be
// the writer's: one that is too high would skip slots that are not
// committed, so FenceAt is for the writer's own host, right after its
// clean Close, and refuses a release point below the checkpoint.
//
// # Undecided slots
//
// When some buckets do not answer and the slot can still go either way
// (for example a flight in one bucket, poison in another, the third zone
// down), neither repair nor poison can act without the missing answer. The
// fencer never guesses: it retries with jittered backoff (Options.Backoff,
// on Options.Clock) until the buckets answer. If the context
// ends first, Fence returns a *UndecidedError (errors.Is ErrUndecided)
// naming the slot, the buckets it waits for and when it first found the
// slot undecided; nothing is published. Retry once the zone is back.
//
// Undecided lists the slots a Fencer is blocked on, with that first time.
// An entry outlives a failed Fence (so the age spans retries) and goes away
// when a fence decides the slot or finds the epoch fenced. Alert on its
// age: an epoch that cannot be fenced blocks the successor.
//
// A fence whose context ends while it merely reads or writes healthy
// buckets returns the context's error, not ErrUndecided.
//
// # Foreign objects
//
// An object at a slot's key that is neither a valid flight for that slot
// nor poison for it (corrupt, misplaced, of an unknown format) is never
// overwritten, never copied and counted as neither. If the slot can still
// be decided around it (another empty bucket to poison or repair), the walk
// goes on; if it holds the deciding vote, Fence returns a *BlockedError
// (errors.Is ErrBlocked) naming each object (*wire.ObjectError: bucket and
// key), and an operator must look at them.
//
// # Publication and idempotence
//
// The cut is published with a compare-and-set of the epoch record
// (epoch.Minter.Publish). Racing fencers computed the same cut, so the CAS
// is a publication, not an arbitration: publishing the published cut
// succeeds. Once the record is fenced, Fence is a read: it returns the
// published cut without touching the buckets (Report's AlreadyFenced).
//
// A late fencer, held while another fenced, settled and trimmed the epoch,
// would find the trimmed slots empty. Before it writes poison into a slot
// it reads the record again; finding it fenced, it adopts the published
// cut (Report.Late) and writes nothing. Should the epoch be fenced and
// trimmed between that read and its publication, the cut it offers lies
// below the trimmed cursor, which only a late fencer's can: it adopts the
// published cut then too. Any other difference (epoch.ErrCutMismatch) is a
// bug or corruption and is never retried.
//
// # Options and round trips
//
// The zero Options work. A fence's cost on real object storage is its
// sequential round trips (Report.Rounds), each a batch of parallel
// requests:
//
//   - Fanout (default 8) probes per round of the estimate; 1 is the
//     literal doubling and binary search.
//   - Span (default 64) slots read ahead per round of the walk; decisions
//     stay per slot and in order (committed and dead are permanent, so a
//     read-ahead stays true; anything else is acted on and read again). 1
//     reads one slot per round trip.
//   - MaxParallel (default 64) bounds the requests in flight.
//
// Each has a maximum (MaxFanout, MaxSpan, MaxParallelLimit), and a value
// out of range is refused with a *cutline.ConfigError naming the field, never
// corrected. With the defaults, an epoch of a million slots (K=3, W=2,
// window 64) is fenced in 14 round trips and about 420 reads; the
// literal algorithm takes over 100 round trips (see BenchmarkFence). Keys
// come from the epoch record's prefix (wire.KeysOf), as the writer's do;
// Identity (at most MaxIdentity bytes) is written
// into the poison for forensics; Logger receives the walk at debug level,
// and undecided slots and an estimate resting on a copy that does not
// verify at warn level (see Options.Logger).
//
// A create whose outcome is unknown (a timeout, an unavailable zone) is
// never trusted: the slot is read again. A bucket whose poison create
// failed is tried again only after the other empty buckets, so one zone
// refusing writes cannot stall a slot the others can decide, and steps
// whose every request failed are retried with backoff.
//
// # Errors
//
//   - ErrUndecided (*UndecidedError): the context ended while unreachable
//     buckets held the deciding vote.
//   - ErrBlocked (*BlockedError): foreign objects (corrupt, misplaced, of
//     an unknown format, or a flight whose body fails its checksum) hold
//     the deciding vote.
//   - chain.ErrConflictingFlight (*chain.ConflictError): two different
//     flights in one slot.
//   - epoch.ErrNoRecord: the epoch was never minted (or its number burned):
//     nothing to fence.
//   - epoch.ErrCutMismatch: another fencer published a different cut, and
//     not because this one was late.
//   - cutline.ErrInvalid (*cutline.ConfigError): bad Options, a record naming a
//     zone the Fencer does not know, or a release point given to FenceAt
//     below the epoch's checkpoint.
//   - metastore errors reading or publishing the record, and the context's
//     error.
package fence
