package chain

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
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

// Zones resolves the bucket names recorded in an epoch to buckets.
type Zones map[string]objstore.Bucket

// NewZones indexes buckets by Name. A nil bucket, or two buckets with one
// name, is an *config.Error: one name would stand for two stores, or
// one store would be counted as two zones. (Two names on one physical store
// are found by objstore.VerifyDistinct.)
func NewZones(buckets ...objstore.Bucket) (Zones, error) {
	z := make(Zones, len(buckets))
	for i, b := range buckets {
		if b == nil {
			return nil, &config.Error{Field: fmt.Sprintf("zones[%d]", i), Value: nil, Reason: "nil bucket"}
		}
		if _, dup := z[b.Name()]; dup {
			return nil, &config.Error{Field: fmt.Sprintf("zones[%d]", i), Value: fmt.Sprintf("%q", b.Name()), Reason: "duplicate zone name"}
		}
		z[b.Name()] = b
	}
	return z, nil
}

// MustZones is NewZones for zone sets fixed in code (tests, examples): it
// panics where NewZones returns an error.
func MustZones(buckets ...objstore.Bucket) Zones {
	z, err := NewZones(buckets...)
	if err != nil {
		panic(err)
	}
	return z
}

// Names returns the zones' bucket names in the given buckets' order.
func Names(buckets ...objstore.Bucket) []string {
	out := make([]string, len(buckets))
	for i, b := range buckets {
		out[i] = b.Name()
	}
	return out
}

// Resolve returns the buckets named, in order. A missing name is a
// *config.Error.
func (z Zones) Resolve(names []string) ([]objstore.Bucket, error) {
	out := make([]objstore.Bucket, len(names))
	for i, n := range names {
		b, ok := z[n]
		if !ok || b == nil {
			return nil, &config.Error{Field: fmt.Sprintf("buckets[%d]", i), Value: fmt.Sprintf("%q", n), Reason: "no such zone"}
		}
		out[i] = b
	}
	return out, nil
}
