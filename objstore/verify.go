package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
)

// VerifyDir is the first segment of the probe keys Verify, VerifyZones
// and VerifyDistinct create (and delete again):
// ".cutline-verify/<random>", ".cutline-verify/<random>-race-<i>" and
// ".cutline-verify/distinct-<random>". A bucket that holds cutline data
// must allow objects there.
const VerifyDir = ".cutline-verify"

// The concurrent part of Verify: VerifyRaceKeys fresh keys, each created
// by VerifyRaceCreators creates sent at once. A store that checks for an
// existing object and then writes, with a gap between, lets every create
// that arrives inside the gap through; these numbers bound what the check
// costs, not how narrow a gap it finds.
const (
	VerifyRaceKeys     = 4
	VerifyRaceCreators = 4
)

// VerifyRequests is how many requests Verify sends to a bucket that
// passes: five for the sequential check, and for the concurrent one every
// create, then one read and one delete per key. A backend may add its own
// retries and read-backs below these calls.
const VerifyRequests = 5 + VerifyRaceKeys*(VerifyRaceCreators+2)

// raceProbeSize is the smallest concurrent probe: large enough that a
// store's write takes a moment, so that racing creates overlap in it.
const raceProbeSize = 4 << 10

// Verify checks at start-up that b really enforces create-only writes, the
// property every fencing guarantee rests on, one request at a time and
// under concurrent creates. It is one bucket's part of VerifyZones, which
// is the check a host runs over its zone set.
//
// The sequential check creates a probe object under VerifyDir, creates it
// again with different bytes and expects ErrExists, reads it back and
// expects the first bytes, deletes it, and expects ErrNotFound from a last
// read.
//
// The concurrent check then sends VerifyRaceCreators creates, each with
// its own bytes, of each of VerifyRaceKeys fresh keys, all at once. Of
// each key's creates exactly one must succeed and every other answer
// ErrExists, and the key must read back as the survivor's bytes. Stores
// that refuse a second create one at a time can still let concurrent
// creates through (a check for the key and the write that follows it, with
// a gap between), and would let a replaced writer and its fencer both win
// a slot.
//
// Cost: VerifyRequests requests (29), in eight rounds of requests: five
// sequential ones, then the creates together, the reads together and the
// deletes together. ctx bounds the whole check; a done ctx ends it with
// its error.
//
// A bucket that lets a second create through, by either check, or returns
// bytes that are not the one survivor's, is refused with an error that
// matches ErrNotCreateOnly and names the bucket: several S3-compatible
// stores silently ignore If-None-Match, and some honour it only one
// request at a time. Any other failure (the bucket is unreachable, a
// misclassified answer) is returned wrapped, so that errors.Is(err,
// ErrUnavailable) tells a retryable start-up failure from a bucket that
// must not be used.
//
// Verify removes its probes before returning whenever the bucket lets it.
func Verify(ctx context.Context, b Bucket) error {
	return VerifyUnder(ctx, b, "")
}

// VerifyUnder is Verify with the probes under prefix ("<prefix>/" +
// VerifyDir + "/<random>"), for credentials that only reach part of a
// bucket. An empty prefix is Verify.
func VerifyUnder(ctx context.Context, b Bucket, prefix string) error {
	if b == nil {
		return errors.New("objstore: verify: nil bucket")
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("objstore: verify bucket %q: %s: %w", b.Name(), what, err)
	}
	base := probeKey(prefix, fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()))
	if err := ValidateKey(base + "-race-0"); err != nil {
		return fail("probe key", err)
	}
	if err := verifySequential(ctx, b, base, fail); err != nil {
		return err
	}
	return verifyConcurrent(ctx, b, base, fail)
}

// probeKey is prefix/VerifyDir/name, or VerifyDir/name without a prefix.
func probeKey(prefix, name string) string {
	if prefix == "" {
		return VerifyDir + "/" + name
	}
	return prefix + "/" + VerifyDir + "/" + name
}

