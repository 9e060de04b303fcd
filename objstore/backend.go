package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// This file is for backend implementers: the pieces every Bucket over a
// remote store needs to classify its failures the same way. Errors built
// here are not wrapped in *OpError; the backend adds that wrapper with its
// operation, bucket name and key.

// MaxObjectSize is the largest object, in bytes, that a remote backend
// (s3, gcs, azblob) creates or reads: a chain's largest flight (64 MiB of
// payload and a header of at most 97 bytes) with room to spare. Reads
// allocate the object's size once; a body announced or found to be larger
// is refused with ErrObjectTooLarge rather than buffered without bound.
const MaxObjectSize = 64<<20 + 1<<20

// ErrObjectTooLarge: an object larger than MaxObjectSize, refused by a
// remote backend as an ErrRejected: by Create before anything is sent, by
// Get and GetRange before the body is read past the limit.
var ErrObjectTooLarge = errkind.New(cutline.ErrInvalid, "objstore: object larger than MaxObjectSize")

// Classify wraps cause so that errors.Is matches sentinel while errors.As
// still reaches cause (an SDK's API or HTTP error, say). The message is the
// sentinel's followed by the cause's. A nil cause yields sentinel itself.
// sentinel is normally one of this package's sentinels, or an error that
// wraps one; it must not be nil.
func Classify(sentinel, cause error) error {
	if sentinel == nil {
		panic("objstore: Classify with a nil sentinel")
	}
	if cause == nil {
		return sentinel
	}
	return &classified{kind: sentinel, cause: cause}
}

type classified struct {
	kind  error
	cause error
}

func (c *classified) Error() string   { return c.kind.Error() + ": " + c.cause.Error() }
func (c *classified) Unwrap() []error { return []error{c.kind, c.cause} }

// ContextEnded is the error of a call whose context ended before the store
// answered: it matches ctxErr (ctx.Err(), so context.Canceled or
// context.DeadlineExceeded) and keeps cause, whatever the client made of the
// cancellation, for errors.As. When the caller's context has ended, that is
// the answer, never the client's own classification: a client may report
// its canceled request as a timeout or a reset connection. ctxErr must not
// be nil; cause may be.
func ContextEnded(ctxErr, cause error) error {
	if ctxErr == nil {
		panic("objstore: ContextEnded with a nil context error")
	}
	return Classify(ctxErr, cause)
}

// ReadBack settles an ambiguous Create by reading the key back from b. A
// Create is ambiguous when the store refused it as "exists" or "conflict"
// after an earlier attempt of the same call may have landed: a 412 to a
// re-sent request, a 409 conflicting with a write in flight. cause is the
// store's answer to the last attempt. The outcome:
//
//   - the key holds data: nil, the object is ours;
//   - the key holds other bytes: an error matching ErrExists (and cause);
//   - the key is gone: ErrUnavailable, since an object was there and
//     whether it was ours cannot be known;
//   - ctx ended: ContextEnded(ctx.Err(), the read's error);
//   - the read failed otherwise: ErrUnavailable, joining cause and the
//     read's error.
//
// The error is not wrapped in *OpError.
func ReadBack(ctx context.Context, b Bucket, key string, data []byte, cause error) error {
	got, err := b.Get(ctx, key)
	switch {
	case err == nil && bytes.Equal(got, data):
		return nil
	case err == nil:
		return Classify(ErrExists, cause)
	case errors.Is(err, ErrNotFound):
		return Unavailable(fmt.Errorf("object vanished after an ambiguous create: %w", cause))
	case ctx.Err() != nil:
		return ContextEnded(ctx.Err(), err)
	}
	return Unavailable(fmt.Errorf("reading back after an ambiguous create: %w", errors.Join(cause, err)))
}

// SettleUnknown is the answer to a Create whose attempts all ended with
// the outcome unknown: cerr, an error matching ErrUnavailable, classified
// from cause. A store may answer a conditional PUT of a large body before
// it reads the body (412) and close the connection, so that the client
// sees a reset where the refusal was. Reading the key back (ReadBack)
// tells: our bytes are a success (nil), other bytes an error matching
// ErrExists; absent or unreadable, or ctx ended, the outcome stays
// unknown: cerr, since the create may still land. The error is not
// wrapped in *OpError.
func SettleUnknown(ctx context.Context, b Bucket, key string, data []byte, cause, cerr error) error {
	if ctx.Err() != nil {
		return cerr
	}
	switch rerr := ReadBack(ctx, b, key, data, cause); {
	case rerr == nil:
		return nil
	case errors.Is(rerr, ErrExists):
		return rerr
	}
	return cerr
}

// Precheck is the check a Bucket method makes before it sends a request:
// ctx's error when ctx has ended, ValidateKey's error when the key is
// invalid, nil otherwise. The error is not wrapped in *OpError.
func Precheck(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ValidateKey(key)
}

// ReadBody reads an object's body of size bytes (nil or negative:
// unknown) and closes it, never holding more than limit bytes: a body
// announced or found to be longer is refused with an error matching
// ErrRejected and tooLarge, before it is read past the limit. With a
// known size it allocates once, then reads on to the end of the stream,
// where clients report a failed checksum: a body longer than announced,
// or one that ends early, is ErrUnavailable (the read may be retried).
// When ctx has ended its error is the answer (ContextEnded). The error
// is not wrapped in *OpError.
func ReadBody(ctx context.Context, body io.ReadCloser, size *int64, limit int64, tooLarge error) ([]byte, error) {
	defer body.Close()
	fail := func(err error) ([]byte, error) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ContextEnded(ctxErr, err)
		}
		return nil, Unavailable(fmt.Errorf("reading body: %w", err))
	}
	if size == nil || *size < 0 {
		// No Content-Length: read at most one byte past the limit.
		data, err := io.ReadAll(io.LimitReader(body, limit+1))
		switch {
		case err != nil:
			return fail(err)
		case int64(len(data)) > limit:
			return nil, Classify(ErrRejected, fmt.Errorf("%w: the body has no Content-Length and is longer", tooLarge))
		}
		return data, nil
	}
	if *size > limit {
		return nil, Classify(ErrRejected, fmt.Errorf("%w: Content-Length %d", tooLarge, *size))
	}
	data := make([]byte, *size)
	if _, err := io.ReadFull(body, data); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // ReadFull's answer when no byte came
		}
		return fail(err)
	}
	var extra [1]byte
	switch n, err := io.ReadFull(body, extra[:]); {
	case n > 0:
		return fail(fmt.Errorf("the body is longer than its Content-Length %d", *size))
	case err != io.EOF:
		return fail(err)
	}
	return data, nil
}
