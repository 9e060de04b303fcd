// Package objstore is cutline's view of object storage: the Bucket
// interface, its error classification and key rules, and the start-up
// checks Verify and VerifyDistinct.
//
// One Bucket is one zone's bucket. cutline writes each slot of a chain to
// the same key in K buckets and needs exactly five operations from each:
// Create, Get, GetRange, Delete and List. Implementations live in
// subpackages and hosts pick one: mem (in memory), fs (a local directory),
// s3 (aws-sdk-go-v2) and gcs (in its own module). No package of the
// library imports a backend.
//
// # The contract
//
// Create is create-only: it succeeds only when no object exists at the key
// and otherwise fails with ErrExists, leaving the existing object untouched.
// Of any number of concurrent creators of one key exactly one wins, and
// readers never observe a partial object. This one property is what lets a
// fencer's poison object shut out a replaced writer: in each bucket a slot's
// key holds either the writer's flight or the fencer's poison, never both,
// never a mix.
//
// Delete is idempotent. List returns keys in lexical order, which cutline's
// zero-padded numbers turn into numeric order; All pages through it. Byte
// slices are never shared between the caller and the bucket. Every method
// takes a context; a done context yields its error, and a Create made with
// one is never reported as a success.
//
// # Errors
//
// Backends classify their failures inside the backend into sentinels that
// callers test with errors.Is:
//
//   - ErrNotFound: no object at the key. A definite answer.
//   - ErrExists: Create lost to an existing object. A definite answer.
//   - ErrUnavailable: the bucket could not be reached or did not answer
//     (timeouts, 5xx, connection errors, a full disk). The outcome is
//     unknown: a Create may have landed, a Get says nothing about
//     existence. It must never be read as "absent".
//   - ErrAccessDenied, ErrNoSuchBucket: the store refused the credentials
//     or does not have the bucket. Configuration errors for an operator,
//     whatever the backend: definite answers about the request that are
//     never reported as ErrNotFound or ErrExists (a mistyped bucket must
//     not look like an empty slot), and not worth retrying unchanged.
//   - ErrRejected: the store refused the request as malformed or
//     unsupported; retrying it unchanged will not help.
//   - ErrInvalidKey (a *KeyError), ErrInvalidRange: the request was
//     refused locally; nothing was sent.
//   - ErrNotCreateOnly (from Verify), ErrAliased (from VerifyDistinct, an
//     *AliasError): the start-up checks refused a bucket or a zone set.
//
// Only nil, ErrNotFound and ErrExists tell anything about the object at
// the key. Every other error, the refusals and the context's error
// included, leaves its state unknown. Errors are *OpError values naming the
// operation, bucket and key, and unwrap to the sentinel and to the
// backend's own error.
//
// # Keys
//
// ValidateKey is the rule every backend enforces: 1 to MaxKeyLen bytes of
// UTF-8, no control characters or backslashes, no leading or trailing '/',
// no empty, "." or ".." segments. A key that passes cannot name anything
// outside its bucket, or outside the fs backend's root directory. Backends
// may refuse more (fs reserves its temporary directory and limits segments
// to 255 bytes).
//
// # Verify before use
//
// Several S3-compatible stores accept a conditional write and silently
// overwrite. Such a bucket would break every fencing guarantee without a
// single error, so hosts call Verify on every bucket at start-up:
//
//	for _, b := range buckets {
//		if err := objstore.Verify(ctx, b); err != nil {
//			return err // errors.Is(err, objstore.ErrNotCreateOnly): never use it
//		}
//	}
//
// Verify creates a probe under ".cutline-verify/", tries to overwrite it,
// reads it back, deletes it, and refuses a bucket that let the overwrite
// through with an error matching ErrNotCreateOnly and naming the bucket.
// VerifyUnder puts the probe below a prefix, for credentials scoped to one.
//
// Each bucket of a zone set must also be its own physical store: two
// handles on one store (two fs buckets on one directory, one S3 bucket
// listed under two names) count one copy twice, so a write acknowledged
// by W zones could have fewer than W copies. Hosts call VerifyDistinct at
// start-up over the zone set of an epoch, after Verify:
//
//	if err := objstore.VerifyDistinct(ctx, buckets...); err != nil {
//		return err // errors.Is(err, objstore.ErrAliased): fix the configuration
//	}
//
// It refuses two buckets with one name, creates a probe under
// ".cutline-verify/" in each bucket, and refuses the set with an
// *AliasError (matching ErrAliased, naming both buckets) when a probe is
// visible through another bucket than its own; it deletes the probes on
// every way out. An unreachable bucket fails the check with an error
// matching ErrUnavailable: the check never passes without an answer from
// every bucket.
//
// # Choosing a backend
//
//   - mem: tests, examples and simulations; nothing survives the process.
//   - fs: a single machine, or development with real files. Create-only via
//     link(2), fsync before acknowledging.
//   - s3: AWS S3 and compatible stores that honour If-None-Match: *
//     (verify them).
//   - gcs: Google Cloud Storage, with ifGenerationMatch=0.
//
// # Wrappers
//
// Wrappers are Buckets around Buckets and pass the same conformance suite
// (objstore/objstoretest):
//
//   - fault: seeded fault injection: errors by operation and key, whole
//     zones down, lost answers, straggler writes that land late, and
//     request counts.
//   - latency: per-operation delays on an injected clock.
//
// New capabilities grow as optional interfaces checked with a type
// assertion, never as methods added to Bucket.
//
// # Writing a backend
//
// A backend classifies every failure inside itself, with these helpers so
// that all backends answer alike:
//
//   - Precheck before sending anything: the context's error or a
//     *KeyError.
//   - Classify(sentinel, cause) maps the client's error onto a sentinel
//     while errors.As still reaches the client's types; Unavailable(cause)
//     is Classify(ErrUnavailable, cause). What the backend cannot place is
//     ErrUnavailable, never ErrNotFound.
//   - ContextEnded(ctx.Err(), cause) when the caller's context ended before
//     the store answered: that is the answer, whatever the client made of
//     the cancellation.
//   - ReadBack after an ambiguous Create, when "exists" or "conflict" may
//     be the answer to the same call's own earlier attempt: the caller's
//     bytes are a success, other bytes ErrExists, anything else unknown.
//   - clock.Backoff for the backend's own retry loops, slept on an
//     injected clock.
//
// The backend wraps what they return in a *OpError, and runs the
// conformance suite in objstore/objstoretest.
package objstore
