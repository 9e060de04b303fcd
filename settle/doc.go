// Package settle finishes what a fence starts: it settles a fenced epoch so
// that a successor can serve and append, keeps the host's coverage index
// (RefIndex), and trims covered slots. A star's writer across epochs,
// which settles its own epochs through a Settler, is package roll.
//
// # What settlement is
//
// A fence (package fence) ends an epoch at its cut: every slot below the cut
// is committed, nothing at or past it will ever be acknowledged. The fence
// leaves two things behind. Slots at or past the cut may still hold flight
// copies (pipelined or straggling writes, even complete at W), and the
// host's index may not yet cover every acknowledged flight (the writer died
// between an acknowledgement and the host's index update). Settle repairs
// both, in order:
//
//  1. it requires the epoch fenced, and fences it first when the Settler
//     has a Fencer (Options.Fencer);
//  2. it deletes every flight copy in [cut, cut+window], the cut slot
//     included, and leaves all poison standing. A writer assigns a slot
//     only while it is below its release point plus the window, and the
//     release point never passes the cut, so no flight lies further out.
//     Poison stays until the star is decommissioned: a partitioned
//     zombie's write may arrive arbitrarily late, and only standing poison
//     keeps it from ever reaching a quorum at the cut. Each zone lists
//     the span (slot keys sort in slot order), a page of at most 1,000
//     keys at a time, and only what it lists is probed and, when it holds
//     a flight, deleted, MaxParallel requests at a time; a flight copy
//     the settlement's own fence read past the cut (fence.Report.Garbage)
//     is deleted without a probe. Memory holds a page per zone, not the
//     window, and a context that ends stops it between requests. (A
//     roll.Roller's planned roll from a cleanly closed writer skips this
//     step: see "Settling your own epochs: package roll");
//  3. it hands every committed flight in [checkpoint, cut) to the host's
//     Coverage, in order, side by side with step 2 (they touch disjoint
//     slots), reading them ahead as far as MaxParallel
//     (chain.Reader.RangeHaving). A flight the settlement's own fence read
//     whole and verified is not read again: the fence kept its payload
//     (fence.Fencer.FenceKeep, up to the largest flight there can be, 64
//     MiB, the largest flights first), and coverage takes it from there
//     (Report.Kept), so settling an epoch reads its largest flight whole W
//     times in all, in the fence. No bytes move: refs point into the
//     flights where they are;
//  4. once both are done, it marks the record settled, which moves the
//     checkpoint to the cut.
//
// Every step is idempotent, so a settler that crashed anywhere (before a
// request, or after it landed with its answer lost) is finished by running
// Settle again, from any process. A settled epoch is a no-op.
//
// # When a successor must settle
//
// Before it serves or appends, a successor settles every unsettled epoch of
// the star it takes over: SettleAll fences and settles them oldest first.
// That is the library-level takeover:
//
//	fencer, _ := fence.New(minter, zones, fence.Options{Identity: "broker-2"})
//	settler, _ := settle.New(minter, zones, refs, settle.Options{Fencer: fencer})
//	reports, err := settler.SettleAll(ctx, "broker-1") // fence + settle
//	next, err := refs.Next(ctx, stream)                // where the stream goes on
//
// A star that restarts does the same with its own earlier epochs (roll.Open
// does it for you). The cut is the only decision; every fencer derives the
// same one, so racing successors agree.
//
// A takeover's reads do not grow with the star's history or the stream's
// length. SettleAll finds the unsettled epochs from the star's settlement
// cursor (epoch.Minter.Unsettled, moved by every settlement), each Settle
// reads its epoch's record by number and the flights of [checkpoint, cut)
// only, and RefIndex.Next reads one key, the stream's last page. Epoch records
// are kept, settled or trimmed (a settled record is the cut a late fencer
// adopts); nothing on this path lists them. SettleAll over n unsettled
// epochs reads a bounded number of keys per epoch (one listing of the
// star's records when n is large).
//
// # Coverage and the host's duties
//
// Coverage is the host's index over the chain: the refs that map what the
// host serves (stream offsets, queue positions) to chain positions. The
// coverage invariant is that refs cover every acknowledged byte. The host
// has two duties while it writes:
//
//   - cover on acknowledgement: when a chain.Future (or a roll.Future) is
//     acknowledged, record the refs for its flight before it answers the
//     producer;
//   - advance the checkpoint: move the epoch's checkpoint past the flights
//     it has covered, through its writer (chain.Writer.Checkpoint, or
//     roll.Roller.Checkpoint), which refuses a checkpoint past what was
//     acknowledged.
//
// Settlement covers [checkpoint, cut) again, so the checkpoint is how much
// work a successor is spared: each flight settled is one Cover, and one
// read of the flight unless the fence read it (the fence walks from about a
// window below the end of the epoch). A host that never advances it makes
// every takeover read the whole epoch.
//
// Cover must be idempotent by (star, epoch, slot): settlement repeats what
// the host already covered since its last checkpoint move, and a crashed
// settlement repeats itself. It must never let two positions cover the same
// host offset.
//
// # RefIndex
//
// RefIndex is a ready Coverage in the metastore. It keeps a stream's refs
// in pages of up to PageSpans (64) spans of one star's epoch, and the
// stream's retention point once it has one (see "Metastore keys").
//
// One flight may bundle records of several streams (a star's chain is
// shared by every stream it leads). A Locator (the host's payload format)
// reads from a flight one Span per stream: the run of offsets
// [offset, offset+count) it carries and the bytes [start, end) of the
// payload that hold them. CheckSpans checks them before anything is
// written: at least one span, valid stream names, non-empty runs inside
// the offset space, byte ranges inside the payload that do not overlap, at
// most one span per stream (ErrLocate otherwise).
//
// A stream's spans tile it: CoverFlights writes a span only where the
// stream's coverage ends (the last page's next). Covering is idempotent
// (the same ref again is skipped); a span starting below the coverage
// end that is not that ref is refused with a *DoubleCoverError
// (ErrDoubleCover), one starting above it with a *GapError (ErrGap).
// Nothing is ever overwritten: a page is written by compare-and-set on
// the revision it was read at, and a full page is sealed in the
// transaction that starts the next, so two positions can never cover one
// offset, and no offset below the coverage end is left uncovered.
//
// What it costs, for a star leading S streams:
//
//   - CoverFlights (an absorb, a release flush, a settlement's batch of 64
//     flights): one operation per stream it touches, whatever the number
//     of flights, packed 128 to a transaction (about S ÷ 128 transactions
//     when every stream has a record in the batch); no read for a stream
//     whose head the index wrote or read last, one otherwise;
//   - the index grows by one key per 64 spans of a stream; a page is
//     rewritten whole when a span joins it (about 30 bytes a span);
//   - Next: one read (Floor of the stream's last page); Find: two (the
//     retention point and the page holding the offset), at any length;
//     Refs lists the stream's pages.
//
// Reads use metastore.Floor; a Store without the Floorer capability falls
// back on listing the stream's pages, which grows with the stream.
//
// Retain moves a stream's retention point up and deletes the pages wholly
// below it (its last page stays: it says where the stream goes on); a
// read below the point is a *TrimmedError (ErrBelowRetention) naming where the
// stream now starts. Flights bundle many streams, so their objects go
// only once no retained ref needs them: Needed names the lowest slot of
// an epoch still referenced, and Trim deletes below it. RetainPolicy picks
// the point from limits (Policy: MaxAge, MaxBytes, MaxRecords; the one
// that keeps least wins); age needs pages stamped with the time of their
// newest span, which an index given a clock (WithClock) writes. Settling
// a flight again whose spans lie below the retention point lets them go
// instead of covering them twice.
//
// An index written by an earlier release (format 1: one key per span under
// refs/, a head per stream under refheads/) is refused with a
// *FormatError (ErrIndexFormat) that names the way out: Migrate (or
// MigrateAll, or `cutline index-migrate`), run while no star writes,
// rewrites each stream into pages and then deletes the old keys; a
// migration that crashed is finished by running it again.
//
// A host that assigns offsets from Next, in the order its writer assigns
// slots, keeps the tiling by construction: settlement covers the flights
// of [checkpoint, cut) in slot order, so a stream's runs must follow each
// other in chain order.
//
// # Trim
//
// Trim deletes an epoch's slot objects below upTo and advances its trimmed
// cursor there. upTo may not pass the checkpoint (a *epoch.CursorError,
// errors.Is epoch.ErrCursorAhead): only covered slots go, and the cut
// slot's poison always stands. The cursor moves first, so readers stop
// asking for those slots (chain.Reader skips them; reading one is
// cutline.ErrTrimmed) before any object goes. Objects are found by listing,
// so leftovers of an interrupted trim, or of a bucket that was unreachable
// (TrimReport.Left), are deleted by the next Trim of the epoch. In a
// settled epoch Trim also deletes the flights a stale writer managed to
// land at or past the cut after settlement swept there (TrimReport.Late), so
// that a zombie's late creates do not stay for ever.
//
// Trim deletes data that refs may still point at: trim only what the host
// no longer serves (retention) or has rewritten elsewhere (the epoch's
// rewritten cursor), and drop or move those refs first. TrimRewritten
// trims up to the rewritten cursor; TrimUnneeded up to the lowest slot a
// retained ref still needs (RefIndex.Needed).
//
// # Compaction
//
// Flights bundle the records of every stream a star leads, which suits
// the writer and not a consumer of one stream: it would read one flight
// per record. A Compactor rewrites an epoch's flights below its
// checkpoint into segments, one object per stream holding the bytes of
// consecutive ref pages, and moves the pages onto them. Three cursors of
// the epoch record say how far each stage has come:
//
//	slot     0          trimmed         rewritten          checkpoint        cut
//	         ├─────────────────┼───────────────┼───────────────────┼────────────┤
//	flights      deleted       kept, unneeded      refs read them    covered or not yet
//	refs     ├────────── in segments ─────────┤├────────────── in flights ──────┤
//
// trimmed ≤ checkpoint and rewritten ≤ checkpoint (≤ cut once fenced);
// trimming up to rewritten loses nothing.
//
// A pass of Compact:
//
//  1. reads the next flights below the checkpoint (PassSlots and PassBytes
//     at a time), from the rewritten cursor for the first pass and from
//     where the pass before stopped for the others, and the spans they
//     carry;
//  2. finds the page holding each span, and keeps for rewriting the pages
//     no cover appends to any more: sealed pages, and the last page of a
//     settled epoch, whose every flight lies below the checkpoint. The
//     last page of an open epoch stays with its holder, and holds the
//     cursor back, not the next pass;
//  3. writes each stream's pages into segments (up to SegmentBytes each),
//     create-only in the epoch's buckets, and reads every copy back: a
//     segment with fewer than W verified copies is never named;
//  4. replaces those pages, by compare-and-set on the revisions it read,
//     with pages of format 2 that keep every span's flight coordinates
//     and name the segment and where the bytes start. A reader reading a
//     page sees it whole, so it finds either the old place of the bytes
//     or the new, never neither;
//  5. moves the rewritten cursor to the lowest slot with a span whose
//     page is not a page of segments: the lowest span of a page held
//     back, or where the pass stopped.
//
// Then TrimRewritten (or Trim up to the cursor) deletes the flights: no
// ref needs them. Needed no longer counts pages of segments.
//
// One slow stream, whose last page stays open for hours, holds the
// cursor at its page's first span and no more: the passes of the call
// compact every sealed page past it. A Compactor remembers, for the
// epochs it compacted last (256, and 65,536 held pages over all of
// them), where its scan stopped and the pages it left held. The next call
// reads those pages and their streams' retention points again, up to
// MaxReadMany to a request: a page rewritten by another compactor, or
// deleted or passed by retention, holds nothing back any more; one sealed
// since, or of an epoch settled since, is compacted with the flights it
// names; and the scan goes on from where it stopped. A holder's open
// epoch compacted every minute costs the flights appended since, and a
// read per page left, however long a stream keeps its last page open.
//
// What a compactor remembers spares reads and nothing else. It can only
// grow stale, never wrong: a slot below the checkpoint never gets a new
// ref, and a page of segments never turns back into a page of flights,
// so the pages a scan left held are a superset of those still holding
// the cursor back. It is checked against the epoch's record on every
// pass, and when another compactor or a trim moved the cursors past where
// it would move them, or it does not fit the record, it is dropped and
// the scan starts again at the cursor.
//
// Segment keys, <prefix>/<star>/segments/<epoch>/<stream>/<first>-<next>-<compactor>-<nonce>,
// cannot meet a slot key, and the compactor's identity and a random nonce
// keep two compactors from ever writing one key. Two compactors may race,
// and a compactor may race the holder: a page changed between the read
// and the compare-and-set is left to a later pass, and a segment no page
// came to name is deleted at once. A crash anywhere leaves only garbage:
// segments no page names. Collect deletes a segment once no page of its
// offsets [first, next) is a page of flights any more (a page of segments
// never becomes one of flights again, so the compare-and-set that would
// name it cannot succeed), or once retention dropped those offsets.
//
// Any process with the index and the buckets may compact: the holder
// (its pages' revisions only move when it seals a page, which costs a
// compactor a pass), or a maintenance process the host runs beside it,
// which keeps the rewrite's reads and writes off the writer's path.
//
// # Maintenance
//
// Retention, compaction, trim and collection are each a call on one
// stream or one epoch; a Maintainer runs them over everything under a
// Minter's root, a bounded pass at a time, as a host's maintenance
// process does (or the holder of the host's right to write). One Pass:
//
//  1. with a Policy (MaintainerOptions.Policy), applies the retention of
//     the next MaxStreams streams the host names (MaintainerConfig.Streams)
//     with RetainPolicy, so that compaction never rewrites what retention
//     is about to drop;
//  2. with SettleBefore, settles the epochs earlier writers left open
//     whose records were created below the revision it returns (the
//     revision the host's right to write began at), oldest first: a
//     pass that outlives that right never fences the next writer's
//     epoch;
//  3. takes the next MaxEpochs epochs with work in turn: compacts those
//     with slots below the checkpoint not yet rewritten (Compactor.Compact)
//     and trims them below the rewritten cursor (Settler.TrimRewritten),
//     and, with TrimUnneeded, below what no retained ref needs
//     (Settler.TrimUnneeded); an epoch whose trim left objects, or
//     deleted any, is trimmed again by the next pass, which lists it from
//     its first slot: a write's last zone copy still on its way during a
//     trim lands below the trimmed cursor and is deleted then;
//  4. collects the garbage segments (Compactor.Collect) of the next
//     MaxCollects epochs that have segments;
//  5. measures the backlog: the slots below a checkpoint neither
//     rewritten nor trimmed, and how long the oldest has been found
//     waiting at its epoch's rewritten cursor.
//
// Each pass goes on after where the last stopped, and gives up after
// Budget (ErrPassBudget); every step is idempotent and moves its cursor
// as it goes, so the next pass goes on from there. A step that fails is a
// *StageError in MaintenanceReport.Errors, and the pass goes on with the
// next. The report carries the counts a host's metrics need (records
// expired by limit, epochs settled, segments written, bytes compacted,
// objects deleted, the backlog and its age, failures by stage); the
// Maintainer keeps no metrics and logs nothing. Run runs a pass every
// Interval on the Maintainer's clock; Held stops a pass, and skips one,
// once the host may no longer maintain.
//
// Any process may run passes, and two may race: segments never share a
// key, pages and cursors move by compare-and-set, and a crash anywhere
// leaves only garbage that Collect deletes. Running them in one process
// (a host's holder) spares the compactors' lost races.
//
// # Reading a stream
//
// RefIndex.FindExtent and RefIndex.Extents say where a ref's bytes are:
// in the flight it names, or at a range of a segment. A StreamReader
// serves a stream's offsets from either with ranged reads: a flight's
// header and payload up to the run's end (the header tells a flight from
// a bucket's poison), or a segment's range plus ReadAhead bytes, which
// serve the extents after it in the same segment without another
// request. A consumer of one stream among a thousand interleaved ones
// reads about one object per record from flights and under 0.01 after
// compaction (BenchmarkStreamRead). A flight trimmed after its ref moved
// is found again in its segment, and one retention dropped during a read
// is a *TrimmedError. Ranged reads do not verify a checksum; the
// compactor verified every copy it let a page name.
//
// A host that answers reads in pages plans each from the index alone:
// RefIndex.Page returns the extents from an offset on up to PageLimits
// (records, and a byte budget in the host's own cost per extent, one
// extent at least), where the next page starts (Continue) and where the
// stream ends (Next), so that the host says both before it reads a byte;
// StreamReader.ReadPage then streams the page's chunks.
//
// # Settling your own epochs: package roll
//
// A star's writer across epochs (roll.Roller) fences and settles its own
// epochs through a Settler: roll.Open settles what an earlier incarnation
// left (SettleAll), and each roll fences the old epoch and settles it. It
// reaches the Settler's parts through Minter, Zones and Fencer. A planned
// roll from a writer that closed cleanly fences at the writer's release
// point (fence.Fencer.FenceAt) and settles with SettleFencedAt, which
// skips the garbage sweep of step 2 (Report.NoGarbageSweep) when that
// fence decided the cut at the release point: the writer created no
// flight at or past it, and garbage past the cut is harmless anyway
// (nothing reads past the cut). Any other report makes SettleFencedAt a
// plain Settle.
//
// # Takeover and roll
//
//	                    takeover (another star)        roll (same star)
//	who fences          the successor (SettleAll)      the roll.Roller itself
//	flights past cut    garbage, deleted by Settle     garbage, deleted by Settle
//	their records       the producer retries them      republished from the pool
//	producer sees       ErrFenced / ErrAborted         a delayed acknowledgement
//	stream offsets      successor continues at Next    unchanged
//
// In a takeover the producer retries what the dead writer never
// acknowledged: chain.ErrFenced (a live writer halted at the cut) or
// chain.ErrAborted (the writer was stopped before the slot was decided).
// An aborted slot may still be below the cut (completed by the fence's
// repair) and so be served, which makes the retried record a duplicate:
// delivery of what was never acknowledged is at least once.
//
// # Errors
//
// Settle returns a *epoch.StateError (epoch.ErrState) for an open epoch
// without a Fencer, epoch.ErrNoRecord for an epoch never minted, the
// fencer's errors (fence.ErrUndecided, fence.ErrBlocked,
// epoch.ErrCutMismatch) and the Coverage's errors; metastore and context
// errors pass through, wrapped with the star and epoch. Garbage an
// unreachable bucket kept through Options.Retries retries (Options.Backoff
// apart) is not an error (Report.GarbageLeft): nothing reads past the
// cut.
//
// A Maintainer's Pass joins the *StageErrors of the steps that failed,
// one of them ErrPassBudget when it ran out of time, and returns the
// cause of its context when that ended.
//
// A Compactor returns a *SegmentError (ErrSegment) for a segment short of
// W verified copies, and a StreamReader one for a segment no bucket
// serves, or a *chain.DataUnavailableError for such a flight.
//
// RefIndex returns ErrDoubleCover (*DoubleCoverError), ErrGap
// (*GapError), ErrLocate for a payload the Locator cannot read or spans
// CheckSpans refuses, cutline.ErrInvalid for an invalid stream or star
// name, ErrBelowRetention (*TrimmedError) below a stream's retention point,
// ErrIndexFormat (*FormatError) for a stream in the old format, and a
// *metastore.RecordError for a page or retention point that does not
// decode or disagrees with its key. Invalid options are a *cutline.ConfigError
// naming the field; so is a SettleFencedAt report that names no star.
//
// # Metastore keys
//
// Only a RefIndex keeps keys here, under the root given to NewRefIndex
// ("" or ending in '/'): a Settler and a roll.Roller cover through it (or the
// host's own Coverage), and a Compactor rewrites its pages. An epoch's
// state and cursors, which Settle, Trim and Compact move, live in its
// record (package epoch), written through the Minter.
//
//	refpages/<stream>/<first offset, 20 digits>  a page of up to PageSpans spans of one star's epoch: star, epoch,
//	                                             next, [count, slot, start, end]… (format 2: and segment, at)
//	refstart/<stream>                            the stream's retention point: the first offset still served
//
// The writes, each by compare-and-set on the revisions read:
//
//   - CoverFlights (and Cover) rewrites the last page of each stream it
//     touches, or creates the next one and seals the full page before it
//     in the same transaction; up to MaxTxnOps operations (128) and
//     MaxTxnBytes to a transaction, several streams in one;
//   - Retain (RetainPolicy) writes the retention point, then deletes the
//     pages wholly below it, MaxTxnOps to a transaction;
//   - a Compactor's pass replaces pages of flights with pages of segments
//     (format 2), MaxTxnOps pages to a transaction.
//
// An index of an earlier release (format 1) kept, under the same root:
//
//	refs/<stream>/<offset, 20 digits>  one span ref
//	refheads/<stream>                  the stream's head: where it goes on
//
// This release writes neither: it looks for refheads/ once per index to
// refuse a stream still in format 1 (ErrIndexFormat), and Migrate reads
// both, writes the stream's pages and then deletes them.
package settle
