package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cutline/cutline/epoch"
)

// Keys lays out slot objects in every bucket as
// <prefix>/<star>/<epoch>/<slot>, numbers zero-padded to 20 digits so that
// lexical order is numeric order. The prefix is a constant of the epoch
// (epoch.Constants.Prefix); KeysOf gives an epoch's layout. The zero value
// has no prefix.
type Keys struct {
	// Prefix is "" or a '/'-separated path of valid names.
	Prefix string
}

// KeysOf is the key layout of an epoch: its record's prefix. Every party
// lays out the epoch's keys from its record, never from its own options.
func KeysOf(rec *epoch.Record) Keys { return Keys{Prefix: rec.Constants.Prefix} }

// Validate checks the prefix (epoch.ValidatePrefix).
func (k Keys) Validate() error { return epoch.ValidatePrefix(k.Prefix) }

func (k Keys) base() string {
	if k.Prefix == "" {
		return ""
	}
	return k.Prefix + "/"
}

// Slot is the object key of a slot.
func (k Keys) Slot(star string, ep, slot uint64) string {
	return fmt.Sprintf("%s%s/%020d/%020d", k.base(), star, ep, slot)
}

// Epoch is the key prefix of every slot of an epoch (ends with '/').
func (k Keys) Epoch(star string, ep uint64) string {
	return fmt.Sprintf("%s%s/%020d/", k.base(), star, ep)
}

// ParseSlot returns the slot number of a key under Epoch(star, ep).
func (k Keys) ParseSlot(star string, ep uint64, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, k.Epoch(star, ep))
	if !ok || len(rest) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}
