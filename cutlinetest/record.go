package cutlinetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/settle"
)

// Record is the payload of one producer record in the reference host's
// format, "<stream>|<offset>|<id>": the stream and offset are what the
// host's index needs (Locate), the id names the producer's record, so that
// exactly-once can be checked across a takeover, where a retried record
// gets a new offset.
func Record(stream string, offset uint64, id string) []byte {
	return fmt.Appendf(nil, "%s|%d|%s", stream, offset, id)
}

// ParseRecord splits a payload made by Record.
func ParseRecord(p []byte) (stream string, offset uint64, id string, err error) {
	parts := bytes.SplitN(p, []byte("|"), 3)
	if len(parts) != 3 {
		return "", 0, "", fmt.Errorf("cutlinetest: not a record: %q", p)
	}
	offset, err = strconv.ParseUint(string(parts[1]), 10, 64)
	if err != nil {
		return "", 0, "", fmt.Errorf("cutlinetest: record %q: offset: %w", p, err)
	}
	return string(parts[0]), offset, string(parts[2]), nil
}

// BundleRecord is one producer record inside a Bundle: the stream and
// offset the host gave it, and the producer's id, which each record of a
// bundle keeps for itself.
type BundleRecord struct {
	Stream string
	Offset uint64
	ID     string
}

// bundleHeader opens every Bundle payload. No Record starts with it: a
// stream name holds no newline.
const bundleHeader = "bundle\n"

// Bundle is the payload of a transit bundle in the reference host's
// format: records of several streams in one flight, as a star leading
// several streams writes them. It is "bundle\n" and then one line per
// record, in the order given: "<stream>|<offset>|<id>\n", the id quoted as
// strconv.Quote does, so that any id fits on its line. Locate reads one
// span per stream from it; for that, the records of one stream must follow
// each other, at consecutive offsets.
func Bundle(records ...BundleRecord) []byte {
	b := []byte(bundleHeader)
	for _, r := range records {
		b = fmt.Appendf(b, "%s|%d|%s\n", r.Stream, r.Offset, strconv.Quote(r.ID))
	}
	return b
}

// bundleLine is one record of a bundle and the bytes [start, end) of the
// payload that hold it.
type bundleLine struct {
	BundleRecord
	start, end uint64
}

// isBundle tells whether p is a Bundle payload (well-formed or not).
func isBundle(p []byte) bool { return bytes.HasPrefix(p, []byte(bundleHeader)) }

// parseLines parses b, bundle lines that start at byte at of their
// payload.
func parseLines(b []byte, at uint64) ([]bundleLine, error) {
	var out []bundleLine
	for len(b) > 0 {
		n := bytes.IndexByte(b, '\n')
		if n < 0 {
			return nil, fmt.Errorf("cutlinetest: bundle: the line at byte %d does not end", at)
		}
		parts := bytes.SplitN(b[:n], []byte("|"), 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("cutlinetest: bundle: the line at byte %d is not a record: %q", at, b[:n])
		}
		off, err := strconv.ParseUint(string(parts[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cutlinetest: bundle: the line at byte %d: offset: %w", at, err)
		}
		id, err := strconv.Unquote(string(parts[2]))
		if err != nil {
			return nil, fmt.Errorf("cutlinetest: bundle: the line at byte %d: id %s: %w", at, parts[2], err)
		}
		out = append(out, bundleLine{BundleRecord{Stream: string(parts[0]), Offset: off, ID: id}, at, at + uint64(n) + 1})
		at += uint64(n) + 1
		b = b[n+1:]
	}
	return out, nil
}

// ParseBundle splits a payload made by Bundle. It checks the format only;
// Locate checks that each stream's records are contiguous.
func ParseBundle(p []byte) ([]BundleRecord, error) {
	if !isBundle(p) {
		return nil, fmt.Errorf("cutlinetest: not a bundle: %.40q", p)
	}
	lines, err := parseLines(p[len(bundleHeader):], uint64(len(bundleHeader)))
	if err != nil {
		return nil, err
	}
	out := make([]BundleRecord, len(lines))
	for i, l := range lines {
		out[i] = l.BundleRecord
	}
	return out, nil
}

// Locate is the settle.Locator of the reference host's payloads. A Record
// is one span over the whole payload. A Bundle is one span per stream, in
// the order the streams first appear: the stream's records must follow
// each other in the bundle, at consecutive offsets, and the span's Count
// is their number and its bytes their lines.
func Locate(p []byte) ([]settle.Span, error) {
	if isBundle(p) {
		return locateBundle(p)
	}
	stream, offset, _, err := ParseRecord(p)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: stream, Offset: offset, Count: 1, Start: 0, End: uint64(len(p))}}, nil
}