// verifySequential is the check one request at a time.
func verifySequential(ctx context.Context, b Bucket, key string, fail func(string, error) error) error {
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

// raceProbe returns the bytes creator c sends for key k: distinct for
// every creator and of a different length, so that a mixed or torn object
// cannot pass for any one of them.
func raceProbe(k, c int) []byte {
	head := fmt.Sprintf("cutline concurrent create-only probe: key %d, creator %d\n", k, c)
	out := make([]byte, raceProbeSize+97*c)
	for i := copy(out, head); i < len(out); i++ {
		out[i] = byte('a' + (k*VerifyRaceCreators+c+i)%26)
	}
	return out
}

// verifyConcurrent is the check under concurrent creates.
func verifyConcurrent(ctx context.Context, b Bucket, base string, fail func(string, error) error) error {
	keys := make([]string, VerifyRaceKeys)
	for k := range keys {
		keys[k] = fmt.Sprintf("%s-race-%d", base, k)
	}
	// Every key may hold an object once its creates were sent, whatever
	// they answered: remove them all on every way out while ctx allows.
	defer func() {
		var wg sync.WaitGroup
		for _, key := range keys {
			wg.Go(func() { _ = b.Delete(ctx, key) })
		}
		wg.Wait()
	}()

	// The creates wait for one signal, so that they leave together.
	errs := make([][]error, VerifyRaceKeys)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range keys {
		errs[k] = make([]error, VerifyRaceCreators)
		for c := range VerifyRaceCreators {
			data := raceProbe(k, c)
			wg.Go(func() {
				<-start
				errs[k][c] = b.Create(ctx, keys[k], data)
			})
		}
	}
	close(start)
	wg.Wait()

	// The survivors' bytes, read back together.
	winner := make([]int, VerifyRaceKeys)
	got := make([][]byte, VerifyRaceKeys)
	readErrs := make([]error, VerifyRaceKeys)
	var proof, other error // the first refusal, the first unknown answer
	note := func(err error) {
		switch {
		case errors.Is(err, ErrNotCreateOnly):
			if proof == nil {
				proof = err
			}
		case other == nil:
			other = err
		}
	}
	for k, key := range keys {
		winner[k] = -1
		won, exists := 0, 0
		for c, err := range errs[k] {
			switch {
			case err == nil:
				won++
				winner[k] = c
			case errors.Is(err, ErrExists):
				exists++
			default:
				note(fail(fmt.Sprintf("concurrent create %d of %s did not answer ErrExists", c, key), err))
			}
		}
		switch {
		case won > 1:
			note(fail(fmt.Sprintf("%d of %d concurrent creates of %s succeeded", won, VerifyRaceCreators, key), ErrNotCreateOnly))
		case won == 0 && exists == VerifyRaceCreators:
			note(fail(fmt.Sprintf("all %d concurrent creates of the fresh key %s answered ErrExists", VerifyRaceCreators, key), ErrNotCreateOnly))
		}
	}
	if proof != nil {
		return proof
	}
	if other != nil {
		return other
	}
	var rg sync.WaitGroup
	for k, key := range keys {
		rg.Go(func() { got[k], readErrs[k] = b.Get(ctx, key) })
	}
	rg.Wait()
	for k, key := range keys {
		switch {
		case readErrs[k] != nil:
			note(fail("read back "+key, readErrs[k]))
		case bytes.Equal(got[k], raceProbe(k, winner[k])):
		default:
			what := fmt.Sprintf("read back %s: got %d bytes that were never written", key, len(got[k]))
			for c := range VerifyRaceCreators {
				if c != winner[k] && bytes.Equal(got[k], raceProbe(k, c)) {
					what = fmt.Sprintf("concurrent create %d of %s was refused but overwrote the survivor's bytes", c, key)
				}
			}
			note(fail(what, ErrNotCreateOnly))
		}
	}
	if proof != nil {
		return proof
	}
	return other
}
