// Package chain writes and reads a star's chain: the flights of its epochs,
// kept on K object-store buckets (zones).
//
// A Writer appends payloads to the slots of one open epoch with create-only
// writes to every bucket, counts a slot committed once W buckets hold its
// flight, and acknowledges strictly in slot order. A fencer (package fence)
// ends an epoch by writing poison into the slots the writer has not filled;
// once B = K−W+1 buckets hold poison in a slot, that slot is dead, and the
// writer halts there: nothing at or past it is ever acknowledged, although
// object storage cannot lock the old writer out. A Reader serves the
// committed flights of all of a star's epochs, in order.
//
// # Objects and keys
//
// Every slot object, flight or poison, is stored at the same key in every
// bucket, <prefix>/<star>/<epoch>/<slot>, under the epoch's key prefix (a
// constant of the epoch, epoch.Constants.Prefix, so that every writer,
// reader, fencer and settler finds its slots at the same keys). The byte
// format of slot objects, their keys and how one bucket's answer for a slot
// is read and classified live in the sub-package chain/wire: a host needs
// it only to look at slots directly (an operator tool, a test harness);
// this package and fence use it underneath.
//
// # Writing
//
// Mint an epoch (package epoch), then make a Writer over the record Mint
// returned and the zone set, which resolves the buckets the record names:
//
//	zones, err := chain.NewZones(a, b, c)
//	rec, _ := minter.Mint(ctx, star, epoch.Constants{Class: "standard",
//		Buckets: chain.Names(a, b, c), W: 2, Window: 64, Prefix: "chains"})
//	w, err := chain.NewWriter(rec, zones, chain.WriterOptions{})
//	pos, err := w.Append(ctx, payload)     // one at a time
//	f, err := w.Submit(ctx, payload)       // or pipelined:
//	pos, err = f.Wait(ctx)                 // acknowledged in slot order
//	_, err = w.Checkpoint(ctx, pos.Slot+1) // once the host's index covers it
//
// Only the mint that created an epoch may write it, and nothing resumes an
// epoch: NewWriter takes the record's single-use claim (epoch.Record.Claim).
// A record read back with Get or Epochs (after a restart, say) is refused
// with epoch.ErrNotMinted, a second writer on one minted record with
// epoch.ErrClaimed. A restarted host mints a new epoch; the old one is
// fenced and settled. The writer is also the only way to move its open
// epoch's checkpoint (Checkpoint), because only it knows what was
// acknowledged: a checkpoint past its release point is refused with
// epoch.ErrCursorAhead.
//
// Submit assigns the next slot and returns a Future at once; it blocks only
// while Window slots are assigned past the release point (the first slot not
// yet acknowledged). Each slot's flight is created in all K buckets in
// parallel. A bucket's answer counts as:
//
//   - success: a copy;
//   - ErrExists: the object is read. The writer's own bytes (a fencer's
//     repair, or an earlier attempt whose answer was lost) are a copy;
//     poison counts against; a foreign object counts as neither;
//   - anything else (unavailable, timeout): the outcome is unknown, so the
//     create is retried with jittered exponential backoff
//     (WriterOptions.Backoff, on the injected Clock) until the slot is
//     decided.
//
// The slot is committed at W copies, without waiting for the other buckets
// (their current attempt finishes in the background; no retries follow). A
// Future resolves only when its slot and every lower slot are committed, so
// acknowledgements arrive strictly in slot order. A context that ends while
// waiting (Wait, Append) only ends the wait: the slot keeps going and may
// still be acknowledged. Submit encodes the payload before it returns; the
// writer keeps the flight until the slot is acknowledged (Future.Payload)
// and then drops it, so its memory is bounded by the slots in flight (at
// most the window, itself at most epoch.MaxWindow); nothing is allocated
// in proportion to a window that is not used.
//
// K=1, W=1 is supported: one poison ends the epoch, and a writer that loses
// a slot once halts.
//
// # Halting: ErrFenced
//
// When B buckets hold poison in a slot, the slot is dead: the writer halts.
// Halted is closed, Err returns a *FencedError naming the dead slot
// (errors.Is(err, ErrFenced)), every Future at or past the dead slot fails
// with that error, and Submit fails with it from then on. Slots below the
// dead slot that are still undecided keep going: those that commit are
// acknowledged (W immutable copies can never be cut), and if one of them is
// dead too the halt point moves down to it. Once Close returns, Err is final
// and its slot is the cut a fencer finds: every slot below it was
// acknowledged, every Future at or past it failed.
//
// If every bucket has answered for a slot and the answers reach neither W
// copies nor B poisons (foreign objects take part), the writer halts the
// same way with a *NoQuorumError (ErrNoQuorum) that names the objects
// (*wire.ObjectError: bucket, key, reason). It never guesses; an operator must
// look at those objects.
//
// A bucket that holds another well-formed flight at one of the writer's
// slots means a second writer wrote the epoch: the epoch is compromised.
// The writer halts there with a *ConflictError (ErrConflictingFlight); a
// fence refuses to count that slot either way, and a reader never serves
// it.
//
// What a host does on ErrFenced depends on who fenced:
//
//   - Takeover: another star fenced the epoch to take the host's streams
//     over. The host stops serving them and closes the writer. Failed
//     appends were never acknowledged; their producers retry against the
//     new leader, and the successor's settlement covers every acknowledged
//     flight.
//   - Roll: the same star halted (a configuration change, or its own
//     fence after a fault). It mints a new epoch, fences and settles the old
//     one (its cut equals the final halt slot), and republishes, in slot
//     order, the payloads of the futures that failed with ErrFenced
//     (Future.Payload) into the new epoch's first slots: a delayed
//     acknowledgement, not an error. The cut splits the payloads exactly:
//     each was either acknowledged in the old epoch or is republished in the
//     new one, never both.
//
// # Close and Abort
//
// Close stops accepting appends and waits until every assigned slot is
// decided (acknowledged or failed) and every goroutine has exited. If its
// context ends first it returns the context's error and the writer keeps
// working (with a quorum of buckets down, slots cannot be decided); call
// Abort then. Abort stops at once: it cancels retries and requests in
// flight, fails every unresolved future with a *AbortedError (ErrAborted;
// the slot may or may not end up in the chain, only a fence decides), and
// waits for the goroutines to exit. Both are idempotent; every Writer must
// end with one of them.
//
// # Reading
//
// A Reader yields a star's flights in chain order across its epochs
// (Flights), or one position (Read). Fenced and settled epochs yield
// [trimmed, cut); each flight is served from any bucket holding a valid
// copy, with the checksum and coordinates verified, falling back to the
// next bucket; a slot below the cut that no bucket can serve is a
// *DataUnavailableError (ErrDataUnavailable) naming the slot. An open epoch
// yields its contiguous committed prefix, and then iteration ends, because
// later epochs come after the open epoch's eventual cut. There a slot is
// committed only when W buckets hold byte-identical copies that verify: the
// reader reads the copies whole (up to K full reads per slot, ending at W
// identical ones), a copy whose body fails its checksum does not count,
// and two different flights are a *ConflictError. Flights reads up to
// ReaderOptions.ReadAhead slots in parallel, yielding them in order.
//
// What a read costs does not grow with the chain. Flights reads epoch
// records from the epoch it starts in (epoch.Minter.EpochsFrom), not the
// star's whole history. In an open epoch, Read checks the slot asked for
// and the window below it, not every slot from the checkpoint: a writer
// assigns a slot only while it lies less than a window past its release
// point, so a flight at slot s proves every slot up to s − window
// acknowledged (the bound the fence's walk start rests on too). Flights
// starting inside an open epoch checks the same window below its start.
//
// # Errors
//
// ErrFenced (*FencedError), ErrNoQuorum (*NoQuorumError),
// ErrConflictingFlight (*ConflictError), ErrAborted (*AbortedError),
// cutline.ErrClosed, ErrPayloadTooLarge (*PayloadError) and ErrPending come from the
// Writer, with epoch.ErrNotMinted and epoch.ErrClaimed from NewWriter; ErrDataUnavailable, ErrNotCommitted and
// cutline.ErrTrimmed from the Reader; wire.ErrCorrupt, wire.ErrUnknownFormat,
// wire.ErrMisplaced and ErrConflictingFlight are the reasons of a
// *wire.ObjectError. Invalid options
// are a *cutline.ConfigError naming the field; a record that is not open is
// a *epoch.StateError.
package chain
