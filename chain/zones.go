package chain

import (
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/objstore"
)

// Zones resolves the bucket names recorded in an epoch to buckets.
type Zones map[string]objstore.Bucket

// NewZones indexes buckets by Name. A nil bucket, or two buckets with one
// name, is a *cutline.ConfigError: one name would stand for two stores, or
// one store would be counted as two zones. (Two names on one physical store
// are found by objstore.VerifyDistinct.)
func NewZones(buckets ...objstore.Bucket) (Zones, error) {
	z := make(Zones, len(buckets))
	for i, b := range buckets {
		if b == nil {
			return nil, &cutline.ConfigError{Field: fmt.Sprintf("zones[%d]", i), Value: nil, Reason: "nil bucket"}
		}
		if _, dup := z[b.Name()]; dup {
			return nil, &cutline.ConfigError{Field: fmt.Sprintf("zones[%d]", i), Value: fmt.Sprintf("%q", b.Name()), Reason: "duplicate zone name"}
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
// *cutline.ConfigError.
func (z Zones) Resolve(names []string) ([]objstore.Bucket, error) {
	out := make([]objstore.Bucket, len(names))
	for i, n := range names {
		b, ok := z[n]
		if !ok || b == nil {
			return nil, &cutline.ConfigError{Field: fmt.Sprintf("buckets[%d]", i), Value: fmt.Sprintf("%q", n), Reason: "no such zone"}
		}
		out[i] = b
	}
	return out, nil
}
