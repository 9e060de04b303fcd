// Package batch gathers many small records, of one or many streams, into
// the flights of a lease.Star, by size and by linger time, and
// acknowledges each record when its flight is acknowledged. It is the
// first step of the write path, above the star: a record goes from
// Producer.Add to lease.Star.Submit, roll.Roller.Submit and
// chain.Writer.Submit, and its Ack adds to the flight's lease.Future the
// one thing only this layer knows, the record's offset in its stream.
//
// One flight per record costs one create-only PUT per zone per record;
// a Producer pays that once per flight instead. Its knobs are those of a
// Kafka producer: Options.MaxBytes is batch.size (the flight's payload
// bound, at most chain.MaxPayload), Options.Linger is linger.ms (on the
// injected clock), Options.MaxRecords caps the records of a flight, and
// Options.MaxBuffered is buffer.memory: Add blocks while the producer
// holds that many bytes of records not yet decided, so memory follows
// what is in flight and never a configured size.
//
// # The bundle format
//
// A flight's payload is a bundle (Encode): a versioned header, a
// directory of spans (stream, first offset, record count, section
// length) and one section per span, holding its records' lengths and
// bytes. Every length is bounds-checked before it is used, and nothing is
// allocated from a length the payload's size does not bound; flights are
// checksummed by chain/wire, so the bundle carries no checksum. Locate is
// the settle.Locator of a RefIndex over bundles: each span's byte range is
// its section, so a reader serving a ref decodes it with SpanEntries (or
// SpanSeq, which allocates nothing per record), and Records reads one
// stream's records out of a whole flight.
//
// # Using it, step by step
//
//  1. Build the star's parts with a RefIndex over Locate:
//     settle.NewRefIndex(store, root, batch.Locate), and start the star
//     (lease.Start) and open its streams as package lease describes.
//  2. New(star, Options{…}) makes the producer. While it serves a
//     stream, nothing else submits to that stream.
//  3. Add(ctx, stream, record) assigns the record the stream's next
//     offset (the first from Star.Next, then one by one) and returns an
//     Ack; Ack.Wait gives the flight's position (epoch, slot) and the
//     record's offset once the flight is acknowledged. The spans a
//     producer writes tile each stream, as Star.Submit requires.
//  4. Flush sends what gathers at once and waits for it; Close does the
//     same and stops the producer (and its linger timer). The star stays
//     open: close it after the producer.
//
// # When a flight fails
//
// A flight fails when the star refuses or loses it: the star closed or
// aborted, its epoch fenced with the flight not acknowledged, the stream's
// tenure lost, the stream no longer held. Then every record in it fails,
// and so does every record of its streams queued behind it: offsets tile a
// stream, so nothing after a failed record is sent, and nothing is
// silently dropped or reordered. Each fails with a *RecordError that
// matches ErrFailed and reaches the star's error. A refusal of Submit
// that names one stream of several in a flight (lease.ErrNotHeld,
// lease.ErrDeparting, lease.ErrOffset) placed nothing: that stream fails,
// and the flight goes on without it.
//
// A failed record may or may not be durable, exactly like a failed
// Star.Submit: the star may have placed its flight in a slot that a later
// fence finds committed. After a failure, the stream refuses Add with a
// *StreamError until the host calls Reset. Before it does, the host
// decides what became of the failed records: once the stream is opened
// again (by this star or a successor, after the gate settled the epoch),
// the index's Next tells where the stream continues, and a read of the
// stream from the last acknowledged offset shows which of them landed; it
// resends the others, or, when its records carry their own ids, resends
// every failed one and drops duplicates when it reads. Reset makes the
// next Add read the stream's offset from the star again.
//
// # Idempotent producers
//
// A client that retries an append it got no answer for may append its
// record twice. Dedup gives a host exactly-once appends for producers
// that number their records: each record carries its producer's name and
// a sequence, and before appending one the host asks Dedup.Lookup. A
// Fresh record is appended and, once acknowledged, applied in its
// stream's offset order (Dedup.Apply, with its Receipt); a Duplicate is
// answered with the first receipt and appended nothing; a TooOld one is
// refused, since the table no longer knows whether it landed. The table
// is bounded by DedupOptions: a window of sequences per producer, and a
// number of producers, the least recently active expiring first.
//
// The table is a function of the stream's records, so a new holder of the
// stream rebuilds it: from an encoding (Dedup.MarshalBinary, saved with
// lease.Star.SaveSnapshot at Dedup.Next) and a replay of the records from
// there, applying each, or skipping (Dedup.Skip) those retention dropped.
// UnmarshalBinary refuses bytes that are not an encoding with a
// *DedupFormatError, and never allocates more than its input justifies.
//
// DedupStore does both halves for a host. NewDedupStore takes the star,
// a ChunkReader of the stream (a settle.StreamReader over the star's
// Index) and DedupStoreOptions.Extract, the one thing that is the
// host's: the producer and sequence a record carries. Save stores a table
// at its Next (absorbing first when the Index does not cover it yet),
// from a timer or a count of records, and from lease.Options.Flush so
// that a planned successor replays nothing; it keeps a snapshot already
// further on. Rebuild, after Open, loads the snapshot and replays the
// tail up to Tenure.Next, ReadAhead reads at once; a snapshot that does
// not load, decode or stand at its offset is set aside (RebuildInfo
// says why) and the whole stream replayed, and records retention dropped
// are skipped.
//
// DedupAppender puts it all together for a host whose records go one per
// flight (a broker's produce API, say): Append opens the stream on its first
// record (through the gate, waiting a bounded time while the open is deferred,
// and within DedupAppenderOptions.MaxStreams), rebuilds the table, judges the record (a retry
// of a record in flight waits for it; one whose sequence holds other bytes fails
// with ErrPayloadConflict, which it tells by reading the record back; one below
// the window fails with ErrSequenceTooOld), appends it, and applies it in
// offset order once acknowledged. It saves the tables by count and by time and,
// wired as lease.Options.Flush, at every departure, so that a planned successor
// replays nothing. An append whose flight failed fails with ErrFailed, and leaves
// its stream suspect: the next Append leaves the stream through Finish (which
// settles whether the record landed), opens it again and rebuilds the table from
// the stream, so a retry is judged by what the stream holds. Fence installs a
// producer fencing token with no submission judged under the old one going
// through after it. The host supplies its record format
// (DedupAppenderConfig.Encode, and DedupAppenderOptions.Wrap for the
// flight around it).
//
// Records close to Options.MaxBytes in size go one per flight; a record
// that can never fit one is refused with a *SizeError.
package batch
