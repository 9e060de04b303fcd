package settle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/objstore"
)

// A segment holds the bytes of consecutive ref pages of one stream, in one
// star's epoch, concatenated in offset order. Its key, the same in every
// bucket of the epoch, names what it holds and who wrote it:
//
//	<prefix>/<star>/segments/<epoch, 20 digits>/<stream>/<first, 20 digits>-<next, 20 digits>-<compactor>-<nonce, 16 hex digits>
//
// A slot key is <prefix>/<star>/<epoch>/<slot> with a 20-digit epoch in
// the third place from the end; a segment key has "segments" in the
// fourth and a 20-digit number where no slot key has one, so the two can
// never meet. The compactor's identity and a random nonce keep two
// compactors, or two passes of one, from ever writing the same key, and
// [first, next) is the offsets the pages it was written for cover, which
// is how a later pass tells garbage from a segment still in use.
const (
	segmentsDir = "segments"
	// nonceDigits is the length of a segment key's nonce, in hex.
	nonceDigits = 16
)

// segmentName is what a segment key says.
type segmentName struct {
	Star        string
	Epoch       uint64
	Stream      string
	First, Next uint64
	Compactor   string
	Nonce       uint64
}

// segmentPrefix is the key prefix of every segment of an epoch.
func segmentPrefix(keys wire.Keys, star string, ep uint64) string {
	base := ""
	if keys.Prefix != "" {
		base = keys.Prefix + "/"
	}
	return fmt.Sprintf("%s%s/%s/%020d/", base, star, segmentsDir, ep)
}

func (n segmentName) key(keys wire.Keys) string {
	return fmt.Sprintf("%s%s/%020d-%020d-%s-%016x", segmentPrefix(keys, n.Star, n.Epoch), n.Stream, n.First, n.Next, n.Compactor, n.Nonce)
}

// parseSegmentKey reads a segment key from its end, whatever prefix its
// epoch lays keys under. Every name in it must be valid.
func parseSegmentKey(key string) (segmentName, bool) {
	parts := strings.Split(key, "/")
	if len(parts) < 5 {
		return segmentName{}, false
	}
	parts = parts[len(parts)-5:]
	star, dir, ep, stream, name := parts[0], parts[1], parts[2], parts[3], parts[4]
	n := segmentName{Star: star, Stream: stream}
	var ok bool
	if dir != segmentsDir || epoch.ValidateName("star", star) != nil || epoch.ValidateName("stream", stream) != nil {
		return segmentName{}, false
	}
	if n.Epoch, ok = digits20(ep); !ok || n.Epoch == 0 {
		return segmentName{}, false
	}
	// <first>-<next>-<compactor>-<nonce>: fixed widths around a compactor
	// name that may itself hold '-'.
	if len(name) < 20+1+20+1+1+1+nonceDigits || name[20] != '-' || name[41] != '-' || name[len(name)-nonceDigits-1] != '-' {
		return segmentName{}, false
	}
	if n.First, ok = digits20(name[:20]); !ok {
		return segmentName{}, false
	}
	if n.Next, ok = digits20(name[21:41]); !ok || n.Next <= n.First {
		return segmentName{}, false
	}
	n.Compactor = name[42 : len(name)-nonceDigits-1]
	if epoch.ValidateName("compactor", n.Compactor) != nil {
		return segmentName{}, false
	}
	hex := name[len(name)-nonceDigits:]
	nonce, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || fmt.Sprintf("%016x", nonce) != hex {
		return segmentName{}, false
	}
	n.Nonce = nonce
	return n, true
}

func digits20(s string) (uint64, bool) {
	if len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && fmt.Sprintf("%020d", v) == s
}

