// Package gcs is the objstore.Bucket for Google Cloud Storage, built on
// cloud.google.com/go/storage. It lives in its own module
// (github.com/cutline/cutline/objstore/gcs) so that hosts which do not use
// GCS never download the client.
//
// # Using it
//
// The host builds the *storage.Client (credentials, endpoint, transport,
// gRPC or HTTP) and hands it over with the bucket name:
//
//	b, err := gcs.New(client, "zone-c-bucket", gcs.Options{Name: "zone-c"})
//	...
//	// at start-up, over every zone the host writes to:
//	if err := objstore.VerifyZones(ctx, zones, objstore.VerifyOptions{}); err != nil { ... }
//
// # Create-only writes
//
// Create uploads with the precondition DoesNotExist (ifGenerationMatch=0):
// GCS creates the object only if no live object has the name, atomically,
// and answers 412 conditionNotMet otherwise (objstore.ErrExists). The
// upload is a single request carrying a CRC32C that the server checks, and
// its outcome is read from Writer.Close, where the client reports a failed
// precondition.
//
// A 5xx, a 429 or a dropped connection leaves the outcome unknown. Create
// re-sends the upload itself, up to Options.Retries times with
// backoff on Options.Clock; the client's own retries are switched off for
// uploads so that every attempt is known. A re-sent upload that gets 412
// may have met our own earlier attempt, so Create reads the object back:
// identical bytes are a success, other bytes are ErrExists, and an
// unreadable or vanished object is objstore.ErrUnavailable. Reads, lists
// and deletes keep the client's retry policy.
//
// Emulators and GCS-compatible gateways that ignore the precondition would
// let a second writer overwrite the first; objstore.Verify catches that at
// start-up with objstore.ErrNotCreateOnly.
//
// # Errors
//
// Failures are classified inside the package from the client's sentinels,
// the HTTP status (JSON and XML APIs) or the gRPC code:
//
//   - storage.ErrObjectNotExist, 404, NOT_FOUND → objstore.ErrNotFound
//     (Delete: success).
//   - 412 conditionNotMet, FAILED_PRECONDITION on Create → objstore.ErrExists.
//   - 5xx, 408, 429, UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
//     refused or reset connections, truncated bodies, anything
//     unrecognised → objstore.ErrUnavailable: the outcome is unknown.
//   - 401/403, PERMISSION_DENIED, UNAUTHENTICATED →
//     objstore.ErrAccessDenied, never "not found".
//   - storage.ErrBucketNotExist → objstore.ErrNoSuchBucket.
//   - Other 4xx, INVALID_ARGUMENT → objstore.ErrRejected.
//   - When the caller's context ends, the error matches ctx.Err().
//
// GCS answers a read or delete in a bucket that does not exist with the
// same 404 as for a missing object, and the client turns both into
// storage.ErrObjectNotExist: Get then reports ErrNotFound and Delete
// succeeds. List and Create do tell the two apart. objstore.Verify, which
// creates a probe object, therefore refuses a mistyped bucket at start-up;
// run it.
//
// Errors are *objstore.OpError values naming the operation, Options.Name and
// the key, unwrapping to the sentinel and to the client's error.
//
// # Listing
//
// List uses the object listing with Prefix and StartOffset. StartOffset is
// inclusive, so the startAfter key itself is skipped. GCS lists names in
// lexical order; a page holds at most 1000 objects.
package gcs
