package settle

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// Extent is a ref and where its bytes are now: in the flight the ref
// names (Segment empty), or at [SegStart, SegEnd) of the segment object
// Segment, in the buckets of the ref's epoch. The Ref keeps naming the
// flight the run was covered in, whichever holds the bytes.
type Extent struct {
	Ref
	Segment          string
	SegStart, SegEnd uint64
}

// InSegment reports whether the extent's bytes are read from a segment.
func (e Extent) InSegment() bool { return e.Segment != "" }

// extents returns the page's extents in offset order.
func (p *refPage) extents() []Extent {
	refs := p.refs()
	out := make([]Extent, len(refs))
	at := p.At
	for i, r := range refs {
		out[i] = Extent{Ref: r}
		if p.Segment != "" {
			n := r.End - r.Start
			out[i].Segment, out[i].SegStart, out[i].SegEnd = p.Segment, at, at+n
			at += n
		}
	}
	return out
}

// FindExtent is Find, and where the ref's bytes are: two reads at any
// stream length, with Find's errors.
func (x *RefIndex) FindExtent(ctx context.Context, stream string, offset uint64) (Extent, error) {
	pg, err := x.pageAt(ctx, stream, offset)
	if err != nil {
		return Extent{}, err
	}
	for _, e := range pg.extents() {
		if offset < e.Offset+e.Count {
			return e, nil
		}
	}
	panic("settle: a page does not hold an offset below its end")
}

// pageAt reads the page holding offset of stream, checked against the
// stream's retention point.
func (x *RefIndex) pageAt(ctx context.Context, stream string, offset uint64) (refPage, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return refPage{}, err
	}
	start, _, err := x.start(ctx, stream)
	if err != nil {
		return refPage{}, err
	}
	if offset < start {
		return refPage{}, &TrimmedError{Stream: stream, Offset: offset, Start: start}
	}
	kv, err := metastore.Floor(ctx, x.store, x.pagePrefix(stream), x.pageKey(stream, offset))
	if errors.Is(err, metastore.ErrNotFound) {
		// Retain moves the point first, then deletes the pages below it:
		// a page gone since the point was read is a retention that
		// passed offset meanwhile, not the end of the coverage.
		if terr := x.trimmedSince(ctx, stream, offset); terr != nil {
			return refPage{}, terr
		}
		if ferr := x.checkFormat(ctx, stream); ferr != nil {
			return refPage{}, ferr
		}
	}
	if err != nil {
		return refPage{}, fmt.Errorf("settle ref %s/%d: %w", stream, offset, err)
	}
	pg, err := x.decodePage(kv, stream)
	if err != nil {
		return refPage{}, err
	}
	if offset >= pg.Next {
		return refPage{}, fmt.Errorf("settle ref %s/%d: covered up to %d: %w", stream, offset, pg.Next, metastore.ErrNotFound)
	}
	return pg, nil
}

// Extents yields stream's extents from the one holding from to the end
// of its coverage as it reads it, in offset order: two reads to start,
// then one request per pagesAhead pages (PageSpans refs each) where the
// pages are about as wide as the one before. Compaction may move refs
// meanwhile; every page read is whole, so each extent is either the old
// or the new place of its bytes. An offset below the retention point is
// a *TrimmedError; one at or past the coverage matches
// metastore.ErrNotFound.
func (x *RefIndex) Extents(ctx context.Context, stream string, from uint64) iter.Seq2[Extent, error] {
	return func(yield func(Extent, error) bool) {
		pg, err := x.pageAt(ctx, stream, from)
		if err != nil {
			yield(Extent{}, err)
			return
		}
		var ahead map[uint64]refPage // pages read ahead, by first offset
		for {
			for _, e := range pg.extents() {
				if e.Offset+e.Count <= from {
					continue
				}
				if !yield(e, nil) {
					return
				}
			}
			if !pg.Sealed {
				return // the stream's last page
			}
			next, ok := ahead[pg.Next]
			if !ok {
				if ahead, err = x.pagesAhead(ctx, stream, pg); err != nil {
					yield(Extent{}, err)
					return
				}
				if next, ok = ahead[pg.Next]; !ok {
					// A retention past this page deletes the one after
					// it too: say so rather than call the index broken.
					if terr := x.trimmedSince(ctx, stream, pg.Next); terr != nil {
						yield(Extent{}, terr)
						return
					}
					yield(Extent{}, &metastore.RecordError{Key: x.pageKey(stream, pg.First), Kind: pageKind, Reason: "sealed, yet no page follows it"})
					return
				}
			}
			delete(ahead, pg.Next)
			pg = next
		}
	}
}

// trimmedSince reads stream's retention point again and returns a
// *TrimmedError when it has passed offset, nil otherwise (or when it
// cannot be read: the caller's own error stands).
func (x *RefIndex) trimmedSince(ctx context.Context, stream string, offset uint64) error {
	start, _, err := x.start(ctx, stream)
	if err != nil || offset >= start {
		return nil
	}
	return &TrimmedError{Stream: stream, Offset: offset, Start: start}
}

// pagesAhead is how many pages Extents asks for in one request.
const pagesAhead = 8

