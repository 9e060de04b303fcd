package s3

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// Backoff between conflict retries: base doubled per retry, capped, half of
// it random so that racing creators spread out.
const (
	conflictBackoffBase = 25 * time.Millisecond
	conflictBackoffMax  = time.Second
)

// Create implements objstore.Bucket with PutObject and "If-None-Match: *".
//
//   - 412 PreconditionFailed: an object exists → objstore.ErrExists.
//   - 409 ConditionalRequestConflict (a concurrent write to the same key was
//     in progress): retried with backoff on the injected clock. From the
//     second conflict on, the key is read back first: our bytes → success,
//     other bytes → ErrExists, absent → retry. When retries run out the
//     outcome is unknown → objstore.ErrUnavailable.
//   - When the SDK's retryer re-sent the request (after a 5xx or a dropped
//     connection), a 412 may be the answer to our own earlier attempt that
//     landed. Create then reads the key back: our bytes → success, other
//     bytes → ErrExists, unreadable → ErrUnavailable.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	const op = "create"
	if err := b.check(ctx, op, key); err != nil {
		return err
	}
	sent := 0 // HTTP attempts made by this call, across SDK retries
	for retry := 0; ; retry++ {
		_, err := b.client.PutObject(ctx, &awss3.PutObjectInput{
			Bucket:        &b.bucket,
			Key:           &key,
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			IfNoneMatch:   aws.String("*"),
		}, countAttempts(&sent))
		if err == nil {
			return nil
		}
		k, cerr := classifyCall(ctx, err)
		switch k {
		case kindExists:
			if sent <= 1 {
				return b.opError(op, key, wrap(k, cerr))
			}
			b.log.WarnContext(ctx, "s3 create: precondition failed after a re-sent request; reading the key back",
				"bucket", b.name, "key", key, "attempts", sent)
			return b.afterAmbiguousExists(ctx, key, data, cerr)
		case kindConflict:
			if retry >= 1 {
				switch done, oerr := b.observe(ctx, key, data); {
				case done:
					return oerr
				case ctx.Err() != nil:
					return b.opError(op, key, &contextError{ctxErr: ctx.Err(), cause: cerr})
				}
			}
			if retry >= b.maxConflict {
				return b.opError(op, key, objstore.Unavailable(
					fmt.Errorf("conflicting writes after %d retries: %w", retry, cerr)))
			}
			d := conflictBackoff(retry)
			b.log.DebugContext(ctx, "s3 create: conflicting write, retrying",
				"bucket", b.name, "key", key, "retry", retry+1, "backoff", d)
			if err := clock.Sleep(ctx, b.clk, d); err != nil {
				return b.opError(op, key, &contextError{ctxErr: err, cause: cerr})
			}
		case kindNotFound:
			// A create cannot miss the object; a 404 here is the bucket.
			return b.opError(op, key, wrap(kindNoBucket, cerr))
		default:
			return b.opError(op, key, wrap(k, cerr))
		}
	}
}

// observe reads key back after a conflict. done reports a final answer:
// nil when the object holds data, ErrExists when it holds other bytes. An
// absent or unreadable object is not final: the caller retries.
func (b *Bucket) observe(ctx context.Context, key string, data []byte) (done bool, err error) {
	got, gerr := b.Get(ctx, key)
	switch {
	case gerr == nil && bytes.Equal(got, data):
		return true, nil
	case gerr == nil:
		return true, b.opError("create", key, fmt.Errorf("%w (read back after a conflicting write)", objstore.ErrExists))
	}
	return false, gerr
}

// afterAmbiguousExists settles a 412 received after the SDK re-sent the
// request: it may be our own earlier attempt that is in the bucket.
func (b *Bucket) afterAmbiguousExists(ctx context.Context, key string, data []byte, cause error) error {
	got, gerr := b.Get(ctx, key)
	switch {
	case gerr == nil && bytes.Equal(got, data):
		return nil
	case gerr == nil:
		return b.opError("create", key, wrap(kindExists, cause))
	case errors.Is(gerr, objstore.ErrNotFound):
		// It existed when the 412 was sent and is gone now; whether it was
		// ours cannot be known.
		return b.opError("create", key, objstore.Unavailable(
			fmt.Errorf("object vanished after an ambiguous precondition failure: %w", cause)))
	case ctx.Err() != nil:
		return b.opError("create", key, &contextError{ctxErr: ctx.Err(), cause: gerr})
	}
	return b.opError("create", key, objstore.Unavailable(
		fmt.Errorf("reading back after an ambiguous precondition failure: %w", errors.Join(cause, gerr))))
}

func conflictBackoff(retry int) time.Duration {
	d := conflictBackoffBase << min(retry, 10)
	d = min(d, conflictBackoffMax)
	return d/2 + rand.N(d/2+1)
}

// countAttempts adds a middleware after the SDK's retry loop that counts
// every HTTP attempt of one call.
func countAttempts(n *int) func(*awss3.Options) {
	return func(o *awss3.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("cutlineCountAttempts",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					*n++
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

func sortInfos(infos []objstore.ObjectInfo) {
	slices.SortFunc(infos, func(a, b objstore.ObjectInfo) int { return cmp.Compare(a.Key, b.Key) })
}
