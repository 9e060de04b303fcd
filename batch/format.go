package batch

import (
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/settle"
)

// The bundle format, version 1. Every integer is an unsigned varint
// (encoding/binary's Uvarint).
//
//	magic     "CLB" and the version byte 1
//	n         the number of spans, at least 1
//	n times:  the span's directory entry
//	            name length, name bytes (a valid stream name)
//	            first offset
//	            record count, at least 1
//	            section length, in bytes
//	n times:  the span's section, in directory order, back to back up to
//	          the payload's end
//	            count record lengths, then the records' bytes
//
// A span's byte range (settle.Span's Start and End) is its section: a
// reader holding only those bytes and the span's count decodes its
// records (SpanEntries). Sections hold their spans' records and nothing
// else, so the whole payload is accounted for: the directory ends where
// the first section starts and the last section ends with the payload.
const (
	// MaxSpans bounds the streams of one bundle.
	MaxSpans = 1 << 16

	magic   = "CLB"
	version = 1
	// headerLen is the magic and the version byte.
	headerLen = len(magic) + 1
)

// ErrFormat: bytes that are not a bundle of this package's format (a
// wrong magic, an unknown version, a length that runs past its bytes, a
// count that does not match, a bad stream name, a stream twice). The
// error is a *FormatError.
var ErrFormat = errkind.New(cutline.ErrCorrupt, "batch: not a valid bundle")

// FormatError names where a bundle failed to decode and why.
type FormatError struct {
	// At is the byte offset of the field that failed, in the bytes given.
	At     int
	Reason string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("batch: bundle invalid at byte %d: %s", e.At, e.Reason)
}

// Unwrap makes errors.Is match ErrFormat.
func (e *FormatError) Unwrap() error { return ErrFormat }

func bad(at int, format string, args ...any) error {
	return &FormatError{At: at, Reason: fmt.Sprintf(format, args...)}
}

// Stream is one stream's records in a bundle: offsets Offset,
// Offset+1, … for Records in order.
type Stream struct {
	Name    string
	Offset  uint64
	Records [][]byte
}

// Entry is one record read back from a bundle. Data aliases the
// payload's bytes: copy it to keep it past the payload.
type Entry struct {
	Offset uint64
	Data   []byte
}

// maxUvarint is the most bytes a uvarint of a uint64 takes.
const maxUvarint = binary.MaxVarintLen64

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Encode writes streams as one bundle: at least one stream, each with a
// valid name (epoch.ValidateName), at least one record and offsets that
// do not run past the offset space, no name twice. A bundle larger than
// chain.MaxPayload is refused with ErrTooLarge.
func Encode(streams []Stream) ([]byte, error) {
	if len(streams) == 0 || len(streams) > MaxSpans {
		return nil, &InputError{Reason: fmt.Sprintf("a bundle carries 1 to %d streams, not %d", MaxSpans, len(streams))}
	}
	seen := make(map[string]bool, len(streams))
	size := headerLen + uvarintLen(uint64(len(streams)))
	for _, s := range streams {
		if err := epoch.ValidateName("stream", s.Name); err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, &InputError{Stream: s.Name, Reason: "the stream is in the bundle twice"}
		}
		seen[s.Name] = true
		n := uint64(len(s.Records))
		if n == 0 {
			return nil, &InputError{Stream: s.Name, Reason: "no record"}
		}
		if s.Offset+n < s.Offset {
			return nil, &InputError{Stream: s.Name, Reason: fmt.Sprintf("%d records from offset %d run past the offset space", n, s.Offset)}
		}
		sec := 0
		for _, r := range s.Records {
			sec += uvarintLen(uint64(len(r))) + len(r)
			if sec > chain.MaxPayload {
				return nil, &SizeError{Size: sec, Max: chain.MaxPayload}
			}
		}
		size += uvarintLen(uint64(len(s.Name))) + len(s.Name) + uvarintLen(s.Offset) + uvarintLen(n) + uvarintLen(uint64(sec)) + sec
		if size > chain.MaxPayload {
			return nil, &SizeError{Size: size, Max: chain.MaxPayload}
		}
	}
	out := make([]byte, 0, size)
	out = append(out, magic...)
	out = append(out, version)
	out = binary.AppendUvarint(out, uint64(len(streams)))
	for _, s := range streams {
		sec := 0
		for _, r := range s.Records {
			sec += uvarintLen(uint64(len(r))) + len(r)
		}
		out = binary.AppendUvarint(out, uint64(len(s.Name)))
		out = append(out, s.Name...)
		out = binary.AppendUvarint(out, s.Offset)
		out = binary.AppendUvarint(out, uint64(len(s.Records)))
		out = binary.AppendUvarint(out, uint64(sec))
	}
	for _, s := range streams {
		for _, r := range s.Records {
			out = binary.AppendUvarint(out, uint64(len(r)))
		}
		for _, r := range s.Records {
			out = append(out, r...)
		}
	}
	return out, nil
}