// pagesAhead reads the page after pg, which is sealed, and up to
// pagesAhead−1 pages after it in the same request (metastore.ReadMany):
// floors at the offsets the pages would start at were they as wide as
// pg. Where a guess misses, a page is read twice or one is left out and
// read by the next request, never skipped: the caller takes only the
// page starting where the one it holds ends. It returns the pages read,
// by first offset.
func (x *RefIndex) pagesAhead(ctx context.Context, stream string, pg refPage) (map[uint64]refPage, error) {
	width := max(pg.Next-pg.First, 1)
	reads := []metastore.Read{{Key: x.pageKey(stream, pg.Next)}}
	for i := uint64(1); i < pagesAhead; i++ {
		at := pg.Next + i*width
		if at < pg.Next { // past the end of the offsets
			break
		}
		reads = append(reads, metastore.Read{Key: x.pageKey(stream, at), Floor: true, Prefix: x.pagePrefix(stream)})
	}
	res, err := metastore.ReadMany(ctx, x.store, reads)
	if err != nil {
		return nil, fmt.Errorf("settle ref %s/%d: %w", stream, pg.Next, err)
	}
	out := make(map[uint64]refPage, len(res))
	for _, r := range res {
		if !r.Found {
			continue
		}
		p, err := x.decodePage(r.KV, stream)
		if err != nil {
			return nil, err
		}
		if p.First >= pg.Next {
			out[p.First] = p
		}
	}
	return out, nil
}

// StreamReaderOptions configures a StreamReader. The zero value works.
type StreamReaderOptions struct {
	// ReadAhead is how many bytes of a segment one read fetches from the
	// start of the extent asked for: the extents after it in the same
	// segment are then served without another request. Default 4 MiB, at
	// most MaxStreamReadAhead.
	ReadAhead int
	// Logger receives the reads that fell back on another bucket (debug).
	// Nil discards.
	Logger *slog.Logger
}

// MaxStreamReadAhead bounds StreamReaderOptions.ReadAhead.
const MaxStreamReadAhead = 256 << 20

// StreamReader serves a stream's bytes from segments and flights alike,
// reading only the byte ranges its extents name (objstore ranged reads):
// a flight's header and the payload up to the extent's end, or a
// segment's range and ReadAhead bytes past it. It is safe for concurrent
// use; each Read keeps its own read-ahead.
type StreamReader struct {
	minter *epoch.Minter
	zones  chain.Zones
	index  *RefIndex
	opts   StreamReaderOptions

	mu   sync.Mutex
	recs map[string]*epoch.Record // epoch constants, by star/epoch
}

// NewStreamReader returns a StreamReader over the index x, the epochs of m
// and their buckets in zones.
func NewStreamReader(m *epoch.Minter, zones chain.Zones, x *RefIndex, opts StreamReaderOptions) (*StreamReader, error) {
	if m == nil {
		return nil, &cutline.ConfigError{Field: "minter", Value: nil, Reason: "required"}
	}
	if x == nil {
		return nil, &cutline.ConfigError{Field: "index", Value: nil, Reason: "required"}
	}
	if opts.ReadAhead < 0 || opts.ReadAhead > MaxStreamReadAhead {
		return nil, &cutline.ConfigError{Field: "ReadAhead", Value: opts.ReadAhead, Reason: fmt.Sprintf("must satisfy 0 ≤ ReadAhead ≤ %d (0 means 4 MiB)", MaxStreamReadAhead)}
	}
	if opts.ReadAhead == 0 {
		opts.ReadAhead = 4 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &StreamReader{minter: m, zones: zones, index: x, opts: opts, recs: map[string]*epoch.Record{}}, nil
}

// Chunk is the bytes of one extent: the records of offsets
// [Offset, Offset+Count) of its stream, as the host's payload format laid
// them out in the flight. Data belongs to the caller.
type Chunk struct {
	Extent
	Data []byte
}

// Read yields stream's chunks from the one holding offset from (it may
// start below from) to the end of the stream's coverage, in offset order.
// Iteration ends after the first error: a *TrimmedError below the
// retention point, metastore.ErrNotFound at or past the coverage, a
// *chain.DataUnavailableError (chain.ErrDataUnavailable) for a flight no
// bucket serves, a *SegmentError (ErrSegment) for a segment none does. A
// flight trimmed after compaction moved its ref is found again in its
// segment; one retention dropped during the read is a *TrimmedError.
func (r *StreamReader) Read(ctx context.Context, stream string, from uint64) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		var ahead segmentBuffer
		for e, err := range r.index.Extents(ctx, stream, from) {
			if err != nil {
				yield(Chunk{}, err)
				return
			}
			c, err := r.chunk(ctx, &ahead, stream, e)
			if !yield(c, err) || err != nil {
				return
			}
		}
	}
}

