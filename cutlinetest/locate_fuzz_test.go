package cutlinetest_test

import (
	"errors"
	"testing"

	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/settle"
)

// FuzzLocatePayload feeds arbitrary flight payloads to the reference
// host's Locator through RefIndex.Locate, as settlement reads every flight
// it covers. A refusal matches settle.ErrLocate; accepted spans pass
// CheckSpans, count exactly the records the payload parses to, and the
// payload re-encoded from those records locates to the same streams and
// offsets.
func FuzzLocatePayload(f *testing.F) {
	f.Add(cutlinetest.Record("orders", 7, "id-1"))
	f.Add(cutlinetest.Bundle(
		cutlinetest.BundleRecord{Stream: "orders", Offset: 7, ID: "a"},
		cutlinetest.BundleRecord{Stream: "orders", Offset: 8, ID: "b|c"},
		cutlinetest.BundleRecord{Stream: "billing", Offset: 0, ID: "\n"},
	))
	f.Add([]byte("bundle\norders|7|\"a\"\norders|9|\"b\"\n"))
	f.Add([]byte("bundle\norders|7|\"a\"\nbilling|1|\"b\"\norders|8|\"c\"\n"))
	f.Add([]byte("bundle\n"))
	f.Add([]byte("orders|18446744073709551615|x"))
	f.Add([]byte("../x|1|y"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		x, err := settle.NewRefIndex(memstore.New(memstore.Options{}), "", cutlinetest.Locate)
		if err != nil {
			t.Fatal(err)
		}
		spans, err := x.Locate(payload)
		if err != nil {
			if !errors.Is(err, settle.ErrLocate) {
				t.Fatalf("a refusal does not match ErrLocate: %v", err)
			}
			return
		}
		if err := settle.CheckSpans(payload, spans); err != nil {
			t.Fatalf("accepted spans fail CheckSpans: %v", err)
		}
		var recs []cutlinetest.BundleRecord
		var again []byte
		if recs, err = cutlinetest.ParseBundle(payload); err == nil {
			again = cutlinetest.Bundle(recs...)
		} else {
			stream, off, id, perr := cutlinetest.ParseRecord(payload)
			if perr != nil {
				t.Fatalf("located a payload that parses as neither a bundle (%v) nor a record (%v)", err, perr)
			}
			recs = []cutlinetest.BundleRecord{{Stream: stream, Offset: off, ID: id}}
			again = cutlinetest.Record(stream, off, id)
		}
		var n uint64
		for _, s := range spans {
			n += s.Count
		}
		if n != uint64(len(recs)) {
			t.Fatalf("spans %v count %d records, the payload holds %d", spans, n, len(recs))
		}
		spans2, err := x.Locate(again)
		if err != nil {
			t.Fatalf("the re-encoded payload %q does not locate: %v", again, err)
		}
		if len(spans2) != len(spans) {
			t.Fatalf("re-encoding changed the spans: %v, %v", spans, spans2)
		}
		for i := range spans {
			a, b := spans[i], spans2[i]
			if a.Stream != b.Stream || a.Offset != b.Offset || a.Count != b.Count {
				t.Fatalf("re-encoding changed span %d: %v, %v", i, a, b)
			}
		}
	})
}
