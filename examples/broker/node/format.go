package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cutline/cutline/settle"
)

// Record is one stream Record as the broker stores it: every flight
// carries exactly one Record of one stream. The chain knows nothing of
// this format; the broker's Locator (locate) reads the header back for
// the coverage index, and a new holder reads the producer fields back to
// rebuild its deduplication state.
//
// Encoding, version 1, binary-safe (the data is opaque bytes):
//
//	4 bytes  magic "cbr1"
//	uvarint  length of the stream name, then the name
//	8 bytes  offset in the stream, big endian
//	uvarint  length of the producer id, then the id ("" for none)
//	8 bytes  producer sequence number, big endian
//	rest     the Record's data
type Record struct {
	Stream   string
	Offset   uint64
	Producer string
	Seq      uint64
	Data     []byte
}

// magic opens every record; a payload without it is not the broker's.
const magic = "cbr1"

// errBadRecord is a payload that is not a record of this format.
var errBadRecord = errors.New("broker: malformed record")

func (r Record) Encode() []byte {
	b := make([]byte, 0, len(magic)+2*binary.MaxVarintLen64+len(r.Stream)+len(r.Producer)+16+len(r.Data))
	b = append(b, magic...)
	b = binary.AppendUvarint(b, uint64(len(r.Stream)))
	b = append(b, r.Stream...)
	b = binary.BigEndian.AppendUint64(b, r.Offset)
	b = binary.AppendUvarint(b, uint64(len(r.Producer)))
	b = append(b, r.Producer...)
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	return append(b, r.Data...)
}

// decodeRecord parses a payload made by encode. The data is copied.
func decodeRecord(b []byte) (Record, error) {
	var r Record
	if !bytes.HasPrefix(b, []byte(magic)) {
		return r, fmt.Errorf("%w: no magic", errBadRecord)
	}
	b = b[len(magic):]
	str := func(field string) (string, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", fmt.Errorf("%w: bad %s length", errBadRecord, field)
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, nil
	}
	u64 := func(field string) (uint64, error) {
		if len(b) < 8 {
			return 0, fmt.Errorf("%w: short %s", errBadRecord, field)
		}
		v := binary.BigEndian.Uint64(b)
		b = b[8:]
		return v, nil
	}
	var err error
	if r.Stream, err = str("stream"); err != nil {
		return r, err
	}
	if r.Offset, err = u64("offset"); err != nil {
		return r, err
	}
	if r.Producer, err = str("producer"); err != nil {
		return r, err
	}
	if r.Seq, err = u64("sequence"); err != nil {
		return r, err
	}
	r.Data = bytes.Clone(b)
	if r.Data == nil {
		r.Data = []byte{}
	}
	return r, nil
}

// Locate is the broker's settle.Locator: a flight holds one offset of one
// stream, in its whole payload.
func Locate(payload []byte) ([]settle.Span, error) {
	r, err := decodeRecord(payload)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: r.Stream, Offset: r.Offset, Count: 1, Start: 0, End: uint64(len(payload))}}, nil
}
