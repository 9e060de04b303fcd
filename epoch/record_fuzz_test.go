package epoch_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

const fuzzStar = "star-a"

// storeAt returns a Minter over a fresh store holding value at the key
// key(m), or false when the store refuses the key as invalid.
func storeAt(t *testing.T, key func(*epoch.Minter) string, value []byte) (*epoch.Minter, metastore.Store, int64, bool) {
	t.Helper()
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := metastore.Put(context.Background(), store, key(m), value, 0)
	if errors.Is(err, metastore.ErrInvalidKey) {
		return nil, nil, 0, false
	}
	if err != nil {
		t.Fatalf("the store refuses a value at %s: %v", key(m), err)
	}
	return m, store, rev, true
}

// checkBad checks that err refuses a stored record the typed way.
func checkBad(t *testing.T, err error, what string) {
	t.Helper()
	var re *metastore.RecordError
	if !errors.As(err, &re) || !errors.Is(err, metastore.ErrBadRecord) || re.Reason == "" {
		t.Fatalf("a bad %s is not a *metastore.RecordError matching ErrBadRecord: %v", what, err)
	}
}

// encodeRecord encodes v as the library stores it.
func encodeRecord(t *testing.T, v any) []byte {
	t.Helper()
	b, err := metastore.EncodeRecord(v)
	if err != nil {
		t.Fatalf("an accepted record does not encode: %v", err)
	}
	return b
}

// FuzzEpochRecord stores arbitrary bytes as the record of an arbitrary
// epoch number and reads it back with Get and with Epochs (the listing
// every successor and operator reads). A refusal is a *RecordError; an
// accepted record keeps every rule the library relies on (its own
// coordinates, a known state, valid constants, trimmed and rewritten ≤
// checkpoint, checkpoint ≤ cut once fenced, no cut while open, no claim),
// both reads agree, and re-encoding it gives a record that is read back
// identically.
func FuzzEpochRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"epoch","format":1,"star":"star-a","epoch":1,"constants":{"class":"standard","buckets":["zone-a","zone-b","zone-c"],"w":2,"window":8},"state":"open","cut":0,"cursors":{"checkpoint":0,"trimmed":0,"rewritten":0},"minted_at":"2026-01-02T03:04:05Z","writer":"w-1"}`), uint64(1))
	f.Add([]byte(`{"kind":"epoch","format":1,"star":"star-a","epoch":7,"constants":{"class":"express","buckets":["fast-a"],"w":1,"window":4,"prefix":"data/v1"},"state":"fenced","cut":9,"cursors":{"checkpoint":9,"trimmed":3,"rewritten":9},"minted_at":"2026-01-02T03:04:05Z","fenced_at":"2026-01-02T03:05:05+02:00"}`), uint64(7))
	f.Add([]byte(`{"kind":"epoch","format":1,"star":"star-a","epoch":1,"constants":{"class":"standard","buckets":["a"],"w":1,"window":1},"state":"settled","cut":2,"cursors":{"checkpoint":3}}`), uint64(1))
	f.Add([]byte(`{"kind":"epoch","format":2}`), uint64(1))
	f.Add([]byte(`{"kind":"chain","format":1}`), uint64(18446744073709551615))
	f.Add([]byte(`not json`), uint64(0))
	f.Fuzz(func(t *testing.T, value []byte, n uint64) {
		ctx := context.Background()
		m, _, rev, ok := storeAt(t, func(m *epoch.Minter) string { return m.RecordKey(fuzzStar, n) }, value)
		if !ok {
			t.Fatalf("the store refuses the key of epoch %d", n)
		}
		r, err := m.Get(ctx, fuzzStar, n)
		listed, lerr := listOne(t, m)
		if err != nil {
			checkBad(t, err, "epoch record")
			if r != nil {
				t.Fatalf("record %v returned with %v", r, err)
			}
			if lerr == nil {
				t.Fatalf("Epochs accepts what Get refuses (%v): %v", err, listed)
			}
			checkBad(t, lerr, "listed epoch record")
			return
		}
		if lerr != nil {
			t.Fatalf("Epochs refuses what Get accepts: %v", lerr)
		}
		checkRecordRules(t, r, n)
		if r.Revision != rev {
			t.Fatalf("read at revision %d, stored at %d", r.Revision, rev)
		}
		enc := encodeRecord(t, r)
		if got := encodeRecord(t, listed); !bytes.Equal(got, enc) {
			t.Fatalf("Get and Epochs disagree:\n%s\n%s", enc, got)
		}
		m2, _, _, ok := storeAt(t, func(m *epoch.Minter) string { return m.RecordKey(fuzzStar, n) }, enc)
		if !ok {
			t.Fatalf("the store refuses the encoding of an accepted record:\n%s", enc)
		}
		back, err := m2.Get(ctx, fuzzStar, n)
		if err != nil {
			t.Fatalf("the encoding of an accepted record is refused: %v\n%s", err, enc)
		}
		if got := encodeRecord(t, back); !bytes.Equal(got, enc) {
			t.Fatalf("round trip changed the record:\n%s\n%s", enc, got)
		}
	})
}

// listOne reads the single record stored under the star with Epochs.
func listOne(t *testing.T, m *epoch.Minter) (*epoch.Record, error) {
	t.Helper()
	var got []*epoch.Record
	var errs []error
	for r, err := range m.Epochs(context.Background(), fuzzStar) {
		if len(got)+len(errs) > 1 {
			t.Fatalf("Epochs yields more than the one stored record")
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, r)
	}
	switch {
	case len(errs) == 1:
		return nil, errs[0]
	case len(got) == 1:
		return got[0], nil
	}
	t.Fatalf("Epochs yields nothing for one stored record")
	return nil, nil
}

// checkRecordRules checks the invariants of an accepted epoch record.
func checkRecordRules(t *testing.T, r *epoch.Record, n uint64) {
	t.Helper()
	c := r.Cursors
	switch {
	case r.Kind != "epoch" || r.Format != 1:
		t.Fatalf("accepted kind %q format %d", r.Kind, r.Format)
	case r.Star != fuzzStar || r.Epoch != n || n == 0:
		t.Fatalf("accepted a record claiming %s/%d at %s/%d", r.Star, r.Epoch, fuzzStar, n)
	case r.Constants.Validate() != nil:
		t.Fatalf("accepted invalid constants: %v", r.Constants.Validate())
	case r.State != epoch.StateOpen && r.State != epoch.StateFenced && r.State != epoch.StateSettled:
		t.Fatalf("accepted state %q", r.State)
	case r.State == epoch.StateOpen && r.Cut != 0:
		t.Fatalf("accepted an open record with cut %d", r.Cut)
	case c.Trimmed > c.Checkpoint || c.Rewritten > c.Checkpoint:
		t.Fatalf("accepted cursors out of order: %+v", c)
	case r.Fenced() && c.Checkpoint > r.Cut:
		t.Fatalf("accepted checkpoint %d past cut %d", c.Checkpoint, r.Cut)
	}
	if _, err := r.Claim(); !errors.Is(err, epoch.ErrNotMinted) {
		t.Fatalf("a decoded record carries a claim: %v", err)
	}
}

// FuzzChainCounter stores arbitrary bytes as a star's counter record,
// chains/<star>, and reads it back with Chain. A refusal is a
// *RecordError; an accepted counter names the star, has Next ≥ 1, every
// class head below Next and the settlement cursor at most Next, and
// re-encoding it gives a counter that is read back identically.
func FuzzChainCounter(f *testing.F) {
	f.Add([]byte(`{"kind":"chain","format":1,"star":"star-a","next":3,"heads":{"standard":2},"unsettled":2}`))
	f.Add([]byte(`{"kind":"chain","format":1,"star":"star-a","next":1}`))
	f.Add([]byte(`{"kind":"chain","format":1,"star":"star-a","next":2,"heads":{"standard":2}}`))
	f.Add([]byte(`{"kind":"chain","format":1,"star":"star-a","next":2,"unsettled":3}`))
	f.Add([]byte(`{"kind":"chain","format":1,"star":"star-a","next":18446744073709551615,"heads":{"a":18446744073709551614}}`))
	f.Add([]byte(`{"kind":"chain","format":2}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		ctx := context.Background()
		m, _, rev, ok := storeAt(t, func(m *epoch.Minter) string { return m.ChainKey(fuzzStar) }, value)
		if !ok {
			t.Fatalf("the store refuses the counter's key")
		}
		ch, err := m.Chain(ctx, fuzzStar)
		if err != nil {
			checkBad(t, err, "counter")
			if ch != nil {
				t.Fatalf("counter %+v returned with %v", ch, err)
			}
			return
		}
		if ch.Kind != "chain" || ch.Format != 1 || ch.Star != fuzzStar || ch.Next < 1 || ch.Unsettled > ch.Next || ch.Heads == nil || ch.Revision != rev {
			t.Fatalf("accepted counter %+v (stored at revision %d)", ch, rev)
		}
		for class, head := range ch.Heads {
			if head >= ch.Next {
				t.Fatalf("accepted head %d of %q at or past next %d", head, class, ch.Next)
			}
		}
		enc := encodeRecord(t, ch)
		m2, _, _, ok := storeAt(t, func(m *epoch.Minter) string { return m.ChainKey(fuzzStar) }, enc)
		if !ok {
			t.Fatalf("the store refuses the encoding of an accepted counter:\n%s", enc)
		}
		back, err := m2.Chain(ctx, fuzzStar)
		if err != nil {
			t.Fatalf("the encoding of an accepted counter is refused: %v\n%s", err, enc)
		}
		if got := encodeRecord(t, back); !bytes.Equal(got, enc) {
			t.Fatalf("round trip changed the counter:\n%s\n%s", enc, got)
		}
	})
}

