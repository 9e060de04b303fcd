package lease

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

const fuzzStream = "orders"

var fuzzKeys = keys{root: "cl/"}

// readBack stores value at key in a fresh store and reads it back: the
// stored KV, as the gate reads it, and the stream's state as Inspect
// reports it.
func readBack(t *testing.T, key string, value []byte) (metastore.KV, StreamState, error) {
	t.Helper()
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	if _, err := metastore.Put(ctx, store, key, value, 0); err != nil {
		t.Fatalf("the store refuses a value at %s: %v", key, err)
	}
	kv, err := store.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	st, err := Inspect(ctx, store, fuzzKeys.root, fuzzStream)
	return kv, st, err
}

// checkRefusal checks that the decoder and Inspect both refuse the record
// at key the typed way: a *metastore.RecordError of kind matching
// ErrBadRecord.
func checkRefusal(t *testing.T, err, inspectErr error, key, kind string) {
	t.Helper()
	var re *metastore.RecordError
	if !errors.As(err, &re) || !errors.Is(err, metastore.ErrBadRecord) {
		t.Fatalf("a bad %s record is not a *metastore.RecordError matching ErrBadRecord: %v", kind, err)
	}
	if re.Key != key || re.Kind != kind || re.Reason == "" {
		t.Fatalf("the refusal does not name the record or the reason: %+v", re)
	}
	if !errors.Is(inspectErr, metastore.ErrBadRecord) || !errors.As(inspectErr, &re) {
		t.Fatalf("Inspect does not refuse what the decoder refuses (%v): %v", err, inspectErr)
	}
}

// sameEncoding fails unless a and b encode to the same record.
func sameEncoding(t *testing.T, what string, a, b any) []byte {
	t.Helper()
	ea, err := encode(a)
	if err != nil {
		t.Fatalf("an accepted %s does not encode: %v", what, err)
	}
	eb, err := encode(b)
	if err != nil || !bytes.Equal(ea, eb) {
		t.Fatalf("%s differs (%v):\n%s\n%s", what, err, ea, eb)
	}
	return ea
}

// FuzzWriterRecord stores arbitrary bytes as a stream's last-writer record
// and reads it as the gate and Inspect do. A refusal is a *RecordError; an
// accepted record is the stream's, names a valid star and class, has
// epoch and tenure ≥ 1 and the revision it was read at, and re-encodes to
// a record decoded identically.
func FuzzWriterRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"stream-writer","format":1,"stream":"orders","star":"star-a","epoch":3,"class":"standard","tenure":2}`))
	f.Add([]byte(`{"kind":"stream-writer","format":1,"stream":"orders","star":"star-a","epoch":0,"class":"standard","tenure":2}`))
	f.Add([]byte(`{"kind":"stream-writer","format":1,"stream":"other","star":"star-a","epoch":3,"class":"standard","tenure":2}`))
	f.Add([]byte(`{"kind":"stream-writer","format":2}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		key := fuzzKeys.writer(fuzzStream)
		kv, st, ierr := readBack(t, key, value)
		w, err := decodeWriter(kv, fuzzStream)
		if err != nil {
			checkRefusal(t, err, ierr, key, writerKind)
			return
		}
		if ierr != nil || st.Writer == nil {
			t.Fatalf("Inspect refuses what the gate accepts: %v", ierr)
		}
		if w.Kind != writerKind || w.Format != recFormat || w.Stream != fuzzStream || epoch.ValidateName("star", w.Star) != nil ||
			epoch.ValidateName("class", w.Class) != nil || w.Epoch == 0 || w.Tenure == 0 || w.Revision != kv.Revision || st.Writer.Revision != kv.Revision {
			t.Fatalf("accepted writer %+v at revision %d", w, kv.Revision)
		}
		enc := sameEncoding(t, "writer read by Inspect", w, st.Writer)
		back, err := decodeWriter(metastore.KV{Key: key, Value: enc, Revision: kv.Revision}, fuzzStream)
		if err != nil {
			t.Fatalf("the encoding of an accepted writer is refused: %v\n%s", err, enc)
		}
		sameEncoding(t, "writer after a round trip", w, back)
	})
}

