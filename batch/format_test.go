package batch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/settle"
)

func sample(t testing.TB) []byte {
	t.Helper()
	p, err := batch.Encode([]batch.Stream{
		{Name: "orders", Offset: 7, Records: [][]byte{[]byte("first"), {}, []byte("third")}},
		{Name: "audit", Offset: 0, Records: [][]byte{[]byte("x")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	p := sample(t)
	spans, err := batch.Locate(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := settle.CheckSpans(p, spans); err != nil {
		t.Fatalf("the spans fail settle's checks: %v", err)
	}
	if len(spans) != 2 || spans[0].Stream != "orders" || spans[0].Offset != 7 || spans[0].Count != 3 ||
		spans[1].Stream != "audit" || spans[1].Count != 1 || spans[0].End != spans[1].Start || spans[1].End != uint64(len(p)) {
		t.Fatalf("spans %v", spans)
	}
	recs, err := batch.Entries(p, "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := []batch.Entry{{Offset: 7, Data: []byte("first")}, {Offset: 8, Data: []byte{}}, {Offset: 9, Data: []byte("third")}}
	if len(recs) != len(want) {
		t.Fatalf("records %v", recs)
	}
	for i := range want {
		if recs[i].Offset != want[i].Offset || !bytes.Equal(recs[i].Data, want[i].Data) {
			t.Fatalf("record %d: %v, want %v", i, recs[i], want[i])
		}
	}
	// A span's bytes alone decode it.
	sec := p[spans[1].Start:spans[1].End]
	s := spans[1]
	s.Start, s.End = 0, uint64(len(sec))
	if recs, err := batch.SpanEntries(sec, s); err != nil || len(recs) != 1 || string(recs[0].Data) != "x" {
		t.Fatalf("the audit section alone: %v %v", recs, err)
	}
	var seq []string
	for r, err := range batch.SpanSeq(p, spans[0]) {
		if err != nil {
			t.Fatal(err)
		}
		seq = append(seq, fmt.Sprintf("%d=%s", r.Offset, r.Data))
	}
	if fmt.Sprint(seq) != "[7=first 8= 9=third]" {
		t.Fatalf("SpanSeq yields %q", seq)
	}
	if recs, err := batch.Entries(p, "absent"); err != nil || recs != nil {
		t.Fatalf("a stream the bundle does not carry: %v %v", recs, err)
	}
}

func TestEncodeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []batch.Stream
		want error
	}{
		"none":       {nil, batch.ErrInput},
		"no records": {[]batch.Stream{{Name: "a"}}, batch.ErrInput},
		"twice":      {[]batch.Stream{{Name: "a", Records: [][]byte{nil}}, {Name: "a", Records: [][]byte{nil}}}, batch.ErrInput},
		"bad name":   {[]batch.Stream{{Name: "a/b", Records: [][]byte{nil}}}, cutline.ErrInvalid},
		"overflow":   {[]batch.Stream{{Name: "a", Offset: 1<<64 - 1, Records: [][]byte{nil, nil}}}, batch.ErrInput},
		"too many":   {make([]batch.Stream, batch.MaxSpans+1), batch.ErrInput},
	} {
		if _, err := batch.Encode(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// Hostile bundles: each is refused with a *FormatError, never a panic.
func TestHostileBundles(t *testing.T) {
	good := sample(t)
	uv := func(b []byte, vs ...uint64) []byte {
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	head := []byte("CLB\x01")
	entry := func(b []byte, name string, off, count, sec uint64) []byte {
		b = uv(b, uint64(len(name)))
		b = append(b, name...)
		return uv(b, off, count, sec)
	}
	cases := map[string][]byte{
		"empty":             nil,
		"short":             []byte("CL"),
		"magic":             []byte("XLB\x01\x01"),
		"version":           []byte("CLB\x02\x01"),
		"no spans":          uv(bytes.Clone(head), 0),
		"huge span count":   uv(bytes.Clone(head), 1<<62),
		"varint overflow":   append(bytes.Clone(head), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"truncated varint":  append(bytes.Clone(head), 0x80),
		"name past end":     append(uv(bytes.Clone(head), 1, 200), "ab"...),
		"bad name":          append(entry(uv(bytes.Clone(head), 1), "a b", 0, 1, 1), 0),
		"zero count":        append(entry(uv(bytes.Clone(head), 1), "a", 0, 0, 1), 0),
		"offset overflow":   append(entry(uv(bytes.Clone(head), 1), "a", 1<<64-1, 2, 2), 0, 0),
		"section too small": append(entry(uv(bytes.Clone(head), 1), "a", 0, 3, 2), 0, 0),
		"section past end":  append(entry(uv(bytes.Clone(head), 1), "a", 0, 1, 1<<40), 0),
		"bytes left over":   append(entry(uv(bytes.Clone(head), 1), "a", 0, 1, 1), 0, 0),
		"record past end":   append(entry(uv(bytes.Clone(head), 1), "a", 0, 1, 2), 5, 'x'),
		"record huge":       append(entry(uv(bytes.Clone(head), 1), "a", 0, 1, 11), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'x'),
		"records short":     append(entry(uv(bytes.Clone(head), 1), "a", 0, 2, 3), 0, 0, 'x'),
		"records long":      append(entry(uv(bytes.Clone(head), 1), "a", 0, 1, 3), 1, 'x', 'y'),
		"stream twice":      append(entry(entry(uv(bytes.Clone(head), 2), "a", 0, 1, 1), "a", 1, 1, 1), 0, 0),
		"sections overlap":  append(entry(entry(uv(bytes.Clone(head), 2), "a", 0, 1, 2), "b", 0, 1, 1<<63), 1, 'x', 0),
		"truncated":         good[:len(good)-1],
		"extended":          append(bytes.Clone(good), 0),
	}
	for name, p := range cases {
		spans, err := batch.Locate(p)
		var fe *batch.FormatError
		if !errors.As(err, &fe) || !errors.Is(err, batch.ErrFormat) {
			t.Errorf("%s: Locate %x: %v, %v; want a *FormatError", name, p, spans, err)
		}
		if _, err := batch.Entries(p, "a"); !errors.Is(err, batch.ErrFormat) {
			t.Errorf("%s: Records: %v", name, err)
		}
	}
	// Spans that do not match their bytes.
	for _, s := range []settle.Span{
		{Stream: "orders", Offset: 7, Count: 3, Start: 0, End: uint64(len(good)) + 1},
		{Stream: "orders", Offset: 7, Count: 3, Start: 5, End: 4},
		{Stream: "orders", Offset: 7, Count: 1 << 40, Start: 0, End: uint64(len(good))},
		{Stream: "orders", Offset: 1<<64 - 1, Count: 2, Start: 0, End: 4},
		{Stream: "orders", Offset: 7, Count: 2, Start: uint64(len(good)) - 3, End: uint64(len(good))},
	} {
		if _, err := batch.SpanEntries(good, s); !errors.Is(err, batch.ErrFormat) {
			t.Errorf("SpanEntries(%v): %v", s, err)
		}
		n := 0
		for _, err := range batch.SpanSeq(good, s) {
			if n++; !errors.Is(err, batch.ErrFormat) || n > 1 {
				t.Errorf("SpanSeq(%v): %v (item %d)", s, err, n)
			}
		}
	}
}

// FuzzLocate: any bytes either decode to spans that pass settle's checks
// and whose records decode, or are refused with ErrFormat; nothing
// panics. A bundle that decodes encodes back to the same bytes.
func FuzzLocate(f *testing.F) {
	f.Add(sample(f))
	f.Add([]byte("CLB\x01\x01\x01a\x00\x01\x01\x00"))
	f.Add([]byte("CLB\x01\x02\x01a\x00\x01\x02\x01b\x05\x02\x03\x01x\x00\x01y"))
	f.Fuzz(func(t *testing.T, p []byte) {
		spans, err := batch.Locate(p)
		if err != nil {
			if !errors.Is(err, batch.ErrFormat) {
				t.Fatalf("Locate: an error that is not ErrFormat: %v", err)
			}
			return
		}
		if err := settle.CheckSpans(p, spans); err != nil {
			t.Fatalf("spans %v fail settle's checks: %v", spans, err)
		}
		var streams []batch.Stream
		for _, s := range spans {
			recs, err := batch.SpanEntries(p, s)
			if err != nil || uint64(len(recs)) != s.Count {
				t.Fatalf("span %v: %d records, %v", s, len(recs), err)
			}
			st := batch.Stream{Name: s.Stream, Offset: s.Offset}
			i := 0
			for r, err := range batch.SpanSeq(p, s) {
				if err != nil || r.Offset != recs[i].Offset || !bytes.Equal(r.Data, recs[i].Data) {
					t.Fatalf("span %v: SpanSeq yields %v, %v at %d; SpanEntries %v", s, r, err, i, recs[i])
				}
				st.Records = append(st.Records, r.Data)
				i++
			}
			streams = append(streams, st)
		}
		again, err := batch.Encode(streams)
		if err != nil {
			t.Fatalf("encode what decoded: %v", err)
		}
		if !bytes.Equal(again, p) {
			// Varints may be written longer than needed; the decoding
			// must agree all the same.
			spans2, err := batch.Locate(again)
			if err != nil || fmt.Sprint(spansNoBytes(spans2)) != fmt.Sprint(spansNoBytes(spans)) {
				t.Fatalf("re-encoded bundle decodes to %v (%v), want %v", spans2, err, spans)
			}
		}
	})
}

func spansNoBytes(spans []settle.Span) []settle.Span {
	out := make([]settle.Span, len(spans))
	for i, s := range spans {
		s.Start, s.End = 0, 0
		out[i] = s
	}
	return out
}
