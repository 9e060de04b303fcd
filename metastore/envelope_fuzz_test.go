package metastore_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cutline/cutline/metastore"
)

// envelopeProbe is a record with the shapes the library's records use:
// strings, numbers, a map and a time.
type envelopeProbe struct {
	metastore.RecordHeader
	Name  string            `json:"name"`
	Next  uint64            `json:"next"`
	Rev   int64             `json:"rev,omitempty"`
	Heads map[string]uint64 `json:"heads,omitempty"`
	At    time.Time         `json:"at,omitzero"`
}

// FuzzRecordEnvelope feeds arbitrary bytes, kinds and format bounds to
// DecodeRecord, the envelope every metastore record is read through. A
// refusal is a *RecordError matching ErrBadRecord that names the key and
// the kind asked for; an accepted record has that kind and a format in
// 1..maxFormat, and encoding it gives bytes that decode to a record that
// encodes to the same bytes.
func FuzzRecordEnvelope(f *testing.F) {
	f.Add([]byte(`{"kind":"chain","format":1,"name":"a","next":3,"heads":{"x":2},"at":"2026-01-02T03:04:05Z"}`), "chain", 1)
	f.Add([]byte(`{"kind":"chain","format":2}`), "chain", 1)
	f.Add([]byte(`{"kind":"chain","format":2}`), "chain", 3)
	f.Add([]byte(`{"kind":"epoch","format":1}`), "chain", 1)
	f.Add([]byte(`{"kind":"chain","format":1,"next":-1}`), "chain", 1)
	f.Add([]byte(`null`), "", 1)
	f.Add([]byte(" \t\n"), "chain", 1)
	f.Fuzz(func(t *testing.T, data []byte, kind string, maxFormat int) {
		const key = "chains/k"
		var v envelopeProbe
		err := metastore.DecodeRecord(key, data, kind, maxFormat, &v)
		if err != nil {
			checkRecordError(t, err, key, kind)
			return
		}
		if v.Kind != kind || v.Format < 1 || v.Format > maxFormat {
			t.Fatalf("accepted kind %q format %d, asked for %q 1..%d", v.Kind, v.Format, kind, maxFormat)
		}
		enc, err := metastore.EncodeRecord(&v)
		if err != nil {
			t.Fatalf("an accepted record does not encode: %v", err)
		}
		var back envelopeProbe
		if err := metastore.DecodeRecord(key, enc, kind, maxFormat, &back); err != nil {
			t.Fatalf("the encoding of an accepted record is refused: %v\n%s", err, enc)
		}
		enc2, err := metastore.EncodeRecord(&back)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the record (%v):\n%s\n%s", err, enc, enc2)
		}
	})
}

// checkRecordError checks a refusal: a *RecordError for key and kind that
// says why and matches ErrBadRecord.
func checkRecordError(t *testing.T, err error, key, kind string) {
	t.Helper()
	var re *metastore.RecordError
	if !errors.As(err, &re) || !errors.Is(err, metastore.ErrBadRecord) {
		t.Fatalf("refusal is not a *RecordError matching ErrBadRecord: %v", err)
	}
	if re.Key != key || re.Kind != kind || re.Reason == "" {
		t.Fatalf("refusal does not name the record or the reason: %+v", re)
	}
}
