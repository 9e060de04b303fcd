package s3

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
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
	if err := b.remote.CheckCreate(ctx, key, data); err != nil {
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
		cerr := b.remote.Call(ctx, err)
		switch {
		case errors.Is(cerr, objstore.ErrExists):
			if sent <= 1 {
				return b.remote.Err(op, key, cerr)
			}
			b.remote.Logger.WarnContext(ctx, "s3 create: precondition failed after a re-sent request; reading the key back",
				"bucket", b.remote.Name, "key", key, "attempts", sent)
			if err := objstore.ReadBack(ctx, b, key, data, err); err != nil {
				return b.remote.Err(op, key, err)
			}
			return nil
		case errors.Is(cerr, errConflict):
			if retry >= 1 {
				// Our own earlier attempt may be the write we conflict
				// with: our bytes are a success, other bytes ErrExists;
				// an absent or unreadable key is retried.
				switch rerr := objstore.ReadBack(ctx, b, key, data, err); {
				case rerr == nil:
					return nil
				case errors.Is(rerr, objstore.ErrExists):
					return b.remote.Err(op, key, rerr)
				case ctx.Err() != nil:
					return b.remote.Err(op, key, objstore.ContextEnded(ctx.Err(), err))
				}
			}
			if retry >= b.remote.Retries {
				return b.remote.Err(op, key, objstore.Unavailable(
					fmt.Errorf("conflicting writes after %d retries: %w", retry, err)))
			}
			d := b.remote.Backoff.Delay(retry, rand.Uint64())
			b.remote.Logger.DebugContext(ctx, "s3 create: conflicting write, retrying",
				"bucket", b.remote.Name, "key", key, "retry", retry+1, "backoff", d)
			if serr := clock.Sleep(ctx, b.remote.Clock, d); serr != nil {
				return b.remote.Err(op, key, objstore.ContextEnded(serr, err))
			}
		case errors.Is(cerr, objstore.ErrNotFound):
			// A create cannot miss the object; a 404 here is the bucket.
			return b.remote.Err(op, key, objstore.Classify(objstore.ErrNoSuchBucket, err))
		case errors.Is(cerr, objstore.ErrUnavailable):
			if serr := objstore.SettleUnknown(ctx, b, key, data, err, cerr); serr != nil {
				return b.remote.Err(op, key, serr)
			}
			return nil
		default:
			return b.remote.Err(op, key, cerr)
		}
	}
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
