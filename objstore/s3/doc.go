// Package s3 is the objstore.Bucket for Amazon S3 and S3-compatible stores,
// built on aws-sdk-go-v2.
//
// # Using it
//
// The host builds the *s3.Client (endpoint, region, addressing style, TLS,
// credentials, retry policy are all the host's) and hands it over with the
// bucket name:
//
//	b, err := s3.New(client, "zone-a-bucket", s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "zone-a"}})
//	...
//	// at start-up, over every zone the host writes to:
//	if err := objstore.VerifyZones(ctx, zones, objstore.VerifyOptions{}); err != nil { ... }
//
// NewClient builds a client from static credentials for tests, demos and
// tools; it reads no environment variable or shared config file. Give
// either client an HTTP client sized for the writer window (see HTTP
// connections below): the SDK's default one is not.
//
// # HTTP connections
//
// Every Create, Get, Delete and List is one HTTP request, and a writer
// keeps up to its window of appends in flight in each of the K zones it
// writes to. The SDK's default HTTP client keeps 10 idle connections per
// host (net/http's own default is 2): past that, each finished request
// closes its connection and the next one dials anew, leaving the closed
// socket in TIME_WAIT; two hundred concurrent appends on the default
// client left 30,000 of them. Size the client for the window:
//
//   - MaxIdleConnsPerHost ≥ the requests in flight to one endpoint: the
//     window when each bucket has its own host (virtual-hosted
//     addressing), the window times the buckets sharing an endpoint
//     (path-style addressing of several buckets on one server), plus what
//     readers and fencers add.
//   - MaxIdleConns ≥ window × K when one client serves all K zones (0
//     means no limit).
//   - MaxConnsPerHost 0 (no cap) or above the window: a lower cap queues
//     appends behind each other.
//   - Timeouts on connections, not requests: dial and TLS handshake about
//     10 s, response headers about 30 s, idle connections closed after
//     about 90 s. No http.Client.Timeout: the caller's context bounds each
//     call, and a client-wide clock would cut large uploads short.
//
// NewHTTPClient(connsPerHost) returns such a client; pass it as
// ClientConfig.HTTPClient or as the HTTPClient of the host's own
// s3.Options, one client for all zones. TLS and proxy settings stay the
// host's: set them on its *http.Transport, or build the client yourself
// with the numbers above. Credentials never pass through the HTTP client's
// configuration; the SDK signs each request, and no error of this package
// contains the secret key.
//
// # Create-only writes
//
// Create is PutObject with "If-None-Match: *": the store writes the object
// only if the key is free, atomically, and answers 412 PreconditionFailed
// otherwise (reported as objstore.ErrExists). Amazon S3 supports it on
// general purpose and directory buckets alike. A 409
// ConditionalRequestConflict (another write to the same key was in flight)
// is retried with backoff on Options.Clock; from the second conflict on the
// key is read back first, so a conflict with our own earlier attempt ends in
// success, and a conflict with a different object ends in ErrExists.
//
// The SDK re-sends a request after a 5xx or a dropped connection. When a
// re-sent Create gets 412, the object may be our own first attempt, so
// Create reads it back: identical bytes are a success, anything else is
// ErrExists, and an unreadable key is objstore.ErrUnavailable.
//
// Some S3-compatible stores, and older releases of others, accept the
// If-None-Match header on PUT and ignore it: the second writer silently
// overwrites the first. Such a store breaks every fencing guarantee, and
// nothing in a single successful PUT reveals it. Others refuse the second
// of two PUTs one after the other, but check for the key and then write
// with a gap between, so that concurrent PUTs of one key all succeed.
// objstore.Verify catches both: it creates a probe twice, then sends
// several concurrent creates of a few fresh keys, and refuses the bucket
// with objstore.ErrNotCreateOnly unless every second create is refused and
// exactly one of each key's concurrent creates succeeds. It is part of
// objstore.VerifyZones, which a host runs over its zones when it starts.
//
// GetRange sends "Range: bytes=off-end", or the open-ended "bytes=off-"
// when the range runs past MaxObjectSize (and so to the end of any object
// this package reads): some stores add to an end near 2⁶³ and overflow.
//
// # Errors
//
// Every failure is classified inside the package, from the API error code
// first and the HTTP status second, after the SDK's own retries:
//
//   - NoSuchKey, 404 → objstore.ErrNotFound (Delete: success).
//   - PreconditionFailed, 412 on Create → objstore.ErrExists.
//   - 5xx, SlowDown and other throttling, 408, 429, timeouts, refused or
//     reset connections, truncated bodies, anything unrecognised →
//     objstore.ErrUnavailable: the outcome is unknown.
//   - AccessDenied, signature and token errors, 401/403 →
//     objstore.ErrAccessDenied. A refusal is never reported as "not found".
//   - NoSuchBucket (and any 404 on Create) → objstore.ErrNoSuchBucket, also
//     never "not found": a mistyped bucket name must not look like an empty
//     slot.
//   - Other 4xx → objstore.ErrRejected.
//   - When the caller's context ends, the error matches ctx.Err().
//
// Errors are *objstore.OpError values naming the operation, Options.Name and
// the key; they unwrap to the sentinel and to the SDK's error (errors.As
// reaches smithy.APIError and the HTTP response error). The SDK's messages
// carry the status, request id and the store's message, never the secret
// key.
//
// # Endpoints and addressing
//
// Amazon S3 uses virtual-hosted addressing (bucket.host/key). Self-hosted
// S3-compatible stores (versitygw, MinIO, Ceph RGW, ...) usually need
// path-style addressing (host/bucket/key): set UsePathStyle on the client,
// or ClientConfig.PathStyle with NewClient. Keys are validated with
// objstore.ValidateKey before any request, so a key can never name another
// bucket or escape through "..".
//
// # Directory buckets (S3 Express One Zone)
//
// Directory buckets (names ending in "--x-s3") support conditional writes,
// so Create, Get, GetRange and Delete behave as above; they are reached
// through zonal endpoints with virtual-hosted addressing only (no path
// style), which the SDK resolves by itself. Only List differs:
// S3 does not return their keys in lexical order, does not accept
// StartAfter, and accepts only prefixes that end in '/'. List detects such
// buckets by name (or Options.DirectoryBucket) and then reads every key
// under the prefix's enclosing '/' directory, filters and sorts them, and
// returns the first page: correct, but each call costs as many requests as
// that directory has thousands of keys. Keep directories small (cutline's
// key layout puts each epoch under its own prefix).
//
// # Limits
//
// A List page holds at most 1000 objects (S3's page size), whatever limit
// asks. Objects are sent in a single PutObject and read into one slice of
// exactly their Content-Length, up to MaxObjectSize (65 MiB: a chain's
// largest flight is 64 MiB of payload and a header of at most 97 bytes).
// Create refuses a larger object before sending it, and Get and GetRange
// refuse a body announced or found larger, with objstore.ErrObjectTooLarge (matching
// objstore.ErrRejected), so that no response can make a reader buffer
// without bound. A body longer or shorter than its Content-Length is
// objstore.ErrUnavailable.
package s3
