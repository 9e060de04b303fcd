// Package azblob is the objstore.Bucket for Azure Blob Storage, built on
// github.com/Azure/azure-sdk-for-go/sdk/storage/azblob. It lives in its
// own module (github.com/cutline/cutline/objstore/azblob) so that hosts
// which do not use Azure never download the SDK. One Bucket is one
// container; objects are block blobs.
//
// # Using it
//
// The host builds the *azblob.Client (service URL, credentials: Entra ID,
// shared key or SAS, transport, retry policy) and hands it over with the
// container's name:
//
//	b, err := azblob.New(client, "zone-d", azblob.Options{Name: "zone-d"})
//	...
//	// at start-up, over every zone the host writes to:
//	if err := objstore.VerifyZones(ctx, zones, objstore.VerifyOptions{}); err != nil { ... }
//
// NewClient builds a client with a shared key (or none, for a SAS in the
// URL) for tests, demos and tools; it reads no environment variable.
//
// # Create-only writes
//
// Create is Put Blob with "If-None-Match: *": the service creates the blob
// only if none exists at the name, atomically, and answers 409
// BlobAlreadyExists otherwise (objstore.ErrExists; a 412 ConditionNotMet
// is read the same way). The upload is a single request carrying an MD5
// of the bytes, which the service checks before it stores them.
//
// A 5xx, 408, 429 or a dropped connection leaves the outcome unknown.
// Create re-sends the upload itself, up to Options.Retries times with
// backoff on Options.Clock; the client's own retries are switched off for
// uploads so that every attempt is known. A re-sent upload that finds a
// blob may have met our own earlier attempt, so Create reads it back:
// identical bytes are a success, other bytes are ErrExists, and an
// unreadable or vanished blob is objstore.ErrUnavailable. Reads, lists and
// deletes keep the client's retry policy.
//
// An emulator or gateway that ignored the condition, or honoured it only
// one request at a time, would let a second writer overwrite the first;
// objstore.Verify catches both at start-up with objstore.ErrNotCreateOnly.
//
// # Errors
//
// Failures are classified inside the package from the service's error
// code first and the HTTP status second, after the client's own retries:
//
//   - BlobNotFound, 404 → objstore.ErrNotFound (Delete: success).
//   - BlobAlreadyExists, ConditionNotMet, 412 → objstore.ErrExists.
//   - ContainerNotFound, ContainerBeingDeleted, ContainerDisabled (and any
//     404 on Create) → objstore.ErrNoSuchBucket, never "not found": a
//     mistyped container must not look like an empty slot.
//   - AuthenticationFailed, the Authorization* codes, 401/403 →
//     objstore.ErrAccessDenied, never "not found".
//   - 5xx, ServerBusy, OperationTimedOut, 408, 429, other 409s, refused or
//     reset connections, truncated bodies, anything unrecognised →
//     objstore.ErrUnavailable: the outcome is unknown.
//   - Other 4xx → objstore.ErrRejected.
//   - When the caller's context ends, the error matches ctx.Err().
//
// Errors are *objstore.OpError values naming the operation, Options.Name
// and the key, unwrapping to the sentinel and to the client's
// *azcore.ResponseError. The client's messages name the method, host and
// path of the request, never its query (where a SAS would be) or the
// account key.
//
// # Reads and listing
//
// GetRange sends "Range: bytes=off-end", or the open-ended "bytes=off-"
// when the range runs past MaxObjectSize (and so to the end of any object
// this package reads); a 416 InvalidRange (offset at or past the end, any
// range of an empty blob) is an empty result. Objects are read into one
// slice of exactly their Content-Length, up to MaxObjectSize; Create
// refuses a larger object before sending it, Get and GetRange a body
// announced or found larger, with objstore.ErrObjectTooLarge (matching
// objstore.ErrRejected).
//
// List uses List Blobs with Prefix and StartFrom. StartFrom is inclusive,
// so the startAfter key itself is skipped. Azure lists names in lexical
// order; a page holds at most 5000 objects.
//
// Deleting a blob deletes its snapshots with it. An account with blob
// versioning keeps a deleted blob's versions: that does not change what
// Create sees (only a current blob makes it fail), but it keeps the bytes.
package azblob
