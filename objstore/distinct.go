package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// ErrAliased: VerifyZones found two Bucket handles that reach one
// physical store, or two that share a name. The error is a *AliasError.
var ErrAliased = errkind.New(cutline.ErrInvalid, "objstore: buckets are not distinct stores")

// AliasError names the two buckets VerifyZones refused. It matches
// ErrAliased.
type AliasError struct {
	// A and B are the buckets' names: a probe created through A was
	// visible through B. They are equal when two handles share a name.
	A, B string
}

func (e *AliasError) Error() string {
	if e.A == e.B {
		return fmt.Sprintf("objstore: buckets are not distinct: two are named %q", e.A)
	}
	return fmt.Sprintf("objstore: buckets %q and %q are not distinct stores: a probe created through %q is visible through %q",
		e.A, e.B, e.A, e.B)
}

func (e *AliasError) Unwrap() error { return ErrAliased }

// VerifyDistinct is VerifyZones over buckets with the probes at the
// bucket's root.
//
// Deprecated: use VerifyZones, which names what it is: the one start-up
// check of a zone set. VerifyDistinct has become the same check, so that
// no host verifies that its zones are distinct stores without verifying
// that each enforces create-only writes, or the other way round.
func VerifyDistinct(ctx context.Context, buckets ...Bucket) error {
	return VerifyZones(ctx, buckets, VerifyOptions{})
}

// checkNames refuses a nil bucket and two buckets with one name, before
// anything is sent.
func checkNames(buckets []Bucket) error {
	byName := make(map[string]int, len(buckets))
	for i, b := range buckets {
		if b == nil {
			return &cutline.ConfigError{Field: fmt.Sprintf("zones[%d]", i), Reason: fmt.Sprintf("bucket %d is nil", i)}
		}
		if _, dup := byName[b.Name()]; dup {
			return &AliasError{A: b.Name(), B: b.Name()}
		}
		byName[b.Name()] = i
	}
	return nil
}

// verifyDistinct checks that buckets are as many physical stores as
// handles: it creates one probe under prefix/VerifyDir in each bucket,
// checks that each probe is readable through its own bucket and absent
// (ErrNotFound) from every other, and deletes the probes, best effort, on
// every way out while ctx allows: 2K + K² requests for K buckets.
func verifyDistinct(ctx context.Context, prefix string, buckets []Bucket) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("objstore: verify distinct: "+format, args...)
	}
	if err := ctx.Err(); err != nil {
		return fail("%w", err)
	}

	keys := make([]string, len(buckets))
	for i := range keys {
		keys[i] = probeKey(prefix, fmt.Sprintf("distinct-%016x%016x", rand.Uint64(), rand.Uint64()))
		if err := ValidateKey(keys[i]); err != nil {
			return fail("probe key: %w", err)
		}
	}
	// A probe whose Create was attempted may exist, even when Create
	// failed: remove every one of them on the way out. A failed delete
	// only leaves a small object under VerifyDir.
	created := 0
	defer func() {
		for i := range created {
			_ = buckets[i].Delete(ctx, keys[i])
		}
	}()
	for i, b := range buckets {
		created = i + 1
		data := []byte(fmt.Sprintf("cutline distinct-store probe of bucket %q\n", b.Name()))
		if err := b.Create(ctx, keys[i], data); err != nil {
			return fail("bucket %q: create probe %s: %w", b.Name(), keys[i], err)
		}
	}
	for i, owner := range buckets {
		for j, other := range buckets {
			_, err := other.Get(ctx, keys[i])
			switch {
			case i == j && err != nil:
				return fail("bucket %q: read back its own probe %s: %w", owner.Name(), keys[i], err)
			case i == j:
			case err == nil:
				return &AliasError{A: owner.Name(), B: other.Name()}
			case !errors.Is(err, ErrNotFound):
				return fail("bucket %q: read probe %s of bucket %q: %w", other.Name(), keys[i], owner.Name(), err)
			}
		}
	}
	return nil
}
