// Package objstore is cutline's view of object storage: the Bucket
// interface, its error classification and key rules, and the start-up
// check VerifyZones.
//
// One Bucket is one zone's bucket. cutline writes each slot of a chain to
// the same key in K buckets and needs exactly five operations from each:
// Create, Get, GetRange, Delete and List. Implementations live in
// subpackages and hosts pick one: mem (in memory), fs (a local directory),
// s3 (aws-sdk-go-v2), and gcs and azblob (each in its own module). No
// package of the library imports a backend.
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
//   - ErrNotCreateOnly (from Verify), ErrAliased (an *AliasError): the
//     start-up check VerifyZones refused a bucket or a zone set.
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
// overwrite, and some refuse a second create one request at a time but
// let concurrent creates of one key all succeed. Such a bucket would break
// every fencing guarantee without a single error, so a host runs one
// check over its zone set at start-up:
//
//	if err := objstore.VerifyZones(ctx, zones, objstore.VerifyOptions{}); err != nil {
//		return err // ErrNotCreateOnly: never use that bucket; ErrAliased: fix the configuration
//	}
//
// VerifyZones refuses the set unless every bucket enforces create-only
// writes and the buckets are as many physical stores as handles. Two
// handles on one store (two fs buckets on one directory, one S3 bucket
// listed under two names) each pass the create-only checks, yet count one
// copy twice, so that a write acknowledged by W zones could have fewer
// than W copies: the checks are one call so that no host runs one without
// the other.
//
// Its create-only check of each bucket is Verify: a probe under
// ".cutline-verify/" is created, created again (ErrExists expected), read
// back, deleted and read again (ErrNotFound expected); then
// VerifyRaceCreators creates of each of VerifyRaceKeys fresh keys are sent
// at once, and of each key's creates exactly one must succeed, every other
// answer ErrExists, and the key must read back as the survivor's bytes.
// That is VerifyRequests (29) requests per bucket in eight rounds, the
// buckets side by side. The comparison of the buckets then creates a probe
// in each, reads every probe through every bucket, and deletes them: 2K +
// K² requests for K buckets. The probes are deleted on every way out.
// VerifyOptions.Prefix puts them below a prefix, for credentials scoped to
// one.
//
// A bucket that lets a second create through is refused with an error
// matching ErrNotCreateOnly; two handles on one store with an *AliasError
// matching ErrAliased, naming both. An unreachable bucket fails the check
// with an error matching ErrUnavailable: it never passes without an answer
// from every bucket. Verify alone checks one bucket, for a tool that looks
// at a bucket before it joins a zone set.
//
// # Choosing a backend
//
//   - mem: tests, examples and simulations; nothing survives the process.
//   - fs: a single machine, or development with real files. Create-only via
//     link(2), fsync before acknowledging.
//   - s3: AWS S3 and compatible stores that honour If-None-Match: *
//     (verify them).
//   - gcs: Google Cloud Storage, with ifGenerationMatch=0.
//   - azblob: Azure Blob Storage, with If-None-Match: *.
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
//   - observe: every request reported once it returns (bucket,
//     operation, outcome), for a host's metrics.
//
// New capabilities grow as optional interfaces checked with a type
// assertion, never as methods added to Bucket.
//
// # Writing a backend
//
// A backend classifies every failure inside itself, with these helpers so
// that all backends answer alike. A backend over a remote store takes
// RemoteOptions as its Options (Name, Logger, Clock, Retries, Backoff,
// with the store's own defaults), and its New is NewRemote, which checks
// the client, the bucket's name and the options, each refusal a
// *cutline.ConfigError naming the field. The Remote it returns does
// around each request what every such backend does:
// CheckCreate, CheckRange, CheckList and Check before anything is sent
// (the key, the range, the size against MaxObjectSize, refused with
// ErrObjectTooLarge; List's page size), Resender for Create's re-sends,
// Call and Fail to classify a failure with the
// backend's own table of codes (ClassifyStatus serving for a bare HTTP
// status), Delete around the store's request (a missing object is a
// success), RangeFailed for the answer GetRange settles itself
// (ErrUnsatisfiableRange), and ReadBody; the s3, gcs and azblob backends
// supply only their requests and codes.
// Underneath are:
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
