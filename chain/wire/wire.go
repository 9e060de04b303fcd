package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Wire format of a slot object (flight or poison), format version 1.
//
//	offset size field
//	0      4    magic "CUTL"
//	4      1    format version (1)
//	5      1    kind (1 flight, 2 poison)
//	6      2    reserved, zero
//	8      8    epoch, big endian
//	16     8    slot, big endian
//	24     4    body length, big endian
//	28     4    CRC32C (Castagnoli) over bytes [0,28), the star and the body
//	32     1    star length n (1..64)
//	33     n    star
//	33+n   …    body: the payload of a flight; the fencer's identity for poison
//
// The header names the object's own coordinates, so an object found at the
// wrong key (misplaced by a bug or an operator) is detected, never accepted.
// The header fits in HeaderProbeLen bytes: one small ranged read tells a
// flight from poison.
const (
	magic        = "CUTL"
	wireVersion  = 1
	fixedLen     = 33
	maxStarLen   = 64
	maxHeaderLen = fixedLen + maxStarLen

	// HeaderProbeLen is enough bytes of any slot object to decode its
	// header.
	HeaderProbeLen = maxHeaderLen

	// MaxPayload bounds a flight's payload.
	MaxPayload = 64 << 20
	// MaxPoisonBody bounds the fencer identity carried by poison.
	MaxPoisonBody = 256
)

// Kind says what a slot object is.
type Kind uint8

