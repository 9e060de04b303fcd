package metastore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// ErrBadRecord: a stored value could not be decoded as the record it should
// be (corrupt, another kind, or a newer major format). The error is a
// *RecordError.
var ErrBadRecord = errkind.New(cutline.ErrCorrupt, "metastore: bad record")

// RecordHeader is embedded first in every versioned record: Kind names the record
// type ("epoch", "chain", …) and Format its major format version. Readers
// refuse formats newer than they know; minor additions are new optional
// fields, which older readers ignore.
type RecordHeader struct {
	Kind   string `json:"kind"`
	Format int    `json:"format"`
}

// RecordError says which record failed to decode and why.
type RecordError struct {
	Key    string
	Kind   string
	Reason string
	Err    error
}

func (e *RecordError) Error() string {
	s := fmt.Sprintf("metastore: bad %s record", e.Kind)
	if e.Key != "" {
		s += fmt.Sprintf(" at %q", e.Key)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *RecordError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadRecord, e.Err}
	}
	return []error{ErrBadRecord}
}

// EncodeRecord marshals v as indented JSON, readable with etcdctl. v should
// embed a Header whose Kind and Format are set.
func EncodeRecord(v any) ([]byte, error) {
	return json.MarshalIndent(v, "", "  ")
}

// DecodeRecord unmarshals data into v after checking that it is a record of
// kind with a major format between 1 and maxFormat. key only labels errors.
// A failure is a *RecordError; v must not be used then.
func DecodeRecord(key string, data []byte, kind string, maxFormat int, v any) error {
	var h RecordHeader
	if len(bytes.TrimSpace(data)) == 0 {
		return &RecordError{Key: key, Kind: kind, Reason: "empty value"}
	}
	if !utf8.Valid(data) {
		// encoding/json would replace the bad bytes with U+FFFD and
		// decode a value that was never written.
		return &RecordError{Key: key, Kind: kind, Reason: "not UTF-8"}
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return &RecordError{Key: key, Kind: kind, Reason: "not JSON", Err: err}
	}
	if h.Kind != kind {
		return &RecordError{Key: key, Kind: kind, Reason: fmt.Sprintf("kind is %q", h.Kind)}
	}
	if h.Format < 1 || h.Format > maxFormat {
		return &RecordError{Key: key, Kind: kind, Reason: fmt.Sprintf("format %d is not supported (this reader knows 1..%d)", h.Format, maxFormat)}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &RecordError{Key: key, Kind: kind, Reason: "malformed", Err: err}
	}
	return nil
}