// FuzzMarkRecord stores arbitrary bytes as a stream's clean-release mark
// and reads it as the gate, a departure and Inspect do. A refusal is a
// *RecordError; an accepted mark is the stream's, names a valid star,
// epoch and tenure ≥ 1, certifies exactly the writer record of its own
// star, tenure and epoch, and re-encodes to a mark decoded identically.
func FuzzMarkRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"stream-release","format":1,"stream":"orders","star":"star-a","epoch":3,"tenure":2,"next":17,"reason":"close","at":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"kind":"stream-release","format":1,"stream":"orders","star":"star-a","epoch":3,"tenure":0}`))
	f.Add([]byte(`{"kind":"stream-release","format":1,"stream":"orders","star":"a/b","epoch":3,"tenure":2}`))
	f.Add([]byte(`{"kind":"stream-release","format":1,"stream":"orders","star":"star-a","epoch":3,"tenure":2,"at":"2026-13-02T03:04:05Z"}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		key := fuzzKeys.release(fuzzStream)
		kv, st, ierr := readBack(t, key, value)
		m, err := decodeMark(kv, fuzzStream)
		if err != nil {
			checkRefusal(t, err, ierr, key, releaseKind)
			return
		}
		if ierr != nil || st.Mark == nil {
			t.Fatalf("Inspect refuses what the gate accepts: %v", ierr)
		}
		if m.Kind != releaseKind || m.Format != recFormat || m.Stream != fuzzStream || epoch.ValidateName("star", m.Star) != nil ||
			m.Epoch == 0 || m.Tenure == 0 || m.Revision != kv.Revision {
			t.Fatalf("accepted mark %+v at revision %d", m, kv.Revision)
		}
		w := &WriterRecord{Stream: m.Stream, Star: m.Star, Epoch: m.Epoch, Tenure: m.Tenure}
		if !m.certifies(w) {
			t.Fatalf("mark %+v does not certify its own tenure", m)
		}
		next := *w
		next.Tenure++
		if next.Tenure != 0 && m.certifies(&next) {
			t.Fatalf("mark %+v certifies tenure %d", m, next.Tenure)
		}
		older := *w
		older.Epoch--
		if m.certifies(&older) {
			t.Fatalf("mark %+v certifies a writer in an older epoch", m)
		}
		enc := sameEncoding(t, "mark read by Inspect", m, st.Mark)
		back, err := decodeMark(metastore.KV{Key: key, Value: enc, Revision: kv.Revision}, fuzzStream)
		if err != nil {
			t.Fatalf("the encoding of an accepted mark is refused: %v\n%s", err, enc)
		}
		sameEncoding(t, "mark after a round trip", m, back)
	})
}

// FuzzLeaseRecord stores arbitrary bytes as a stream's advisory lease and
// reads it as the gate and Inspect do. A refusal is a *RecordError; an
// accepted lease is the stream's and names a valid star, which Inspect
// reports as the holder, and re-encodes to a lease decoded identically.
func FuzzLeaseRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"stream-lease","format":1,"stream":"orders","star":"star-a","session":42}`))
	f.Add([]byte(`{"kind":"stream-lease","format":1,"stream":"orders","star":"","session":42}`))
	f.Add([]byte(`{"kind":"stream-lease","format":1,"stream":"orders","star":"star-a","session":1e3}`))
	f.Add([]byte(`{"kind":"stream-lease","format":0}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		key := fuzzKeys.lease(fuzzStream)
		kv, st, ierr := readBack(t, key, value)
		l, err := decodeLease(kv, fuzzStream)
		if err != nil {
			checkRefusal(t, err, ierr, key, leaseKind)
			return
		}
		if ierr != nil {
			t.Fatalf("Inspect refuses what the gate accepts: %v", ierr)
		}
		if l.Kind != leaseKind || l.Format != recFormat || l.Stream != fuzzStream || epoch.ValidateName("star", l.Star) != nil || st.Holder != l.Star {
			t.Fatalf("accepted lease %+v, Inspect says holder %q", l, st.Holder)
		}
		enc, err := encode(l)
		if err != nil {
			t.Fatalf("an accepted lease does not encode: %v", err)
		}
		back, err := decodeLease(metastore.KV{Key: key, Value: enc}, fuzzStream)
		if err != nil {
			t.Fatalf("the encoding of an accepted lease is refused: %v\n%s", err, enc)
		}
		sameEncoding(t, "lease after a round trip", l, back)
	})
}

