package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// ErrAliased: VerifyDistinct found two Bucket handles that reach one
// physical store, or two that share a name. The error is a *AliasError.
var ErrAliased = errors.New("objstore: buckets are not distinct stores")

// AliasError names the two buckets VerifyDistinct refused. It matches
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

// VerifyDistinct checks at start-up that buckets, the zone set of an
// epoch, are as many physical stores as handles. Two handles on one store
// (two fs buckets on one directory, one S3 bucket listed under two names)
// would count one physical copy twice, so a write acknowledged by W zones
// could have fewer than W copies.
//
// It refuses duplicate names before sending anything. It then creates one
// probe under VerifyDir in each bucket, checks that each probe is readable
// through its own bucket and absent (ErrNotFound) from every other, and
// deletes the probes, best effort, on every way out while ctx allows:
// 2K + K² requests for K buckets.
//
// A probe seen through another bucket, or a shared name, is an
// *AliasError matching ErrAliased. Any other failure is returned wrapped
// with the bucket's name: an unreachable bucket fails the check with an
// error matching ErrUnavailable, never a pass, and a done ctx with its
// error. A nil bucket is an error. Fewer than two buckets have nothing to
// compare; each still gets its probe, so the check also says that every
// bucket is reachable and lets a probe be created, read and deleted.
func VerifyDistinct(ctx context.Context, buckets ...Bucket) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("objstore: verify distinct: "+format, args...)
	}
	byName := make(map[string]int, len(buckets))
	for i, b := range buckets {
		if b == nil {
			return fail("bucket %d is nil", i)
		}
		if _, dup := byName[b.Name()]; dup {
			return &AliasError{A: b.Name(), B: b.Name()}
		}
		byName[b.Name()] = i
	}
	if err := ctx.Err(); err != nil {
		return fail("%w", err)
	}

	keys := make([]string, len(buckets))
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/distinct-%016x%016x", VerifyDir, rand.Uint64(), rand.Uint64())
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