func locateBundle(p []byte) ([]settle.Span, error) {
	lines, err := parseLines(p[len(bundleHeader):], uint64(len(bundleHeader)))
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, errors.New("cutlinetest: an empty bundle")
	}
	var spans []settle.Span
	seen := map[string]bool{}
	for _, l := range lines {
		if n := len(spans); n > 0 && spans[n-1].Stream == l.Stream {
			s := &spans[n-1]
			if l.Offset != s.Offset+s.Count {
				return nil, fmt.Errorf("cutlinetest: bundle: stream %s has offset %d after %d", l.Stream, l.Offset, s.Offset+s.Count-1)
			}
			s.Count++
			s.End = l.end
			continue
		}
		if seen[l.Stream] {
			return nil, fmt.Errorf("cutlinetest: bundle: the records of stream %s do not follow each other", l.Stream)
		}
		seen[l.Stream] = true
		spans = append(spans, settle.Span{Stream: l.Stream, Offset: l.Offset, Count: 1, Start: l.start, End: l.end})
	}
	return spans, nil
}

// spanRecords reads the records that the bytes of span s of payload p hold
// (a ref's span), and checks that they are exactly the ones it claims: s's
// stream, offsets [Offset, Offset+Count). p is a Record or a Bundle.
func spanRecords(p []byte, s settle.Span) ([]BundleRecord, error) {
	if s.Start > s.End || s.End > uint64(len(p)) {
		return nil, fmt.Errorf("bytes [%d, %d) are not inside the payload's %d", s.Start, s.End, len(p))
	}
	var recs []BundleRecord
	if isBundle(p) {
		if s.Start < uint64(len(bundleHeader)) || p[s.Start-1] != '\n' {
			return nil, fmt.Errorf("bytes [%d, %d) do not start at a record", s.Start, s.End)
		}
		lines, err := parseLines(p[s.Start:s.End], s.Start)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			recs = append(recs, l.BundleRecord)
		}
	} else {
		stream, off, id, err := ParseRecord(p[s.Start:s.End])
		if err != nil {
			return nil, err
		}
		recs = append(recs, BundleRecord{Stream: stream, Offset: off, ID: id})
	}
	if uint64(len(recs)) != s.Count {
		return nil, fmt.Errorf("bytes [%d, %d) hold %d records, not %d", s.Start, s.End, len(recs), s.Count)
	}
	for i, r := range recs {
		if r.Stream != s.Stream || r.Offset != s.Offset+uint64(i) {
			return nil, fmt.Errorf("bytes [%d, %d) hold stream %s offset %d where %s offset %d belongs", s.Start, s.End, r.Stream, r.Offset, s.Stream, s.Offset+uint64(i))
		}
	}
	return recs, nil
}

// chunkRecords reads the records of a chunk (a ref's bytes, as
// settle.StreamReader serves them from a flight or a segment) and checks
// that they are exactly the ones its extent claims. A Record is a whole
// payload, so its span starts at byte 0; a Bundle's spans start past its
// header, at a line. bundled says which the chunk came from.
func chunkRecords(c settle.Chunk) (recs []BundleRecord, bundled bool, err error) {
	s := c.Span()
	if uint64(len(c.Data)) != s.End-s.Start {
		return nil, false, fmt.Errorf("%d bytes served for the span's [%d, %d)", len(c.Data), s.Start, s.End)
	}
	if s.Start == 0 {
		recs, err = spanRecords(c.Data, settle.Span{Stream: s.Stream, Offset: s.Offset, Count: s.Count, Start: 0, End: uint64(len(c.Data))})
		return recs, false, err
	}
	// The lines of a bundle, as if they followed its header.
	p := append([]byte(bundleHeader), c.Data...)
	recs, err = spanRecords(p, settle.Span{Stream: s.Stream, Offset: s.Offset, Count: s.Count, Start: uint64(len(bundleHeader)), End: uint64(len(p))})
	return recs, true, err
}

// verifiedChunk returns the bytes of chunk c checked as a consumer would
// want them: a chunk in a segment as the StreamReader served it, a chunk
// in a flight from the whole flight read with r, which verifies each
// copy's checksum and falls back on another. The StreamReader reads a
// flight by range and cannot check the checksum of a body it does not
// read whole, so it may serve a corrupt copy that reading the flight
// whole skips.
func verifiedChunk(ctx context.Context, r *chain.Reader, c settle.Chunk) ([]byte, error) {
	if c.InSegment() {
		return c.Data, nil
	}
	p, err := r.Read(ctx, c.Star, c.Position())
	if err != nil {
		return nil, err
	}
	if c.Start > c.End || c.End > uint64(len(p)) {
		return nil, fmt.Errorf("bytes [%d, %d) are not inside the flight's %d", c.Start, c.End, len(p))
	}
	return p[c.Start:c.End], nil
}
