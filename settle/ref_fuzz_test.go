package settle_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	memstore "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/settle"
)

// FuzzRefDecode stores arbitrary bytes where a ref lives: reading it back
// through the index never panics, and anything it accepts is exactly the
// ref its key names.
func FuzzRefDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":1,"star":"star-a","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"other","offset":7,"count":1,"star":"star-a","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":0,"star":"star-a","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":1,"star":"../x","epoch":1,"slot":3}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":2,"star":"star-a","epoch":1,"slot":3,"start":4,"end":9}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":2,"star":"star-a","epoch":1,"slot":3,"start":9,"end":4}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":2,"star":"star-a","epoch":1,"slot":3,"start":-1,"end":4}`))
	f.Add([]byte(`{"kind":"ref","format":2}`))
	f.Add([]byte(`{"kind":"epoch","format":1}`))
	f.Add([]byte("not json"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, value []byte) {
		ctx := context.Background()
		store := memstore.New(memstore.Options{})
		x, err := settle.NewRefIndex(store, "", locate)
		if err != nil {
			t.Fatal(err)
		}
		key := "refs/s/00000000000000000007"
		if _, err := metastore.Put(ctx, store, key, value, 0); err != nil {
			return // the store refuses the value itself
		}
		r, err := x.Lookup(ctx, "s", 7)
		if err != nil {
			if !errors.Is(err, metastore.ErrBadRecord) {
				t.Fatalf("a bad ref is not ErrBadRecord: %v", err)
			}
			return
		}
		if r.Stream != "s" || r.Offset != 7 || r.Count == 0 || r.Epoch == 0 || r.Star == "" || r.Start > r.End {
			t.Fatalf("accepted a ref that is not the one its key names: %+v", r)
		}
		for got, err := range x.Refs(ctx, "s") {
			if err != nil || got != r {
				t.Fatalf("Refs disagrees with Lookup: %+v, %v", got, err)
			}
		}
	})
}

// FuzzCheckSpans checks CheckSpans against a plain statement of its rules
// on spans decoded from the fuzzer's bytes: it never panics, accepts
// exactly the valid sets of spans, and every refusal matches ErrLocate.
func FuzzCheckSpans(f *testing.F) {
	f.Add(uint8(10), []byte{0, 0, 1, 0, 10})
	f.Add(uint8(10), []byte{0, 0, 1, 0, 5, 1, 0, 1, 5, 10})
	f.Add(uint8(10), []byte{0, 0, 1, 0, 5, 1, 0, 1, 4, 10})
	f.Add(uint8(10), []byte{0, 0, 1, 0, 5, 0, 1, 1, 5, 10})
	f.Add(uint8(4), []byte{2, 255, 1, 0, 4})
	f.Add(uint8(4), []byte{3, 0, 0, 0, 4})
	f.Add(uint8(4), []byte{0, 0, 1, 3, 2})
	f.Add(uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, size uint8, data []byte) {
		payload := make([]byte, size)
		streams := []string{"a", "b", "c", "../bad"}
		var spans []settle.Span
		for ; len(data) >= 5; data = data[5:] {
			off := uint64(data[1])
			if off >= 250 {
				off = math.MaxUint64 - uint64(255-data[1]) // near the end of the offset space
			}
			spans = append(spans, settle.Span{Stream: streams[data[0]%4], Offset: off, Count: uint64(data[2] % 4),
				Start: uint64(data[3] % 16), End: uint64(data[4] % 16)})
		}
		err := settle.CheckSpans(payload, spans)
		if want := validSpans(payload, spans); (err == nil) != want {
			t.Fatalf("CheckSpans(%d bytes, %v) = %v, want valid %v", len(payload), spans, err, want)
		}
		if err != nil && !errors.Is(err, settle.ErrLocate) {
			t.Fatalf("a refusal is not ErrLocate: %v", err)
		}
	})
}

// validSpans states CheckSpans's rules one by one, pair by pair.
func validSpans(payload []byte, spans []settle.Span) bool {
	if len(spans) == 0 {
		return false
	}
	for i, s := range spans {
		if epoch.ValidateName("stream", s.Stream) != nil || s.Count == 0 || s.Offset > math.MaxUint64-s.Count ||
			s.Start > s.End || s.End > uint64(len(payload)) {
			return false
		}
		for _, o := range spans[:i] {
			if o.Stream == s.Stream || max(o.Start, s.Start) < min(o.End, s.End) {
				return false
			}
		}
	}
	return true
}