// chunk reads extent e of stream. A flight no bucket serves may be gone
// because its bytes moved, or because retention dropped them: the ref is
// read again, and a record below the retention point is a *TrimmedError.
func (r *StreamReader) chunk(ctx context.Context, ahead *segmentBuffer, stream string, e Extent) (Chunk, error) {
	data, err := r.read(ctx, ahead, e)
	if err != nil && !e.InSegment() && errors.Is(err, chain.ErrDataUnavailable) {
		again, ferr := r.index.FindExtent(ctx, stream, e.Offset)
		if _, trimmed := errors.AsType[*TrimmedError](ferr); trimmed {
			return Chunk{Extent: e}, ferr
		}
		if ferr == nil && again.InSegment() && again.Offset == e.Offset {
			e = again
			data, err = r.read(ctx, ahead, e)
		}
	}
	return Chunk{Extent: e, Data: data}, err
}

// segmentBuffer holds bytes read ahead from one segment.
type segmentBuffer struct {
	key  string
	at   uint64
	data []byte
}

func (b *segmentBuffer) slice(e Extent) ([]byte, bool) {
	if b.key != e.Segment || e.SegStart < b.at || e.SegEnd > b.at+uint64(len(b.data)) {
		return nil, false
	}
	return b.data[e.SegStart-b.at : e.SegEnd-b.at : e.SegEnd-b.at], true
}

// record returns the constants of star's epoch ep (they never change).
func (r *StreamReader) record(ctx context.Context, star string, ep uint64) (*epoch.Record, []objstore.Bucket, error) {
	id := fmt.Sprintf("%s/%d", star, ep)
	r.mu.Lock()
	rec := r.recs[id]
	r.mu.Unlock()
	if rec == nil {
		var err error
		if rec, err = r.minter.Get(ctx, star, ep); err != nil {
			return nil, nil, err
		}
		r.mu.Lock()
		if len(r.recs) >= maxCachedHeads {
			clear(r.recs)
		}
		r.recs[id] = rec
		r.mu.Unlock()
	}
	buckets, err := r.zones.Resolve(rec.Constants.Buckets)
	return rec, buckets, err
}

func (r *StreamReader) read(ctx context.Context, ahead *segmentBuffer, e Extent) ([]byte, error) {
	rec, buckets, err := r.record(ctx, e.Star, e.Epoch)
	if err != nil {
		return nil, err
	}
	if e.InSegment() {
		if data, ok := ahead.slice(e); ok {
			return data, nil
		}
		n := max(e.SegEnd-e.SegStart, uint64(r.opts.ReadAhead))
		data, err := r.fromAny(ctx, buckets, e.Slot, func(b objstore.Bucket) ([]byte, error) {
			got, err := b.GetRange(ctx, e.Segment, int64(e.SegStart), int64(n))
			if err == nil && uint64(len(got)) < e.SegEnd-e.SegStart {
				err = &SegmentError{Bucket: b.Name(), Key: e.Segment, Reason: fmt.Sprintf("ends before the extent's bytes [%d, %d)", e.SegStart, e.SegEnd)}
			}
			return got, err
		})
		if err != nil {
			return nil, &SegmentError{Key: e.Segment, Reason: "no bucket serves it", Err: err}
		}
		*ahead = segmentBuffer{key: e.Segment, at: e.SegStart, data: data}
		out, _ := ahead.slice(e)
		return out, nil
	}
	// A flight is read whole and its checksum verified: a ranged read
	// could serve a corrupt copy's bytes. A bucket whose copy is corrupt,
	// misplaced or poison is passed over for the next. Flights are small
	// (many streams share one); the ranged reads are the segments'.
	addr := wire.Addr{Keys: wire.KeysOf(rec), Star: e.Star, Epoch: e.Epoch, Slot: e.Slot}
	data, err := r.fromAny(ctx, buckets, e.Slot, func(b objstore.Bucket) ([]byte, error) {
		got, err := b.Get(ctx, addr.Key())
		if err != nil {
			return nil, err
		}
		obj, err := wire.Decode(got)
		if err == nil {
			err = obj.Check(e.Star, e.Epoch, e.Slot)
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		case obj.Kind != wire.KindFlight:
			return nil, fmt.Errorf("%s: poison", b.Name())
		case uint64(len(obj.Body)) < e.End:
			return nil, fmt.Errorf("%s: the flight ends before the extent's bytes [%d, %d)", b.Name(), e.Start, e.End)
		}
		return obj.Body[e.Start:e.End:e.End], nil
	})
	if err != nil {
		return nil, &chain.DataUnavailableError{Star: e.Star, Epoch: e.Epoch, Slot: e.Slot, Err: err}
	}
	return data, nil
}

// fromAny asks the buckets in turn, from one the slot picks (to spread the
// load), until one answers.
func (r *StreamReader) fromAny(ctx context.Context, buckets []objstore.Bucket, pick uint64, get func(objstore.Bucket) ([]byte, error)) ([]byte, error) {
	var reasons []error
	k := uint64(len(buckets))
	for j := range k {
		b := buckets[(pick+j)%k]
		data, err := get(b)
		if err == nil {
			if len(reasons) > 0 {
				r.opts.Logger.DebugContext(ctx, "stream read after fallback", "bucket", b.Name(), "skipped", errors.Join(reasons...))
			}
			return data, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		reasons = append(reasons, err)
	}
	return nil, errors.Join(reasons...)
}
