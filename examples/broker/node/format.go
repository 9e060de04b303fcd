package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cutline/cutline/settle"
)

// Record is one stream record as the broker stores it: every flight
// carries exactly one record of one stream. The chain knows nothing of
// this format; Locate reads its header back for the coverage index, and
// a new holder its producer fields to rebuild its deduplication state.
//
// Encoding, version 1, binary-safe (the data is opaque bytes):
//
//	4 bytes  magic "cbr1"
//	uvarint  length of the stream name, then the name
//	8 bytes  offset in the stream, big endian
//	uvarint  length of the producer id, then the id ("" for none)
//	8 bytes  producer sequence number, big endian
//	rest     the record's data
type Record struct {
	Stream   string
	Offset   uint64
	Producer string
	Seq      uint64
	Data     []byte
}

const magic = "cbr1"

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

// decodeRecord parses a payload made by Encode. The data is copied.
func decodeRecord(b []byte) (Record, error) {
	b, ok := bytes.CutPrefix(b, []byte(magic))
	if !ok {
		return Record{}, fmt.Errorf("%w: no magic", errBadRecord)
	}
	var bad []string // the fields that do not fit
	str := func(field string) string {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			bad, b = append(bad, field), nil
			return ""
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s
	}
	u64 := func(field string) uint64 {
		if len(b) < 8 {
			bad, b = append(bad, field), nil
			return 0
		}
		v := binary.BigEndian.Uint64(b)
		b = b[8:]
		return v
	}
	r := Record{Stream: str("stream"), Offset: u64("offset"), Producer: str("producer"), Seq: u64("sequence")}
	if len(bad) > 0 {
		return Record{}, fmt.Errorf("%w: bad %s", errBadRecord, bad[0])
	}
	r.Data = append([]byte{}, b...)
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
