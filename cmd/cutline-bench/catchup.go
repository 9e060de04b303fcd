package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/settle"
)

// catchupStar names the star of the catchup figure.
const catchupStar = "catchup"

// catchupReadAhead is the StreamReader's read-ahead (its default), and
// the length of each raw ranged GET of the reference.
const catchupReadAhead = 4 << 20

// catchupSize sizes the catchup figure: the streams interleaved, the
// records of each, the latency of every object request, and how many
// consumers are measured reading from flights (slow: one request per
// record) and from segments.
type catchupSize struct {
	streams, records int
	latency          time.Duration
	before, after    int
}

func (c config) catchup() catchupSize {
	if c.quick {
		return catchupSize{streams: 50, records: 64, latency: time.Millisecond, before: 1, after: 4}
	}
	return catchupSize{streams: 1000, records: 256, latency: 20 * time.Millisecond, before: 2, after: 20}
}

// catchupRecord is record off of stream: 100 bytes that name it.
func catchupRecord(stream string, off int) []byte {
	b := make([]byte, streamsRecord)
	copy(b, fmt.Sprintf("%s %d ", stream, off))
	return b
}

// consumer is what reading one stream from offset 0 took.
type consumer struct {
	records, bytes int
	time           time.Duration
	gets           int // object reads
	metaReads      int
}

func (c *consumer) add(o consumer) {
	c.records += o.records
	c.bytes += o.bytes
	c.time += o.time
	c.gets += o.gets
	c.metaReads += o.metaReads
}

func (c consumer) rate() float64 { return float64(c.bytes) / c.time.Seconds() }

// catchupRun is the catchup figure's zones and index, and the parts that
// read and compact them.
type catchupRun struct {
	d       catchupSize
	meta    *metacount.Store
	counted []*fault.Bucket
	zones   []objstore.Bucket // the counted zones behind the latency
	minter  *epoch.Minter
	refs    *settle.RefIndex
	reader  *settle.StreamReader
}

// read reads stream from offset 0 through the StreamReader and returns
// what it took and the bytes it read, after checking that every record
// came, in order.
func (r *catchupRun) read(ctx context.Context, stream string) (consumer, []byte, error) {
	benchfix.Reset(r.counted)
	r.meta.Reset()
	var c consumer
	var data bytes.Buffer
	start := time.Now()
	for ch, err := range r.reader.Read(ctx, stream, 0) {
		if err != nil {
			return c, nil, fmt.Errorf("read %s at %d: %w", stream, c.records, err)
		}
		if ch.Offset != uint64(c.records) {
			return c, nil, fmt.Errorf("read %s: chunk at %d, %d expected", stream, ch.Offset, c.records)
		}
		if err := checkSection(stream, ch); err != nil {
			return c, nil, err
		}
		c.records += int(ch.Count)
		data.Write(ch.Data)
		if c.records >= r.d.records {
			break // the end of what was appended: the coverage ends there
		}
	}
	c.time = time.Since(start)
	c.bytes = data.Len()
	c.gets = benchfix.Count(r.counted).Reads
	c.metaReads = r.meta.Stats().Reads()
	if c.records != r.d.records {
		return c, nil, fmt.Errorf("read %s: %d records of %d", stream, c.records, r.d.records)
	}
	return c, data.Bytes(), nil
}

// checkSection checks that a chunk holds its stream's records, as
// batch's format lays out a span's section: the records' lengths (one
// byte each, for 100-byte records), then their bytes.
func checkSection(stream string, ch settle.Chunk) error {
	n := int(ch.Count)
	if len(ch.Data) != n*(1+streamsRecord) {
		return fmt.Errorf("read %s at %d: %d bytes for %d records", stream, ch.Offset, len(ch.Data), n)
	}
	for i := range n {
		at := n + i*streamsRecord
		if want := catchupRecord(stream, int(ch.Offset)+i); ch.Data[i] != streamsRecord || !bytes.Equal(ch.Data[at:at+streamsRecord], want) {
			return fmt.Errorf("read %s: record %d is %.20q, want %.20q", stream, int(ch.Offset)+i, ch.Data[at:at+streamsRecord], want)
		}
	}
	return nil
}

// segmentRange is a run of a stream's bytes in one segment.
type segmentRange struct {
	key        string
	start, end uint64
}

// rawRead reads the byte ranges of the segments that hold stream with
// plain ranged GETs of catchupReadAhead bytes at most, one after the
// other, from bucket b: the storage's cost of the same bytes, without
// the index or the reader.
func (r *catchupRun) rawRead(ctx context.Context, b objstore.Bucket, ranges []segmentRange) (consumer, []byte, error) {
	benchfix.Reset(r.counted)
	var c consumer
	var data bytes.Buffer
	start := time.Now()
	for _, sr := range ranges {
		for off := sr.start; off < sr.end; {
			n := min(uint64(catchupReadAhead), sr.end-off)
			got, err := b.GetRange(ctx, sr.key, int64(off), int64(n))
			if err != nil {
				return c, nil, err
			}
			if len(got) == 0 {
				return c, nil, fmt.Errorf("%s ends at %d, before %d", sr.key, off, sr.end)
			}
			data.Write(got)
			off += uint64(len(got))
		}
	}
	c.time = time.Since(start)
	c.bytes = data.Len()
	c.records = r.d.records
	c.gets = benchfix.Count(r.counted).Reads
	return c, data.Bytes(), nil
}