// reader walks bytes with bounds checks; base is the offset of b[0] in
// the bytes the caller was given, for error positions.
type reader struct {
	b    []byte
	at   int
	base int
}

func (r *reader) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(r.b[r.at:])
	if n <= 0 {
		if n == 0 {
			return 0, bad(r.base+r.at, "%s: the bytes end inside a varint", what)
		}
		return 0, bad(r.base+r.at, "%s: a varint overflows 64 bits", what)
	}
	r.at += n
	return v, nil
}

// length reads a uvarint that counts bytes still to come, refusing one
// larger than what is left.
func (r *reader) length(what string) (int, error) {
	at := r.at
	v, err := r.uvarint(what)
	if err != nil {
		return 0, err
	}
	if left := uint64(len(r.b) - r.at); v > left {
		return 0, bad(r.base+at, "%s %d runs past the %d bytes left", what, v, left)
	}
	return int(v), nil
}

// directory reads the header and directory of payload: one span per
// stream, its byte range its section. Nothing is allocated beyond what
// the payload's length bounds.
func directory(payload []byte) ([]settle.Span, error) {
	if len(payload) < headerLen {
		return nil, bad(0, "%d bytes are shorter than the header", len(payload))
	}
	if string(payload[:len(magic)]) != magic {
		return nil, bad(0, "no bundle magic")
	}
	if v := payload[len(magic)]; v != version {
		return nil, bad(len(magic), "version %d is not %d", v, version)
	}
	r := &reader{b: payload, at: headerLen}
	at := r.at
	n, err := r.uvarint("span count")
	if err != nil {
		return nil, err
	}
	// A directory entry takes at least 4 bytes and a section at least
	// one, so n is bounded by the payload's length before it sizes
	// anything.
	if n == 0 || n > MaxSpans || n > uint64(len(payload)-r.at)/5 {
		return nil, bad(at, "span count %d is not in [1, %d] or does not fit the %d bytes left", n, MaxSpans, len(payload)-r.at)
	}
	spans := make([]settle.Span, 0, n)
	secs := make([]uint64, 0, n)
	names := make(map[string]struct{})
	var total uint64
	for i := range n {
		at := r.at
		nl, err := r.length("stream name length")
		if err != nil {
			return nil, err
		}
		name := string(payload[r.at : r.at+nl])
		if err := epoch.ValidateName("stream", name); err != nil {
			return nil, &FormatError{At: at, Reason: fmt.Sprintf("span %d: %v", i, err)}
		}
		r.at += nl
		off, err := r.uvarint("first offset")
		if err != nil {
			return nil, err
		}
		at = r.at
		count, err := r.uvarint("record count")
		if err != nil {
			return nil, err
		}
		if count == 0 {
			return nil, bad(at, "span %d (%s) holds no record", i, name)
		}
		if off+count < off {
			return nil, bad(at, "span %d (%s): %d records from offset %d run past the offset space", i, name, count, off)
		}
		at = r.at
		sec, err := r.uvarint("section length")
		if err != nil {
			return nil, err
		}
		// Each record takes at least its length's byte.
		if sec < count {
			return nil, bad(at, "span %d (%s): a section of %d bytes cannot hold %d records", i, name, sec, count)
		}
		if sec > uint64(len(payload)) || total+sec > uint64(len(payload)) {
			return nil, bad(at, "span %d (%s): the sections run past the payload", i, name)
		}
		total += sec
		if _, dup := names[name]; dup {
			return nil, bad(at, "stream %s has two spans", name)
		}
		names[name] = struct{}{}
		spans = append(spans, settle.Span{Stream: name, Offset: off, Count: count})
		secs = append(secs, sec)
	}
	if want := uint64(len(payload) - r.at); total != want {
		return nil, bad(r.at, "the sections hold %d bytes, the payload %d after the directory", total, want)
	}
	start := uint64(r.at)
	for i := range spans {
		spans[i].Start, spans[i].End = start, start+secs[i]
		start += secs[i]
	}
	return spans, nil
}

