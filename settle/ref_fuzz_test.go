package settle_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/settle"
)

// FuzzRefDecode stores arbitrary bytes where a ref page lives: reading it
// back through the index never panics, and anything it accepts is a page
// of the stream its key names, starting at the key's offset, whose refs
// tile [7, Next) and agree between Find, Refs and Next.
func FuzzRefDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"star-a","epoch":1,"next":8,"spans":[[1,3,0,1]]}`))
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"star-a","epoch":1,"next":10,"spans":[[1,3,0,1],[2,4,5,9]]}`))
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"other","first":7,"star":"star-a","epoch":1,"next":8,"spans":[[1,3,0,1]]}`))
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"star-a","epoch":1,"next":7,"spans":[[0,3,0,1]]}`))
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"../x","epoch":1,"next":8,"spans":[[1,3,0,1]]}`))
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"star-a","epoch":1,"next":8,"spans":[[1,3,9,4]]}`))
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"star-a","epoch":1,"next":6,"spans":[[18446744073709551615,3,0,1]]}`))
	f.Add([]byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"star-a","epoch":1,"next":8,"sealed":true,"spans":[[1,3,0,1]]}`))
	f.Add([]byte(`{"kind":"refpage","format":2}`))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"s","offset":7,"count":1,"star":"star-a","epoch":1,"slot":3}`))
	f.Add([]byte("not json"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, value []byte) {
		ctx := context.Background()
		store := memstore.New(memstore.Options{})
		x, err := settle.NewRefIndex(store, "", locate)
		if err != nil {
			t.Fatal(err)
		}
		key := "refpages/s/00000000000000000007"
		if _, err := metastore.Put(ctx, store, key, value, 0); err != nil {
			return // the store refuses the value itself
		}
		next, nerr := x.Next(ctx, "s")
		r, err := x.Find(ctx, "s", 7)
		if err != nil {
			if !errors.Is(err, metastore.ErrBadRecord) {
				t.Fatalf("a bad page is not ErrBadRecord: %v", err)
			}
			if nerr == nil {
				t.Fatalf("Next accepts what Find refuses (%v)", err)
			}
			return
		}
		if r.Stream != "s" || r.Offset != 7 || r.Count == 0 || r.Epoch == 0 || epoch.ValidateName("star", r.Star) != nil || r.Start > r.End {
			t.Fatalf("accepted a ref that is not the one its key names: %+v", r)
		}
		at := uint64(7)
		var refErr error
		for got, err := range x.Refs(ctx, "s") {
			if err != nil {
				refErr = err
				break
			}
			if got.Offset != at || got.Count == 0 || got.Offset+got.Count < got.Offset {
				t.Fatalf("Refs does not tile from 7: %+v at %d", got, at)
			}
			at += got.Count
		}
		if nerr == nil && refErr == nil && at != next {
			t.Fatalf("Refs end at %d, Next says %d", at, next)
		}
		if (nerr == nil) != (refErr == nil) {
			t.Fatalf("Next (%v) and Refs (%v) disagree on the page", nerr, refErr)
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

// FuzzRefPageKey stores a valid page of first offset 7 under an arbitrary
// key below the stream's page prefix, as a listing finds it. Refs accepts
// it exactly when the key is the canonical key of offset 7; any other key
// is refused with a *metastore.RecordError, never read as another offset.
func FuzzRefPageKey(f *testing.F) {
	for _, s := range []string{"00000000000000000007", "7", "00000000000000000008", "+0000000000000000007", "00000000000000000007/x", "99999999999999999999", ""} {
		f.Add(s)
	}
	valid := []byte(`{"kind":"refpage","format":1,"stream":"s","first":7,"star":"star-a","epoch":1,"next":8,"spans":[[1,3,0,1]]}`)
	f.Fuzz(func(t *testing.T, suffix string) {
		ctx := context.Background()
		store := memstore.New(memstore.Options{})
		x, err := settle.NewRefIndex(store, "", locate)
		if err != nil {
			t.Fatal(err)
		}
		key := "refpages/s/" + suffix
		if _, err := metastore.Put(ctx, store, key, valid, 0); err != nil {
			if !errors.Is(err, metastore.ErrInvalidKey) {
				t.Fatalf("the store refuses a page at %q: %v", key, err)
			}
			return // a key the store refuses is never listed
		}
		canonical := suffix == "00000000000000000007"
		var refs []settle.Ref
		var errs []error
		for r, err := range x.Refs(ctx, "s") {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			refs = append(refs, r)
		}
		switch {
		case canonical && (len(refs) != 1 || refs[0].Offset != 7 || len(errs) != 0):
			t.Fatalf("the page at its own key reads as %+v %v", refs, errs)
		case !canonical && len(refs) != 0:
			t.Fatalf("a page at %q is read as offset %d", suffix, refs[0].Offset)
		case !canonical && (len(errs) != 1 || !errors.Is(errs[0], metastore.ErrBadRecord)):
			t.Fatalf("a page at %q is not refused as a bad record: %v", suffix, errs)
		}
	})
}