const (
	// KindFlight is a writer's data object.
	KindFlight Kind = 1
	// KindPoison is a fencer's marker that takes the slot's space.
	KindPoison Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindFlight:
		return "flight"
	case KindPoison:
		return "poison"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Errors of the wire format. A *ObjectError wraps one of them.
var (
	// ErrCorrupt: the bytes are not a well-formed object of a known
	// format: bad magic, truncated, checksum mismatch.
	ErrCorrupt = errkind.New(cutline.ErrCorrupt, "wire: corrupt object")
	// ErrUnknownFormat: the object carries a format version this code does
	// not know (written by a newer release). It is never overwritten.
	ErrUnknownFormat = errkind.New(cutline.ErrCorrupt, "wire: unknown object format")
	// ErrMisplaced: a well-formed object claims other coordinates than the
	// key it was found at.
	ErrMisplaced = errkind.New(cutline.ErrCorrupt, "wire: misplaced object")
)

// ObjectError says which object failed to decode and why.
type ObjectError struct {
	Bucket string // set by callers that know it
	Key    string // set by callers that know it
	Reason string
	Err    error // ErrCorrupt, ErrUnknownFormat or ErrMisplaced
}

func (e *ObjectError) Error() string {
	where := ""
	if e.Key != "" {
		where = " " + e.Bucket + "/" + e.Key
	}
	return fmt.Sprintf("%v%s: %s", e.Err, where, e.Reason)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// Header is the decoded header of a slot object.
type Header struct {
	Kind    Kind
	Star    string
	Epoch   uint64
	Slot    uint64
	BodyLen uint32
	CRC     uint32
}

// Len is the number of header bytes before the body.
func (h Header) Len() int { return fixedLen + len(h.Star) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encode(kind Kind, star string, epoch, slot uint64, body []byte) []byte {
	b := make([]byte, fixedLen+len(star)+len(body))
	copy(b, magic)
	b[4] = wireVersion
	b[5] = byte(kind)
	binary.BigEndian.PutUint64(b[8:], epoch)
	binary.BigEndian.PutUint64(b[16:], slot)
	binary.BigEndian.PutUint32(b[24:], uint32(len(body)))
	b[32] = byte(len(star))
	copy(b[fixedLen:], star)
	copy(b[fixedLen+len(star):], body)
	crc := crc32.Update(0, castagnoli, b[:28])
	crc = crc32.Update(crc, castagnoli, b[fixedLen:])
	binary.BigEndian.PutUint32(b[28:], crc)
	return b
}

// EncodeFlight returns the object bytes of a flight carrying payload.
// star must be a valid name (see epoch.ValidateName) and payload at most
// MaxPayload bytes; callers validate both.
func EncodeFlight(star string, epoch, slot uint64, payload []byte) []byte {
	return encode(KindFlight, star, epoch, slot, payload)
}

// EncodePoison returns the object bytes of poison written by fencer (an
// identity kept for forensics). fencer must be at most MaxPoisonBody bytes;
// callers validate it (fence.Options refuses a longer identity), and a
// longer one is cut to fit, since poison must be written whatever its label.
func EncodePoison(star string, epoch, slot uint64, fencer string) []byte {
	if len(fencer) > MaxPoisonBody {
		fencer = fencer[:MaxPoisonBody]
	}
	return encode(KindPoison, star, epoch, slot, []byte(fencer))
}

func corrupt(reason string) error { return &ObjectError{Reason: reason, Err: ErrCorrupt} }

// DecodeHeader decodes the header from the first bytes of an object (at
// least HeaderProbeLen bytes, or the whole object when shorter). It does not
// verify the checksum, which covers the body.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < fixedLen {
		return Header{}, corrupt(fmt.Sprintf("%d bytes is shorter than a header", len(b)))
	}
	if string(b[:4]) != magic {
		return Header{}, corrupt("bad magic")
	}
	if b[4] != wireVersion {
		return Header{}, &ObjectError{Reason: fmt.Sprintf("format version %d", b[4]), Err: ErrUnknownFormat}
	}
	h := Header{
		Kind:    Kind(b[5]),
		Epoch:   binary.BigEndian.Uint64(b[8:]),
		Slot:    binary.BigEndian.Uint64(b[16:]),
		BodyLen: binary.BigEndian.Uint32(b[24:]),
		CRC:     binary.BigEndian.Uint32(b[28:]),
	}
	if h.Kind != KindFlight && h.Kind != KindPoison {
		return Header{}, corrupt(fmt.Sprintf("unknown kind %d", b[5]))
	}
	if b[6] != 0 || b[7] != 0 {
		return Header{}, corrupt("reserved bytes are not zero")
	}
	n := int(b[32])
	if n == 0 || n > maxStarLen {
		return Header{}, corrupt(fmt.Sprintf("star length %d", n))
	}
	if len(b) < fixedLen+n {
		return Header{}, corrupt("truncated star")
	}
	h.Star = string(b[fixedLen : fixedLen+n])
	if h.BodyLen > MaxPayload || (h.Kind == KindPoison && h.BodyLen > MaxPoisonBody) {
		return Header{}, corrupt(fmt.Sprintf("body length %d", h.BodyLen))
	}
	return h, nil
}

// Object is a fully decoded, checksum-verified slot object.
type Object struct {
	Header
	// Body is the payload of a flight, the fencer identity of poison. It
	// aliases the decoded buffer.
	Body []byte
}

// Decode decodes and verifies a whole object.
func Decode(b []byte) (Object, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return Object{}, err
	}
	if want := h.Len() + int(h.BodyLen); len(b) != want {
		return Object{}, corrupt(fmt.Sprintf("length %d, header says %d", len(b), want))
	}
	crc := crc32.Update(0, castagnoli, b[:28])
	crc = crc32.Update(crc, castagnoli, b[fixedLen:])
	if crc != h.CRC {
		return Object{}, corrupt("checksum mismatch")
	}
	return Object{Header: h, Body: b[h.Len():]}, nil
}

// Check verifies that h claims exactly the coordinates it was found at.
func (h Header) Check(star string, epoch, slot uint64) error {
	if h.Star != star || h.Epoch != epoch || h.Slot != slot {
		return &ObjectError{
			Reason: fmt.Sprintf("claims %s/%d/%d, found at %s/%d/%d", h.Star, h.Epoch, h.Slot, star, epoch, slot),
			Err:    ErrMisplaced,
		}
	}
	return nil
}
