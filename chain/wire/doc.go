// Package wire is the storage format of a chain's slot objects and the
// reading of one slot: what package chain writes and reads, package fence
// walks, and an operator tool or a test harness looks at directly. Hosts
// that only append and read go through package chain and never need it.
//
// # Objects and keys
//
// Every slot object, flight or poison, is stored at the same key in every
// bucket:
//
//	<prefix>/<star>/<epoch>/<slot>     numbers zero-padded to 20 digits
//
// (Keys; the prefix is a constant of the epoch, epoch.Constants.Prefix, and
// KeysOf gives an epoch's layout). The object starts with a header that
// names its own star, epoch and slot, its kind (flight or poison), the body
// length and a CRC32C over header and body (see wire.go for the byte layout,
// EncodeFlight, EncodePoison, Decode). An object found at a key other than
// the one it names, of a newer format, or failing its checksum is foreign:
// it is never overwritten, never copied, and counts as neither flight nor
// poison (a *ObjectError wrapping ErrMisplaced, ErrUnknownFormat or
// ErrCorrupt).
//
// # Reading a slot
//
// ObserveHeader reads HeaderProbeLen bytes, enough to tell a flight from
// poison; ObserveObject reads the object whole and verifies it, keeping a
// digest so that copies in different buckets can be compared;
// ObserveUpTo reads an object whole and verifies it when it is no longer
// than a limit, and only its header otherwise (a large flight costs the
// limit, not its size; poison is always read whole). Each
// answer is an Observation: SlotEmpty, SlotFlight, SlotPoison,
// SlotUnreachable (the bucket did not answer: unknown, never absent) or
// SlotForeign. TallySlot adds up the K answers of one slot, counting as
// copies only byte-identical verified flights and reporting two different
// flights as a conflict.
package wire
