package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// This file is for backend implementers: the pieces every Bucket over a
// remote store needs to classify its failures the same way. Errors built
// here are not wrapped in *OpError; the backend adds that wrapper with its
// operation, bucket name and key.

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

// Precheck is the check a Bucket method makes before it sends a request:
// ctx's error when ctx has ended, ValidateKey's error when the key is
// invalid, nil otherwise. The error is not wrapped in *OpError.
func Precheck(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ValidateKey(key)
}