// Segment object format, version 1:
//
//	offset size field
//	0      4    magic "CUTS"
//	4      1    format version (1)
//	5      3    reserved, zero
//	8      8    body length, big endian
//	16     4    CRC32C (Castagnoli) over bytes [0,16), the key and the body
//	20     2    key length n, big endian
//	22     n    the segment's own key
//	22+n   …    body: the spans' bytes, in the order of the pages that name it
//
// The object names its own key, so a copy found elsewhere is refused;
// the checksum covers the whole object, so the compactor's read-back of
// each copy proves it whole before any page names it.
const (
	segmentMagic    = "CUTS"
	segmentVersion  = 1
	segmentFixedLen = 22
)

// ErrSegment: a segment copy is missing, corrupt, misplaced or short, or
// too few copies of a new segment verified. The error is a *SegmentError.
var ErrSegment = errkind.New(cutline.ErrCorrupt, "settle: segment does not verify")

// SegmentError names a segment and what is wrong with it.
type SegmentError struct {
	Bucket string // empty when the error concerns every copy
	Key    string
	Reason string
	Err    error // the cause, when there is one
}

func (e *SegmentError) Error() string {
	where := e.Key
	if e.Bucket != "" {
		where = e.Bucket + "/" + e.Key
	}
	s := fmt.Sprintf("settle: segment %s: %s", where, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *SegmentError) Unwrap() []error { return []error{ErrSegment, e.Err} }

var segmentCRC = crc32.MakeTable(crc32.Castagnoli)

// segmentHeaderLen is where the body of the segment at key starts.
func segmentHeaderLen(key string) uint64 { return uint64(segmentFixedLen + len(key)) }

func encodeSegment(key string, body []byte) []byte {
	b := make([]byte, segmentFixedLen+len(key)+len(body))
	copy(b, segmentMagic)
	b[4] = segmentVersion
	binary.BigEndian.PutUint64(b[8:], uint64(len(body)))
	binary.BigEndian.PutUint16(b[20:], uint16(len(key)))
	copy(b[segmentFixedLen:], key)
	copy(b[segmentFixedLen+len(key):], body)
	binary.BigEndian.PutUint32(b[16:], segmentSum(b))
	return b
}

func segmentSum(b []byte) uint32 {
	c := crc32.Update(0, segmentCRC, b[:16])
	return crc32.Update(c, segmentCRC, b[20:])
}

// writeSegment creates the segment data at key in every bucket and reads
// every copy back. It returns nil once at least w copies hold exactly
// data; otherwise a *SegmentError, and no page may name the segment (the
// copies that landed are garbage a later Collect deletes). A copy found
// already at key counts only when it holds the same bytes.
func writeSegment(ctx context.Context, buckets []objstore.Bucket, w int, key string, data []byte) (creates, reads int, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	copies := 0
	var reasons []error
	for _, b := range buckets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, r, err := createVerified(ctx, b, key, data)
			mu.Lock()
			defer mu.Unlock()
			creates += c
			reads += r
			if err != nil {
				reasons = append(reasons, err)
				return
			}
			copies++
		}()
	}
	wg.Wait()
	if copies < w {
		return creates, reads, &SegmentError{Key: key, Reason: fmt.Sprintf("%d of %d copies verify, %d needed", copies, len(buckets), w), Err: errors.Join(reasons...)}
	}
	return creates, reads, nil
}

// createVerified creates data at key in b and reads the copy back.
func createVerified(ctx context.Context, b objstore.Bucket, key string, data []byte) (creates, reads int, err error) {
	creates = 1
	if err := b.Create(ctx, key, data); err != nil && !errors.Is(err, objstore.ErrExists) {
		return creates, 0, &SegmentError{Bucket: b.Name(), Key: key, Reason: "create", Err: err}
	}
	got, err := b.Get(ctx, key)
	if err != nil {
		return creates, 1, &SegmentError{Bucket: b.Name(), Key: key, Reason: "read back", Err: err}
	}
	if !bytes.Equal(got, data) {
		return creates, 1, &SegmentError{Bucket: b.Name(), Key: key, Reason: "the copy read back differs from what was written"}
	}
	return creates, 1, nil
}
