package cutlinetest

import (
	"bytes"
	"fmt"
	"strconv"
)

// Record is the payload of one producer record in the reference host's
// format, "<stream>|<offset>|<id>": the stream and offset are what the
// host's index needs (Locate), the id names the producer's record, so that
// exactly-once can be checked across a takeover, where a retried record
// gets a new offset.
func Record(stream string, offset uint64, id string) []byte {
	return fmt.Appendf(nil, "%s|%d|%s", stream, offset, id)
}

// ParseRecord splits a payload made by Record.
func ParseRecord(p []byte) (stream string, offset uint64, id string, err error) {
	parts := bytes.SplitN(p, []byte("|"), 3)
	if len(parts) != 3 {
		return "", 0, "", fmt.Errorf("cutlinetest: not a record: %q", p)
	}
	offset, err = strconv.ParseUint(string(parts[1]), 10, 64)
	if err != nil {
		return "", 0, "", fmt.Errorf("cutlinetest: record %q: offset: %w", p, err)
	}
	return string(parts[0]), offset, string(parts[2]), nil
}

// Locate is the settle.Locator of Record payloads: one record per flight.
func Locate(p []byte) (stream string, offset, count uint64, err error) {
	stream, offset, _, err = ParseRecord(p)
	return stream, offset, 1, err
}