// FuzzEpochKey stores a valid record of epoch 1 under an arbitrary key
// below the star's chain prefix, as a listing finds it. Epochs accepts it
// exactly when the key is the canonical key of epoch 1; any other key is
// refused with a *RecordError, never read as another epoch.
func FuzzEpochKey(f *testing.F) {
	f.Add("00000000000000000001")
	f.Add("1")
	f.Add("00000000000000000002")
	f.Add("+0000000000000000001")
	f.Add("00000000000000000001/x")
	f.Add("99999999999999999999")
	valid := []byte(`{"kind":"epoch","format":1,"star":"star-a","epoch":1,"constants":{"class":"standard","buckets":["a"],"w":1,"window":1},"state":"open","cursors":{}}`)
	f.Fuzz(func(t *testing.T, suffix string) {
		m, _, _, ok := storeAt(t, func(m *epoch.Minter) string { return m.ChainKey(fuzzStar) + "/" + suffix }, valid)
		if !ok {
			return // a key the store refuses is never listed
		}
		canonical := m.ChainKey(fuzzStar)+"/"+suffix == m.RecordKey(fuzzStar, 1)
		r, err := listOne(t, m)
		switch {
		case canonical && err != nil:
			t.Fatalf("the record at its own key is refused: %v", err)
		case !canonical && err == nil:
			t.Fatalf("a record at %q is read as epoch %d", suffix, r.Epoch)
		case err != nil:
			checkBad(t, err, "epoch key")
		}
	})
}