// Locate reads the spans a bundle carries, one per stream, each with its
// first offset, record count and byte range (its section), after checking
// every length and every section's record lengths. It is the
// settle.Locator of a RefIndex over bundles: pass it to
// settle.NewRefIndex. Every error matches ErrFormat.
func Locate(payload []byte) ([]settle.Span, error) {
	spans, err := directory(payload)
	if err != nil {
		return nil, err
	}
	for _, s := range spans {
		if err := walkSection(payload[s.Start:s.End], int(s.Start), s.Count); err != nil {
			return nil, err
		}
	}
	return spans, nil
}

// walkSection checks that sec holds exactly count records: count record
// lengths, then exactly their bytes.
func walkSection(sec []byte, base int, count uint64) error {
	if count > uint64(len(sec)) {
		return bad(base, "a section of %d bytes cannot hold %d records", len(sec), count)
	}
	lens := &reader{b: sec, base: base}
	var data uint64
	for range count {
		l, err := lens.uvarint("record length")
		if err != nil {
			return err
		}
		if l > uint64(len(sec))-data {
			return bad(base+lens.at, "the records' lengths run past the section's %d bytes", len(sec))
		}
		data += l
	}
	if want := uint64(len(sec) - lens.at); data != want {
		return bad(base+lens.at, "the records' lengths add up to %d bytes, the section holds %d", data, want)
	}
	return nil
}

// SpanEntries decodes the records of span s from payload: the bytes
// [s.Start, s.End), which must hold exactly s.Count records. It is how a
// reader serves a ref of a RefIndex over bundles (settle.Ref.Span). The
// records alias payload. Every error matches ErrFormat.
func SpanEntries(payload []byte, s settle.Span) ([]Entry, error) {
	if err := checkSpan(payload, s); err != nil {
		return nil, err
	}
	out := make([]Entry, 0, s.Count)
	eachRecord(payload, s, func(r Entry) bool {
		out = append(out, r)
		return true
	})
	return out, nil
}

// SpanSeq is SpanEntries without the slice: it checks the span's bytes
// first, then yields its records in order (or only the error), allocating
// nothing per record.
func SpanSeq(payload []byte, s settle.Span) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if err := checkSpan(payload, s); err != nil {
			yield(Entry{}, err)
			return
		}
		eachRecord(payload, s, func(r Entry) bool { return yield(r, nil) })
	}
}

// checkSpan checks that payload's bytes [s.Start, s.End) hold exactly
// s.Count records.
func checkSpan(payload []byte, s settle.Span) error {
	if s.Start > s.End || s.End > uint64(len(payload)) {
		return bad(0, "span bytes [%d, %d) lie outside the %d bytes", s.Start, s.End, len(payload))
	}
	if s.Offset+s.Count < s.Offset {
		return bad(int(s.Start), "%d records from offset %d run past the offset space", s.Count, s.Offset)
	}
	return walkSection(payload[s.Start:s.End], int(s.Start), s.Count)
}

// eachRecord calls f with the records of a checked span until it returns
// false.
func eachRecord(payload []byte, s settle.Span, f func(Entry) bool) {
	sec := payload[s.Start:s.End]
	lens := &reader{b: sec}
	var data uint64
	for range s.Count {
		l, _ := lens.uvarint("")
		data += l
	}
	pos := uint64(len(sec)) - data
	lens.at = 0
	for i := range s.Count {
		l, _ := lens.uvarint("")
		if !f(Entry{Offset: s.Offset + i, Data: sec[pos : pos+l : pos+l]}) {
			return
		}
		pos += l
	}
}

// Entries decodes the records of stream from a bundle, in offset order,
// after checking the whole bundle (Locate). A bundle without the stream
// yields none. The records alias payload. Every error matches ErrFormat.
func Entries(payload []byte, stream string) ([]Entry, error) {
	spans, err := Locate(payload)
	if err != nil {
		return nil, err
	}
	for _, s := range spans {
		if s.Stream == stream {
			return SpanEntries(payload, s)
		}
	}
	return nil, nil
}