// FuzzTokenRecord stores arbitrary bytes as a stream's producer fencing
// token and reads it as the gate, CheckToken and Inspect do. A refusal is
// a *RecordError; an accepted token is the stream's, in a known mode,
// valid (ValidateToken), present in mode Fenced, judges its own token
// admissible, and re-encodes to a token decoded identically.
func FuzzTokenRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"stream-token","format":1,"stream":"orders","mode":"fenced","token":"t-1"}`))
	f.Add([]byte(`{"kind":"stream-token","format":1,"stream":"orders","mode":"any","token":""}`))
	f.Add([]byte(`{"kind":"stream-token","format":1,"stream":"orders","mode":"fenced","token":""}`))
	f.Add([]byte(`{"kind":"stream-token","format":1,"stream":"orders","mode":"strict","token":"t"}`))
	f.Add([]byte("{\"kind\":\"stream-token\",\"format\":1,\"stream\":\"orders\",\"mode\":\"any\",\"token\":\"a\\u0007b\"}"))
	f.Fuzz(func(t *testing.T, value []byte) {
		key := fuzzKeys.token(fuzzStream)
		kv, st, ierr := readBack(t, key, value)
		tok, err := decodeToken(kv, fuzzStream)
		if err != nil {
			checkRefusal(t, err, ierr, key, tokenKind)
			return
		}
		if ierr != nil || st.Token == nil {
			t.Fatalf("Inspect refuses what the gate accepts: %v", ierr)
		}
		if tok.Kind != tokenKind || tok.Format != recFormat || tok.Stream != fuzzStream || !tok.Mode.valid() ||
			ValidateToken(tok.Token) != nil || (tok.Mode == Fenced && tok.Token == "") || tok.Revision != kv.Revision {
			t.Fatalf("accepted token record %+v at revision %d", tok, kv.Revision)
		}
		if err := tok.judge(tok.Token); err != nil {
			t.Fatalf("the installed token is not admissible: %v", err)
		}
		if err := tok.judge(tok.Token + "x"); !errors.Is(err, ErrStaleToken) {
			t.Fatalf("another token is admitted (%v)", err)
		}
		enc := sameEncoding(t, "token read by Inspect", tok, st.Token)
		back, err := decodeToken(metastore.KV{Key: key, Value: enc, Revision: kv.Revision}, fuzzStream)
		if err != nil {
			t.Fatalf("the encoding of an accepted token is refused: %v\n%s", err, enc)
		}
		sameEncoding(t, "token after a round trip", tok, back)
	})
}

// FuzzStarEntry stores arbitrary bytes as a star's registry entry,
// stars/<star>, bound to a session or not. The registry never decodes the
// entry, it goes by the key and its session: the star is alive whatever
// the bytes, another session cannot register it, and the session the
// entry is bound to registers it again as a no-op.
func FuzzStarEntry(f *testing.F) {
	f.Add([]byte(`{"kind":"star","format":1,"star":"star-a","session":1,"since":"2026-01-02T03:04:05Z"}`), true)
	f.Add([]byte(`{"kind":"star","format":9}`), false)
	f.Add([]byte("\x00\xff"), true)
	f.Fuzz(func(t *testing.T, value []byte, bound bool) {
		ctx := context.Background()
		store := memstore.New(memstore.Options{})
		reg, err := NewRegistry(store, fuzzKeys.root, nil)
		if err != nil {
			t.Fatal(err)
		}
		owner, err := store.NewSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = owner.Close(ctx) }()
		other, err := store.NewSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = other.Close(ctx) }()
		key := fuzzKeys.star("star-a")
		if bound {
			_, err = metastore.PutBound(ctx, store, owner, key, value, 0)
		} else {
			_, err = metastore.Put(ctx, store, key, value, 0)
		}
		if err != nil {
			t.Fatalf("the store refuses a value at %s: %v", key, err)
		}
		if alive, err := reg.Alive(ctx, "star-a"); err != nil || !alive {
			t.Fatalf("a star with an entry is not alive: %v, %v", alive, err)
		}
		if err := reg.Register(ctx, "star-a", other); !errors.Is(err, ErrStarRunning) {
			t.Fatalf("another session registers over an entry: %v", err)
		}
		if err := reg.Register(ctx, "star-a", owner); bound != (err == nil) || (!bound && !errors.Is(err, ErrStarRunning)) {
			t.Fatalf("registering with the entry's session (bound %v): %v", bound, err)
		}
	})
}
