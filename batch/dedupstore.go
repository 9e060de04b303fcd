package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/settle"
)

// ChunkReader reads a stream's chunks from the one holding offset from,
// in offset order, as settle.StreamReader.Read does (a *TrimmedError
// below the retention point).
type ChunkReader interface {
	Read(ctx context.Context, stream string, from uint64) iter.Seq2[settle.Chunk, error]
}

// DedupStoreOptions configures a DedupStore. Extract is required.
type DedupStoreOptions struct {
	// Dedup bounds the tables the store rebuilds.
	Dedup DedupOptions
	// Extract returns the producer and sequence that the record at
	// offset of stream carries ("" for a record without a producer). An
	// error fails the rebuild: the record is not one the host wrote.
	Extract func(stream string, offset uint64, record []byte) (producer string, seq uint64, err error)
	// Split returns the records of a chunk, Count of them. Nil reads a
	// chunk as the section of a bundle (SpanEntries).
	Split func(c settle.Chunk) ([][]byte, error)
	// ReadAhead is how many reads of the tail run at once (default 16);
	// Batch how many records a replay reads before it applies them
	// (default 256). Each is at most MaxDedupReadAhead.
	ReadAhead, Batch int
}

// MaxDedupReadAhead bounds DedupStoreOptions.ReadAhead and Batch.
const MaxDedupReadAhead = 1 << 16

// DedupStore keeps the producer tables of the streams a star holds
// across takeovers: Save stores a stream's table in its lease snapshot,
// and Rebuild, in a new holder, loads it and replays the stream's tail
// from the snapshot's offset. It is safe for concurrent use.
type DedupStore struct {
	star   *lease.Star
	chunks ChunkReader
	opts   DedupStoreOptions
}

// NewDedupStore returns a store over star's snapshots that replays
// through chunks (a *settle.StreamReader over the star's Index). Options
// out of bounds are refused with a *cutline.ConfigError.
func NewDedupStore(star *lease.Star, chunks ChunkReader, opts DedupStoreOptions) (*DedupStore, error) {
	switch {
	case star == nil:
		return nil, &cutline.ConfigError{Field: "star", Value: nil, Reason: "required"}
	case chunks == nil:
		return nil, &cutline.ConfigError{Field: "chunks", Value: nil, Reason: "required"}
	case opts.Extract == nil:
		return nil, &cutline.ConfigError{Field: "Extract", Value: nil, Reason: "required"}
	case opts.ReadAhead < 0 || opts.ReadAhead > MaxDedupReadAhead:
		return nil, &cutline.ConfigError{Field: "ReadAhead", Value: opts.ReadAhead, Reason: fmt.Sprintf("must satisfy 0 ≤ ReadAhead ≤ %d (0 means 16)", MaxDedupReadAhead)}
	case opts.Batch < 0 || opts.Batch > MaxDedupReadAhead:
		return nil, &cutline.ConfigError{Field: "Batch", Value: opts.Batch, Reason: fmt.Sprintf("must satisfy 0 ≤ Batch ≤ %d (0 means 256)", MaxDedupReadAhead)}
	}
	if err := opts.Dedup.validate(); err != nil {
		return nil, err
	}
	if opts.ReadAhead == 0 {
		opts.ReadAhead = 16
	}
	if opts.Batch == 0 {
		opts.Batch = 256
	}
	if opts.Split == nil {
		opts.Split = splitSection
	}
	return &DedupStore{star: star, chunks: chunks, opts: opts}, nil
}

// splitSection reads a chunk as a bundle's section.
func splitSection(c settle.Chunk) ([][]byte, error) {
	es, err := SpanEntries(c.Data, settle.Span{Stream: c.Stream, Offset: c.Offset, Count: c.Count, End: uint64(len(c.Data))})
	out := make([][]byte, len(es))
	for i, e := range es {
		out[i] = e.Data
	}
	return out, err
}

// RebuildInfo is how Rebuild rebuilt a stream's table: from the snapshot
// at offset Snapshot (HadSnapshot false: from the stream's start),
// replaying Replayed records read back and skipping Skipped ones that
// retention dropped, up to Next. SetAside, when set, says why a stored
// snapshot was not used.
type RebuildInfo struct {
	Stream      string
	HadSnapshot bool
	Snapshot    uint64
	Replayed    uint64
	Skipped     uint64
	Next        uint64
	SetAside    error
}

// Rebuild returns stream's table as it stands after every record below
// next (the tenure's first offset, lease.Tenure.Next): the snapshot
// loaded (lease.Star.LoadSnapshot), then the records from its offset
// replayed. A snapshot that does not load (lease.ErrBadSnapshot), does not
// decode, or whose table does not stand at its offset or lies past next
// is set aside (RebuildInfo.SetAside), and the whole stream is replayed.
// Records below the stream's retention point are skipped (Dedup.Skip):
// their producers' retries are no longer recognized. Any other failure of
// the load or of a read fails the rebuild.
func (s *DedupStore) Rebuild(ctx context.Context, stream string, next uint64) (*Dedup, RebuildInfo, error) {
	table := s.empty()
	rb := RebuildInfo{Stream: stream, Next: next}
	sn, err := s.star.LoadSnapshot(ctx, stream)
	if err != nil && !errors.Is(err, lease.ErrBadSnapshot) {
		return nil, rb, err
	}
	if err == nil && sn.Revision != 0 {
		if err = table.UnmarshalBinary(sn.Data); err == nil && (table.Next() != sn.Offset || sn.Offset > next) {
			err = &lease.SnapshotError{Stream: stream, Offset: sn.Offset, Err: lease.ErrBadSnapshot,
				Reason: fmt.Sprintf("it holds a table at %d; the stream continues at %d", table.Next(), next)}
		}
	}
	if err != nil {
		rb.SetAside, table = err, s.empty()
	}
	rb.HadSnapshot, rb.Snapshot = table.Next() > 0, table.Next()
	if rb.Replayed, rb.Skipped, err = s.Replay(ctx, stream, table, next); err != nil {
		return nil, rb, err
	}
	return table, rb, nil
}