// ranges returns where stream's bytes lie in segments, merged into runs.
func (r *catchupRun) ranges(ctx context.Context, stream string) ([]segmentRange, error) {
	var out []segmentRange
	for e, err := range r.refs.Extents(ctx, stream, 0) {
		if err != nil {
			return nil, err
		}
		if !e.InSegment() {
			return nil, fmt.Errorf("%s offset %d is not in a segment after compaction", stream, e.Offset)
		}
		if n := len(out); n > 0 && out[n-1].key == e.Segment && out[n-1].end == e.SegStart {
			out[n-1].end = e.SegEnd
			continue
		}
		out = append(out, segmentRange{key: e.Segment, start: e.SegStart, end: e.SegEnd})
	}
	return out, nil
}

// figCatchup: a consumer catches up on one stream of many interleaved
// ones (1,000 streams of 100-byte records appended round robin through
// batch.Producer on a lease.Star, a flight holding about one record of
// each; embedded etcd; three in-memory zones at 20 ms per request),
// reading from offset 0 before compaction, from flights, and after it,
// from segments, through settle.StreamReader; beside raw ranged GETs of
// the same bytes from the segment objects. And the compaction's records
// and bytes per second beside the appends' of the same run.
func figCatchup(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	d := cfg.catchup()
	cli := etcdClient(s)
	base, err := etcd.New(cli, etcd.Options{Root: "/catchup/"})
	if err != nil {
		return nil, err
	}
	r := &catchupRun{d: d, meta: metacount.Wrap(base)}
	_, r.counted, r.zones = countedZones(d.latency)
	names := streamNames(d.streams)

	// The appends: round robin, a flight of at most one record a stream.
	holder, err := startStreamsStar(ctx, r.meta, catchupStar, r.zones)
	if err != nil {
		return nil, err
	}
	defer holder.kill(ctx)
	if _, errs := holder.star.OpenMany(ctx, names, lease.OpenOptions{}); firstError(names, errs) != nil {
		return nil, fmt.Errorf("open: %w", firstError(names, errs))
	}
	p, err := batch.New(holder.star, batch.Options{MaxRecords: d.streams, Linger: streamsLinger})
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close(ctx) }()
	recs := make([][]byte, d.streams*d.records)
	for i := range recs {
		recs[i] = catchupRecord(names[i%d.streams], i/d.streams)
	}
	benchfix.Reset(r.counted)
	start := time.Now()
	for i, rec := range recs {
		if _, err := p.Add(ctx, names[i%d.streams], rec); err != nil {
			return nil, err
		}
	}
	if err := p.Flush(ctx); err != nil {
		return nil, err
	}
	appendTime := time.Since(start)
	appendReq := benchfix.Count(r.counted)
	ps := p.Stats()
	if int(ps.Records) != len(recs) || ps.Failed != 0 {
		return nil, fmt.Errorf("appends: %d of %d acknowledged, %d failed", ps.Records, len(recs), ps.Failed)
	}
	if err := holder.star.Absorb(ctx); err != nil {
		return nil, err
	}
	ep := holder.star.Epoch().Epoch
	holder.kill(ctx)

	// Maintenance, as a process beside the star: settle the epoch (a
	// successor, or a roll, would), then compact it.
	if r.minter, err = epoch.NewMinter(r.meta, epoch.Options{Identity: "maintenance"}); err != nil {
		return nil, err
	}
	cz := chain.MustZones(r.zones...)
	f, err := fence.New(r.minter, cz, fence.Options{Identity: "maintenance"})
	if err != nil {
		return nil, err
	}
	if r.refs, err = settle.NewRefIndex(r.meta, "", batch.Locate); err != nil {
		return nil, err
	}
	settler, err := settle.New(r.minter, cz, r.refs, settle.Options{Fencer: f})
	if err != nil {
		return nil, err
	}
	if _, err := settler.SettleAll(ctx, catchupStar); err != nil {
		return nil, err
	}
	if r.reader, err = settle.NewStreamReader(r.minter, cz, r.refs, settle.StreamReaderOptions{ReadAhead: catchupReadAhead}); err != nil {
		return nil, err
	}
	pick := func(i, n int) string { return names[(i*d.streams/n+i)%d.streams] }

	var before consumer
	for i := range d.before {
		c, _, err := r.read(ctx, pick(i, d.before))
		if err != nil {
			return nil, fmt.Errorf("from flights: %w", err)
		}
		before.add(c)
	}

	compactor, err := settle.NewCompactor(r.minter, cz, r.refs, "bench-compactor", settle.CompactorOptions{})
	if err != nil {
		return nil, err
	}
	benchfix.Reset(r.counted)
	start = time.Now()
	crep, err := compactor.Compact(ctx, catchupStar, ep)
	compactTime := time.Since(start)
	compactReq := benchfix.Count(r.counted)
	if err != nil {
		return nil, err
	}
	if crep.Rewritten != crep.Checkpoint {
		return nil, fmt.Errorf("compaction stopped at slot %d, checkpoint %d", crep.Rewritten, crep.Checkpoint)
	}
	benchfix.Reset(r.counted)
	trep, err := settler.TrimRewritten(ctx, catchupStar, ep) // no flight is read again
	if err != nil {
		return nil, err
	}
	trimReq := benchfix.Count(r.counted)

	// From segments, alternating with the raw reads of the same bytes.
	var after, raw consumer
	for i := range d.after {
		stream := pick(i, d.after)
		ranges, err := r.ranges(ctx, stream)
		if err != nil {
			return nil, err
		}
		var viaReader, viaRaw []byte
		for j := range 2 {
			if (i+j)%2 == 0 {
				c, data, err := r.read(ctx, stream)
				if err != nil {
					return nil, fmt.Errorf("from segments: %w", err)
				}
				after.add(c)
				viaReader = data
			} else {
				c, data, err := r.rawRead(ctx, r.zones[i%len(r.zones)], ranges)
				if err != nil {
					return nil, fmt.Errorf("raw ranged reads: %w", err)
				}
				raw.add(c)
				viaRaw = data
			}
		}
		if !bytes.Equal(viaReader, viaRaw) {
			return nil, fmt.Errorf("%s: the reader and the raw reads got different bytes", stream)
		}
	}

	perRec := func(n int, c consumer) float64 { return float64(n) / float64(c.records) }
	what := fmt.Sprintf("1 of %s streams", thousands(int64(d.streams)))
	lat := fmt.Sprintf("%v per object request; embedded etcd", d.latency)
	appended := float64(len(recs))
	appendRate, compactRate := appended/appendTime.Seconds(), appended/compactTime.Seconds()
	return []Row{
		Row{ID: "catchup.flights", Figure: "catch-up of " + what + ", from flights", Value: before.rate(), Unit: "bytes/s"}.
			ref("raw ranged GETs", raw.rate(), "bytes/s").
			note("%d consumers of %d records from offset 0, before compaction, through settle.StreamReader (a flight read whole per chunk); %s",
				d.before, d.records, lat),
		Row{ID: "catchup.flights.gets", Figure: "catch-up from flights: GETs per record", Value: perRec(before.gets, before), Unit: "GETs"}.
			note("%s metastore reads per record", num(perRec(before.metaReads, before))),
		Row{ID: "catchup.segments", Figure: "catch-up of " + what + ", from segments", Value: after.rate(), Unit: "bytes/s"}.
			ref("raw ranged GETs", raw.rate(), "bytes/s").
			note("target ratio ≥ 0.8; %d consumers of %d records from offset 0 after compaction, through settle.StreamReader (read-ahead %d MiB); the reference reads the same bytes from the same segment objects with plain ranged GETs of up to %d MiB, alternating with the reader; %s",
				d.after, d.records, catchupReadAhead>>20, catchupReadAhead>>20, lat),
		Row{ID: "catchup.segments.gets", Figure: "catch-up from segments: GETs per record", Value: perRec(after.gets, after), Unit: "GETs"}.
			ref("from flights", perRec(before.gets, before), "GETs").
			note("target ≤ 0.01; %s metastore reads per record (the raw reads: %s GETs per record)", num(perRec(after.metaReads, after)), num(perRec(raw.gets, raw))),
		Row{ID: "compact.rate", Figure: "compaction records/s", Value: compactRate, Unit: "records/s"}.
			ref("appends, same run", appendRate, "records/s").
			note("target ratio ≥ 1; %s records of %d bytes over %s streams: appended through batch.Producer in %s flights (%s), compacted by one settle.Compactor (defaults) in %d passes into %d segments (%s), then trimmed (%s deletes); %s",
				thousands(int64(appended)), streamsRecord, thousands(int64(d.streams)), thousands(int64(ps.Flights)), appendReq,
				crep.Passes, crep.Segments, compactReq, thousands(int64(trep.Deleted)), lat).
			objects(compactReq.Add(trimReq)),
		Row{ID: "compact.bytes", Figure: "compaction bytes/s", Value: float64(crep.Bytes) / compactTime.Seconds(), Unit: "bytes/s"}.
			ref("appends, same run", float64(ps.Bytes)/appendTime.Seconds(), "bytes/s").
			note("segment bodies written ÷ flight payloads acknowledged, per second"),
	}, nil
}
