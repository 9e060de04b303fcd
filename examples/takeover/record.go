package main

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cutline/cutline/settle"
)

// record is one stream record as the host stores it: each flight carries
// exactly one record. The chain knows nothing of this format; the host's
// Locator (locate) reads it back for coverage.
//
// Encoding, version 1:
//
//	1 byte   version (1)
//	uvarint  length of the stream name, then the name
//	8 bytes  offset in the stream, big endian
//	uvarint  length of the producer id, then the id
//	8 bytes  producer sequence number, big endian
//	rest     the record's data
type record struct {
	Stream   string
	Offset   uint64
	Producer string
	Seq      uint64
	Data     []byte
}

const recordVersion = 1

var errBadRecord = errors.New("takeover: malformed record")

func (r record) encode() []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(r.Stream)+len(r.Producer)+16+len(r.Data))
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, uint64(len(r.Stream)))
	b = append(b, r.Stream...)
	b = binary.BigEndian.AppendUint64(b, r.Offset)
	b = binary.AppendUvarint(b, uint64(len(r.Producer)))
	b = append(b, r.Producer...)
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	return append(b, r.Data...)
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < 1 || b[0] != recordVersion {
		return r, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	b = b[1:]
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
	r.Data = append([]byte(nil), b...)
	return r, nil
}

// locate is the host's settle.Locator: every flight covers one offset of
// its stream, held by the whole payload.
func locate(payload []byte) ([]settle.Span, error) {
	r, err := decodeRecord(payload)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: r.Stream, Offset: r.Offset, Count: 1, Start: 0, End: uint64(len(payload))}}, nil
}