func (s *DedupStore) empty() *Dedup {
	d, _ := NewDedup(s.opts.Dedup) // NewDedupStore checked the options
	return d
}

// Replay applies stream's records from table.Next() up to next, Batch at
// a time, each batch read by ReadAhead reads at once, and returns how
// many it applied and how many it skipped below the retention point.
func (s *DedupStore) Replay(ctx context.Context, stream string, table *Dedup, next uint64) (replayed, skipped uint64, err error) {
	for from := table.Next(); from < next; from = table.Next() {
		n := min(next-from, uint64(s.opts.Batch))
		recs := make([]record, n)
		part := (n + uint64(s.opts.ReadAhead) - 1) / uint64(s.opts.ReadAhead)
		g, gctx := errgroup.WithContext(ctx)
		for lo := uint64(0); lo < n; lo += part {
			g.Go(func() error { return s.read(gctx, stream, from+lo, recs[lo:min(lo+part, n)]) })
		}
		err := g.Wait()
		if te, ok := errors.AsType[*settle.TrimmedError](err); ok && te.Start > from {
			table.Skip(min(te.Start, next))
			skipped += table.Next() - from
			continue
		} else if err != nil {
			return replayed, skipped, err
		}
		for _, r := range recs {
			table.Apply(r.Producer, r.Seq, r.Receipt)
		}
		replayed += n
	}
	return replayed, skipped, nil
}

// record is a record read back: its producer and sequence, and where
// it was acknowledged.
type record struct {
	Producer string
	Seq      uint64
	Receipt  Receipt
}

// read fills out with the records from offset lo on.
func (s *DedupStore) read(ctx context.Context, stream string, lo uint64, out []record) error {
	hi := lo + uint64(len(out))
	at := lo
	for c, err := range s.chunks.Read(ctx, stream, lo) {
		if err != nil {
			return err
		}
		recs, err := s.opts.Split(c)
		if err == nil && uint64(len(recs)) != c.Count {
			err = fmt.Errorf("%d records where the ref says %d", len(recs), c.Count)
		}
		if err != nil {
			return fmt.Errorf("batch: replay %s at %d: %w", stream, c.Offset, err)
		}
		for i, rec := range recs {
			off := c.Offset + uint64(i)
			if off < at || off >= hi {
				continue
			} else if off > at {
				return fmt.Errorf("batch: replay %s: a chunk at %d, the records continue at %d", stream, c.Offset, at)
			}
			p, seq, err := s.opts.Extract(stream, off, rec)
			if err != nil {
				return fmt.Errorf("batch: replay %s at %d: %w", stream, off, err)
			}
			out[off-lo] = record{Producer: p, Seq: seq, Receipt: Receipt{Offset: off, Position: c.Position()}}
			at = off + 1
		}
		if at >= hi {
			return nil
		}
	}
	return fmt.Errorf("batch: replay %s: its coverage ends before %d", stream, hi)
}

// Save stores table as stream's snapshot, at table.Next(), through
// lease.Star.SaveSnapshot: when the star has not covered that offset in
// its Index yet, it absorbs first. A snapshot already stored further on
// is kept (nil). The table must not change during the call: a host that
// applies records concurrently saves a Clone.
func (s *DedupStore) Save(ctx context.Context, stream string, table *Dedup) error {
	data, _ := table.MarshalBinary()
	err := s.star.SaveSnapshot(ctx, stream, table.Next(), data)
	if errors.Is(err, lease.ErrSnapshotUncovered) {
		if err = s.star.Absorb(ctx); err == nil {
			err = s.star.SaveSnapshot(ctx, stream, table.Next(), data)
		}
	}
	if errors.Is(err, lease.ErrSnapshotBackwards) {
		return nil
	}
	return err
}

// Holds reports whether the record at offset of stream is want, byte for
// byte, as Split gives it: how a host tells a retry from another record
// under the same producer sequence. It absorbs first, so that a record
// the star acknowledged is covered; below the retention point it fails
// with a *settle.TrimmedError.
func (s *DedupStore) Holds(ctx context.Context, stream string, offset uint64, want []byte) (bool, error) {
	if err := s.star.Absorb(ctx); err != nil {
		return false, err
	}
	for c, err := range s.chunks.Read(ctx, stream, offset) {
		if err != nil {
			return false, err
		}
		recs, err := s.opts.Split(c)
		i := offset - c.Offset
		switch {
		case err != nil:
			return false, fmt.Errorf("batch: read %s at %d: %w", stream, offset, err)
		case offset < c.Offset || i >= uint64(len(recs)):
			return false, fmt.Errorf("batch: read %s: a chunk at %d of %d records does not hold %d", stream, c.Offset, len(recs), offset)
		}
		return bytes.Equal(recs[i], want), nil
	}
	return false, fmt.Errorf("batch: read %s: its coverage ends before %d: %w", stream, offset, cutline.ErrNotFound)
}
