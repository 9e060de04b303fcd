package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// VerifyDir is the first segment of the probe keys Verify and
// VerifyDistinct create (and delete again): ".cutline-verify/<random>" and
// ".cutline-verify/distinct-<random>". A bucket that holds cutline data
// must allow objects there.
const VerifyDir = ".cutline-verify"

// Verify checks at start-up that b really enforces create-only writes, the
// property every fencing guarantee rests on. It creates a probe object under
// VerifyDir, creates it again with different bytes and expects ErrExists,
// reads it back and expects the first bytes, deletes it, and expects
// ErrNotFound from a last read. Five requests in all.
//
// A bucket that accepts the second create, or returns the second bytes, is
// refused with an error that matches ErrNotCreateOnly and names the bucket:
// several S3-compatible stores silently ignore If-None-Match. Any other
// failure (the bucket is unreachable, a misclassified answer) is returned
// wrapped, so that errors.Is(err, ErrUnavailable) tells a retryable
// start-up failure from a bucket that must not be used.
//
// Verify removes its probe before returning whenever the bucket lets it.
func Verify(ctx context.Context, b Bucket) error {
	return VerifyUnder(ctx, b, "")
}

// VerifyUnder is Verify with the probe under prefix ("<prefix>/" +
// VerifyDir + "/<random>"), for credentials that only reach part of a
// bucket. An empty prefix is Verify.
func VerifyUnder(ctx context.Context, b Bucket, prefix string) error {
	key := fmt.Sprintf("%s/%016x%016x", VerifyDir, rand.Uint64(), rand.Uint64())
	if prefix != "" {
		key = prefix + "/" + key
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("objstore: verify bucket %q: %s: %w", b.Name(), what, err)
	}
	if err := ValidateKey(key); err != nil {
		return fail("probe key", err)
	}
	first := []byte("cutline create-only probe: first write\n")
	second := []byte("cutline create-only probe: SECOND write, must be refused\n")

	if err := b.Create(ctx, key, first); err != nil {
		return fail("create probe "+key, err)
	}
	// From here on the probe exists: remove it on every way out while ctx
	// allows. A failed cleanup only leaves a small object under VerifyDir.
	deleted := false
	defer func() {
		if !deleted {
			_ = b.Delete(ctx, key)
		}
	}()

	err := b.Create(ctx, key, second)
	switch {
	case err == nil:
		return fail("second create of "+key+" succeeded", ErrNotCreateOnly)
	case !errors.Is(err, ErrExists):
		return fail("second create of "+key+" did not answer ErrExists", err)
	}

	got, err := b.Get(ctx, key)
	switch {
	case err != nil:
		return fail("read back "+key, err)
	case bytes.Equal(got, second):
		return fail("the refused second create overwrote "+key, ErrNotCreateOnly)
	case !bytes.Equal(got, first):
		return fail(fmt.Sprintf("read back %s: got %d bytes that were never written", key, len(got)), ErrNotCreateOnly)
	}

	if err := b.Delete(ctx, key); err != nil {
		return fail("delete probe "+key, err)
	}
	deleted = true
	if _, err := b.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		if err == nil {
			err = errors.New("the deleted probe is still readable")
		}
		return fail("read of deleted probe "+key+" did not answer ErrNotFound", err)
	}
	return nil
}
