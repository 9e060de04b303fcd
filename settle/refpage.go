package settle

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// The index keeps a stream's refs in pages, one key per PageSpans spans:
//
//	<root>refpages/<stream>/<first offset, 20 digits>
//
// A page holds consecutive spans of one stream that lie in flights of one
// star's epoch: their offsets tile [First, Next). The stream's last page
// (its head) is the one written to; a span of another epoch, or one past
// PageSpans, starts a new page, and the page before it is sealed in the
// same transaction, so that no writer that read the old head can append
// to it any more. Keys sort by offset, so the page holding an offset is
// the floor of its key (metastore.Floor): one read at any stream length.
//
// A page of format 2 is a page of format 1 whose bytes were rewritten into
// a segment (compaction): it keeps every span's flight coordinates and
// adds the segment's key and where the first span's bytes start in it;
// the spans follow each other there in order. Pages of flights are still
// written in format 1, so a release that knows only format 1 keeps
// reading them, and refuses a page of segments rather than misread it.
const (
	pageKind = "refpage"
	// flightPageFormat is the format of a page whose bytes lie in flights,
	// segmentPageFormat of one whose bytes lie in a segment; pageFormat
	// is the newest this package reads.
	flightPageFormat, segmentPageFormat = 1, 2
	pageFormat                          = segmentPageFormat
	// PageSpans is the most spans a page holds. A page is rewritten
	// whole on every cover, so it also bounds the bytes a cover writes
	// per stream: about 30 bytes a span.
	PageSpans = 64
	// IndexFormat is the index layout this package reads and writes:
	// pages. Format 1 kept one key per span (refs/<stream>/<offset>) and
	// a head per stream (refheads/<stream>); it is read only by Migrate.
	IndexFormat = 2
)

// refPage is one page of a stream's refs. Each span is [count, slot,
// start, end]: offsets follow from First and the counts before it.
type refPage struct {
	metastore.RecordHeader
	Stream string      `json:"stream"`
	First  uint64      `json:"first"`
	Star   string      `json:"star"`
	Epoch  uint64      `json:"epoch"`
	Next   uint64      `json:"next"`
	Sealed bool        `json:"sealed,omitempty"`
	Spans  [][4]uint64 `json:"spans"`
	// Segment is the key of the segment holding the spans' bytes (format
	// 2 only), At the offset of the first span's bytes in that object.
	Segment string `json:"segment,omitempty"`
	At      uint64 `json:"at,omitempty"`
	// Time is when the newest span joined the page, in Unix nanoseconds
	// on the clock of the index that covered it; 0 when that index had
	// no clock (and on pages of earlier releases, which ignore it).
	// Retention by age reads it.
	Time int64 `json:"time,omitempty"`
}

func newPage(stream, star string, ep, first uint64) refPage {
	return refPage{RecordHeader: metastore.RecordHeader{Kind: pageKind, Format: flightPageFormat}, Stream: stream, First: first, Star: star, Epoch: ep, Next: first}
}

// add appends span s of the flight at slot.
func (p *refPage) add(slot uint64, s Span) {
	p.Spans = append(p.Spans, [4]uint64{s.Count, slot, s.Start, s.End})
	p.Next += s.Count
}

// holds reports whether the span of the flight at pos may go into p. A
// page of segments takes no more spans: its bytes are all in the segment.
func (p *refPage) holds(star string, pos chain.Position) bool {
	return !p.Sealed && p.Segment == "" && p.Star == star && p.Epoch == pos.Epoch && len(p.Spans) < PageSpans &&
		(len(p.Spans) == 0 || p.Spans[len(p.Spans)-1][1] < pos.Slot)
}

// find returns the ref that starts at or holds offset, which must lie in
// [First, Next).
func (p *refPage) find(offset uint64) Ref {
	at := p.First
	for _, sp := range p.Spans {
		if offset < at+sp[0] {
			return p.ref(at, sp)
		}
		at += sp[0]
	}
	panic(fmt.Sprintf("settle: offset %d outside page [%d, %d)", offset, p.First, p.Next))
}

func (p *refPage) ref(at uint64, sp [4]uint64) Ref {
	return Ref{RecordHeader: metastore.RecordHeader{Kind: refKind, Format: IndexFormat}, Stream: p.Stream, Offset: at, Count: sp[0],
		Star: p.Star, Epoch: p.Epoch, Slot: sp[1], Start: sp[2], End: sp[3]}
}

