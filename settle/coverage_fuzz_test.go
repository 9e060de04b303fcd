package settle

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/mem"
)

const fuzzStream = "orders"

// fuzzIndex returns a RefIndex under "cl/" over a fresh store. Its Locator
// is never reached by what the targets call.
func fuzzIndex(t *testing.T) (*RefIndex, *mem.Store) {
	t.Helper()
	store := mem.New(mem.Options{})
	x, err := NewRefIndex(store, "cl/", func([]byte) ([]Span, error) {
		return nil, errors.New("the locator is not used here")
	})
	if err != nil {
		t.Fatal(err)
	}
	return x, store
}

// checkBadRecord checks a refusal of a stored coverage record: a
// *metastore.RecordError of kind at key matching ErrBadRecord.
func checkBadRecord(t *testing.T, err error, key, kind string) {
	t.Helper()
	var re *metastore.RecordError
	if !errors.As(err, &re) || !errors.Is(err, metastore.ErrBadRecord) {
		t.Fatalf("a bad %s is not a *metastore.RecordError matching ErrBadRecord: %v", kind, err)
	}
	if re.Key != key || re.Kind != kind || re.Reason == "" {
		t.Fatalf("the refusal does not name the record or the reason: %+v", re)
	}
}

// refsOf reads every ref of the stream with Refs, at most limit of them.
func refsOf(t *testing.T, x *RefIndex, limit int) ([]Ref, []error) {
	t.Helper()
	var refs []Ref
	var errs []error
	for r, err := range x.Refs(context.Background(), fuzzStream) {
		if len(refs)+len(errs) == limit {
			t.Fatalf("Refs yields more than the %d stored records", limit)
		}
		if err != nil {
			errs = append(errs, err)
		} else {
			refs = append(refs, r)
		}
	}
	return refs, errs
}

