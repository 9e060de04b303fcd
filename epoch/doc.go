// Package epoch mints a star's epochs and keeps their records.
//
// # What an epoch is
//
// A star (one writer identity) owns one chain: a sequence of epochs. An
// epoch is one writer tenure on the chain. It is minted by a
// compare-and-set increment of the star's counter in the metastore and is
// never resumed: a writer start, a turnover after a halt and a
// configuration change each mint a new one. Epoch numbers start at 1, grow
// by one per mint, and compare only within one star.
//
// Each epoch carries Constants fixed at mint time (storage class, the
// ordered bucket names of its K zones, the copy quorum W and the pipeline
// window), a State and Cursors. Changing any constant means minting a new
// epoch (a roll).
//
// # Minting
//
//	m, err := epoch.NewMinter(store, epoch.Options{Identity: "broker-7"})
//	rec, err := m.Mint(ctx, "star-1", epoch.Constants{
//		Class:   "standard",
//		Buckets: []string{"zone-a", "zone-b", "zone-c"},
//		W:       2,
//		Window:  64,
//	})
//
// Mint writes the counter and the open record in one transaction. Only a
// returned record may be written to, and only once: it carries a
// single-use claim (Record.Claim), which chain.NewWriter takes. A record
// read back (Get, Epochs, EpochsFrom, Unsettled) carries none (ErrNotMinted), and a second
// claim of one minted record fails (ErrClaimed), so nothing resumes an
// epoch, not even the process that minted it. Concurrent mints on one star
// get distinct, consecutive numbers; a mint that loses the race reads the
// counter again.
//
// The window is at most MaxWindow: a writer holds up to a window of
// flights, and settlement probes window+1 slots per bucket, so the window
// bounds both memory and the cost of a takeover.
//
// An error matching metastore.ErrUnavailable from Mint leaves the outcome
// unknown: the epoch may have been minted. That is harmless, because
// nobody holds it and a later fence finds it empty; call Mint again for a
// fresh number.
//
// # Burned numbers
//
// A number that the counter has passed but that has no record is burned:
// a crash may land between the counter increment and the record
// creation (this package writes both in one transaction, but a chain may
// hold numbers burned otherwise, or records an operator removed). Get returns ErrNoRecord for it, Epochs
// skips it, and the next Mint continues past it: a number is never reused.
// If the counter lags the records (restored or hand-edited metadata), Mint
// numbers the new epoch above every existing record, so numbers keep
// ordering the star's epochs.
//
// # Heads per class
//
// The counter keeps the newest epoch of each storage class (Chain.Heads).
// An epoch below its class's head is superseded (Superseded): a newer
// tenure of the same star and class exists. Heads are per class so that a
// standard roll never supersedes an express epoch and the other way round.
//
// # States
//
// A record moves only forward, each step a compare-and-set on the record:
//
//	open ──Publish(cut)──▶ fenced ──MarkSettled──▶ settled
//
// The states mean:
//
//   - open: the writer may still write slots.
//   - fenced: a fencer found the cut, the first dead slot. Slots [0, cut)
//     are committed and nothing at or past the cut is ever acknowledged.
//     Publish is a publication, not an arbitration: racing fencers compute
//     the same cut, so publishing the published cut succeeds and returns
//     the record. A different cut is a *CutMismatchError (ErrCutMismatch),
//     a programming error or corruption, never retried.
//   - settled: garbage past the cut is gone and coverage is restored;
//     MarkSettled sets the checkpoint to the cut. Settling twice is a
//     no-op; settling an open epoch is a *StateError (ErrState).
//
// # Finding epochs: records are kept, never listed on a takeover
//
// A record is small, and it is kept for as long as the star exists, like
// the poison in its cut slot: a settled record is the published cut that a
// late fencer adopts, and a record removed would read as a burned number
// (ErrNoRecord: an epoch nothing was ever written to). So records are never
// retired; instead nothing on a takeover's path lists them:
//
//   - Get reads one epoch by number (its key is RecordKey).
//   - EpochsFrom yields the records from a known epoch on, by number: a
//     key per epoch visited, and one listing only for a long walk. A
//     chain.Reader reads this way from the position it starts at.
//   - Unsettled yields the epochs that are not settled, from the star's
//     settlement cursor (Chain.Unsettled) on: every epoch below it is
//     settled or burned. MarkSettled moves it when the epoch it settled was
//     the oldest that might be unsettled, past every settled or burned
//     epoch after it. Settlement (settle.Settler.SettleAll) starts here,
//     so a takeover reads a few keys, not the star's history.
//   - Epochs lists every record, in one request: for tools and checks.
//
// A number without a record is burned when it lies below the counter's
// Next (only numbers at or past it are ever minted); a walk by number ends
// at the first number without a record at or past Next, so records above
// a counter that lags them are found too. The cursor is a hint that only
// saves reads: it never passes Next, only moves forward, by compare-and-set
// on the counter (a mint that races it retries), and one left behind (a
// lost compare, a counter written before it existed) costs the next
// settlement a few more reads and is moved by it.
//
// # Cursors
//
// Cursors are slot positions that only advance: Checkpoint (every slot
// below it is committed and covered by the host's index), Trimmed (flights
// below it are deleted) and Rewritten (slots below it were rewritten by the
// host elsewhere). Advance enforces trimmed ≤ checkpoint, rewritten ≤
// checkpoint and, once fenced, checkpoint ≤ cut. A cursor moving backwards
// is a *CursorError with ErrCursorRegression; one passing its bound is a
// *CursorError with ErrCursorAhead; nothing is written. Publish refuses a
// cut below the checkpoint the same way.
//
// The checkpoint of an open epoch is a claim that every slot below it was
// acknowledged; a fence walks only from there. So Advance refuses to move
// it (*StateError): it moves through the epoch's writer
// (chain.Writer.Checkpoint, or Claim.Advance for a host that writes
// without chain.Writer), which never moves it past what was acknowledged.
//
// # Errors
//
//   - cutline.ErrInvalid (*cutline.ConfigError naming the field): a bad star id,
//     class or bucket name (see ValidateName), W outside 1..K, K = 0,
//     window outside 1..MaxWindow, duplicate buckets, a bad Options.Root.
//     Nothing is written.
//   - ErrNoRecord: never minted or burned.
//   - ErrNotMinted, ErrClaimed: a claim on a record that Mint did not
//     return, or a second claim.
//   - ErrCutMismatch, ErrState, ErrCursorRegression, ErrCursorAhead:
//     refused transitions; nothing is written.
//   - metastore.ErrBadRecord (*metastore.RecordError naming the key): a
//     stored counter or record that is corrupt, of another kind, of a newer
//     format, claims another star or epoch, or breaks the cursor and state
//     rules. Such a value is never acted upon and never overwritten.
//   - metastore.ErrUnavailable: the store did not answer; the outcome of a
//     write is unknown. Never read as "absent".
//   - the context's error.
//
// # Metastore keys
//
// Under Options.Root ("" or ending in '/'; the lease package's records of
// a star share it):
//
//	chains/<star>                     counter (Chain): next number, head epoch per class, settlement cursor
//	chains/<star>/<epoch, 20 digits>  epoch record (Record): constants, state, cut, cursors
//
// ChainKey and RecordKey build them. Both are versioned JSON (fields kind
// and format) that an operator can read with etcdctl. Epoch numbers are
// zero-padded so that key order is numeric order. The writes:
//
//   - Mint writes the counter and creates the new record in one
//     transaction, compared with the counter's revision and the record's
//     absence;
//   - Publish, MarkSettled and Advance (and a writer's checkpoint through
//     its Claim) rewrite the record by compare-and-set on its revision;
//   - MarkSettled then moves the settlement cursor by compare-and-set on
//     the counter.
//
// Records are never deleted (see "Finding epochs").
package epoch