// refs returns the page's refs in offset order.
func (p *refPage) refs() []Ref {
	out := make([]Ref, 0, len(p.Spans))
	at := p.First
	for _, sp := range p.Spans {
		out = append(out, p.ref(at, sp))
		at += sp[0]
	}
	return out
}

// encode is compact JSON: a page is rewritten on every cover, and
// indentation would triple what each rewrite sends. The format follows
// from where the bytes are.
func (p *refPage) encode() ([]byte, error) {
	p.Format = flightPageFormat
	if p.Segment != "" {
		p.Format = segmentPageFormat
	}
	return json.Marshal(p)
}

func (x *RefIndex) pagePrefix(stream string) string { return x.root + "refpages/" + stream + "/" }

func (x *RefIndex) pageKey(stream string, first uint64) string {
	return x.pagePrefix(stream) + fmt.Sprintf("%020d", first)
}

// lastPageKey is the bound whose floor is a stream's last page.
func (x *RefIndex) lastPageKey(stream string) string {
	return x.pagePrefix(stream) + "99999999999999999999"
}

// decodePage decodes the page at kv, which must be one of stream's: a
// page whose key, stream, star, epoch or spans do not agree with each
// other is a *metastore.RecordError, never acted upon.
func (x *RefIndex) decodePage(kv metastore.KV, stream string) (refPage, error) {
	var p refPage
	if err := metastore.DecodeRecord(kv.Key, kv.Value, pageKind, pageFormat, &p); err != nil {
		return refPage{}, err
	}
	bad := func(format string, args ...any) (refPage, error) {
		return refPage{}, &metastore.RecordError{Key: kv.Key, Kind: pageKind, Reason: fmt.Sprintf(format, args...)}
	}
	first, err := strconv.ParseUint(strings.TrimPrefix(kv.Key, x.pagePrefix(stream)), 10, 64)
	switch {
	case err != nil || x.pageKey(stream, first) != kv.Key:
		return bad("key is not an offset of stream %s", stream)
	case p.Stream != stream || p.First != first:
		return bad("claims stream %q first offset %d", p.Stream, p.First)
	case epoch.ValidateName("star", p.Star) != nil:
		return bad("names no valid star: %q", p.Star)
	case p.Epoch == 0:
		return bad("epoch numbers start at 1")
	case len(p.Spans) == 0 || len(p.Spans) > PageSpans:
		return bad("holds %d spans (1 to %d)", len(p.Spans), PageSpans)
	case p.Format == flightPageFormat && (p.Segment != "" || p.At != 0):
		return bad("format %d names a segment", p.Format)
	case p.Format == segmentPageFormat && p.Segment == "":
		return bad("format %d names no segment", p.Format)
	}
	if p.Segment != "" {
		n, ok := parseSegmentKey(p.Segment)
		switch {
		case !ok:
			return bad("names no valid segment: %q", p.Segment)
		case n.Star != p.Star || n.Epoch != p.Epoch || n.Stream != stream:
			return bad("names segment %s of another stream or epoch", p.Segment)
		case p.First < n.First || p.Next > n.Next:
			return bad("offsets [%d, %d) lie outside its segment's [%d, %d)", p.First, p.Next, n.First, n.Next)
		case p.At < segmentHeaderLen(p.Segment):
			return bad("its bytes start at %d, inside the segment's header", p.At)
		}
	}
	at, bytesEnd := p.First, p.At
	for i, sp := range p.Spans {
		switch {
		case sp[0] == 0 || at+sp[0] < at:
			return bad("span %d covers %d offsets from %d", i, sp[0], at)
		case sp[2] > sp[3]:
			return bad("span %d's byte range [%d, %d) ends before it starts", i, sp[2], sp[3])
		case bytesEnd+(sp[3]-sp[2]) < bytesEnd:
			return bad("span %d's bytes end past the largest segment offset", i)
		case i > 0 && sp[1] <= p.Spans[i-1][1]:
			return bad("span %d's slot %d does not follow slot %d", i, sp[1], p.Spans[i-1][1])
		}
		at += sp[0]
		bytesEnd += sp[3] - sp[2]
	}
	if at != p.Next {
		return bad("says the stream goes on at %d, its spans end at %d", p.Next, at)
	}
	return p, nil
}