// FuzzRefRecord stores arbitrary bytes as the ref at an arbitrary offset
// and reads it with Lookup and Refs, as settlement, trimming and readers
// do. A refusal is a *metastore.RecordError from both; an accepted ref is
// the one its key names, points at a valid star and an epoch ≥ 1, and
// covers a valid span (at least one offset, no overflow, Start ≤ End);
// both reads agree, and re-encoding it gives a ref read back identically.
func FuzzRefRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"orders","offset":7,"count":3,"star":"star-a","epoch":2,"slot":9,"start":4,"end":40}`), uint64(7))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"orders","offset":18446744073709551615,"count":1,"star":"star-a","epoch":2,"slot":9}`), uint64(math.MaxUint64))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"orders","offset":18446744073709551615,"count":2,"star":"star-a","epoch":2,"slot":9}`), uint64(math.MaxUint64))
	f.Add([]byte(`{"kind":"ref","format":1,"stream":"orders","offset":7,"count":3,"star":"star-a","epoch":0,"slot":9}`), uint64(7))
	f.Add([]byte(`{"kind":"refhead","format":1,"stream":"orders","next":7}`), uint64(7))
	f.Fuzz(func(t *testing.T, value []byte, offset uint64) {
		ctx := context.Background()
		x, store := fuzzIndex(t)
		key := x.key(fuzzStream, offset)
		rev, err := metastore.Put(ctx, store, key, value, 0)
		if err != nil {
			t.Fatalf("the store refuses a value at %s: %v", key, err)
		}
		r, err := x.Lookup(ctx, fuzzStream, offset)
		refs, errs := refsOf(t, x, 1)
		if err != nil {
			checkBadRecord(t, err, key, refKind)
			if len(refs) != 0 {
				t.Fatalf("Refs accepts what Lookup refuses (%v): %+v", err, refs)
			}
			checkBadRecord(t, errs[0], key, refKind)
			return
		}
		if len(refs) != 1 || refs[0] != r {
			t.Fatalf("Lookup reads %+v, Refs %+v %v", r, refs, errs)
		}
		if r.Kind != refKind || r.Format != refFormat || r.Stream != fuzzStream || r.Offset != offset ||
			epoch.ValidateName("star", r.Star) != nil || r.Epoch == 0 || r.Span().check() != nil {
			t.Fatalf("accepted ref %+v at %s", r, key)
		}
		enc, err := metastore.EncodeRecord(&r)
		if err != nil {
			t.Fatalf("an accepted ref does not encode: %v", err)
		}
		back, err := decodeRef(metastore.KV{Key: key, Value: enc, Revision: rev}, fuzzStream, offset)
		if err != nil {
			t.Fatalf("the encoding of an accepted ref is refused: %v\n%s", err, enc)
		}
		if back != r {
			t.Fatalf("round trip changed the ref:\n%+v\n%+v", r, back)
		}
	})
}

// FuzzRefHead stores arbitrary bytes as a stream's head and reads it with
// Next and as CoverSpan does. A refusal is a *metastore.RecordError from
// both; with an accepted head n, a span starting at n is covered and moves
// the head to its end, one starting past n is a gap and one before n a
// double cover, and re-encoding the head gives one read back identically.
func FuzzRefHead(f *testing.F) {
	f.Add([]byte(`{"kind":"refhead","format":1,"stream":"orders","next":7}`))
	f.Add([]byte(`{"kind":"refhead","format":1,"stream":"orders","next":0}`))
	f.Add([]byte(`{"kind":"refhead","format":1,"stream":"orders","next":18446744073709551615}`))
	f.Add([]byte(`{"kind":"refhead","format":1,"stream":"billing","next":7}`))
	f.Add([]byte(`{"kind":"refhead","format":1,"stream":"orders","next":-7}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		ctx := context.Background()
		x, store := fuzzIndex(t)
		key := x.headKey(fuzzStream)
		rev, err := metastore.Put(ctx, store, key, value, 0)
		if err != nil {
			t.Fatalf("the store refuses a value at %s: %v", key, err)
		}
		next, err := x.Next(ctx, fuzzStream)
		pos := chain.Position{Epoch: 1, Slot: 0}
		cover := func(offset uint64) error {
			return x.CoverSpan(ctx, "star-a", pos, Span{Stream: fuzzStream, Offset: offset, Count: 1, Start: 0, End: 1})
		}
		if err != nil {
			checkBadRecord(t, err, key, headKind)
			checkBadRecord(t, cover(0), key, headKind)
			return
		}
		n, hrev, err := x.head(ctx, fuzzStream)
		if err != nil || n != next || hrev != rev {
			t.Fatalf("head reads %d at %d (%v), Next %d, stored at %d", n, hrev, err, next, rev)
		}
		enc, err := metastore.EncodeRecord(&refHead{Header: metastore.Header{Kind: headKind, Format: headFormat}, Stream: fuzzStream, Next: next})
		if err != nil {
			t.Fatal(err)
		}
		y, ystore := fuzzIndex(t)
		if _, err := metastore.Put(ctx, ystore, key, enc, 0); err != nil {
			t.Fatal(err)
		}
		if back, err := y.Next(ctx, fuzzStream); err != nil || back != next {
			t.Fatalf("round trip changed the head from %d to %d (%v)", next, back, err)
		}
		if next > 0 {
			if err := cover(next - 1); !errors.Is(err, ErrDoubleCover) {
				t.Fatalf("a span before head %d: %v", next, err)
			}
		}
		if next < math.MaxUint64-1 {
			if err := cover(next + 1); !errors.Is(err, ErrGap) {
				t.Fatalf("a span past head %d: %v", next, err)
			}
		}
		err = cover(next)
		if next == math.MaxUint64 {
			if !errors.Is(err, ErrLocate) {
				t.Fatalf("a span past the offset space at head %d: %v", next, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("a span at head %d: %v", next, err)
		}
		if moved, err := x.Next(ctx, fuzzStream); err != nil || moved != next+1 {
			t.Fatalf("covering [%d, %d) moved the head to %d (%v)", next, next+1, moved, err)
		}
		if r, err := x.Lookup(ctx, fuzzStream, next); err != nil || r.Offset != next || r.Count != 1 || r.Star != "star-a" || r.Position() != pos {
			t.Fatalf("the ref covered at %d reads %+v, %v", next, r, err)
		}
	})
}

// FuzzRefKey stores a valid ref of offset 7 under an arbitrary key below
// the stream's ref prefix, as a listing finds it. Refs accepts it exactly
// when the key is the canonical key of offset 7; any other key is refused
// with a *metastore.RecordError, never read as another offset.
func FuzzRefKey(f *testing.F) {
	f.Add("00000000000000000007")
	f.Add("7")
	f.Add("00000000000000000008")
	f.Add("+0000000000000000007")
	f.Add("00000000000000000007/x")
	f.Add("99999999999999999999")
	valid := []byte(`{"kind":"ref","format":1,"stream":"orders","offset":7,"count":1,"star":"star-a","epoch":1,"slot":0}`)
	f.Fuzz(func(t *testing.T, suffix string) {
		ctx := context.Background()
		x, store := fuzzIndex(t)
		key := x.prefix(fuzzStream) + suffix
		if _, err := metastore.Put(ctx, store, key, valid, 0); err != nil {
			if !errors.Is(err, metastore.ErrInvalidKey) {
				t.Fatalf("the store refuses a ref at %q: %v", key, err)
			}
			return // a key the store refuses is never listed
		}
		refs, errs := refsOf(t, x, 1)
		canonical := key == x.key(fuzzStream, 7)
		switch {
		case canonical && len(refs) != 1:
			t.Fatalf("the ref at its own key is refused: %v", errs)
		case !canonical && len(refs) != 0:
			t.Fatalf("a ref at %q is read as offset %d", suffix, refs[0].Offset)
		case !canonical:
			checkBadRecord(t, errs[0], key, refKind)
		}
		if canonical && (refs[0].Offset != 7 || refs[0].Stream != fuzzStream) {
			t.Fatalf("the ref at %q reads as %+v", key, refs[0])
		}
	})
}
