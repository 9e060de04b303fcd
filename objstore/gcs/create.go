package gcs

import (
	"context"
	"errors"
	"hash/crc32"
	"math/rand/v2"

	"cloud.google.com/go/storage"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// spread out.

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Create implements objstore.Bucket with an upload under the precondition
// DoesNotExist (ifGenerationMatch=0), sent in a single request with a CRC32C
// the server checks.
//
//   - 412 conditionNotMet: an object exists → objstore.ErrExists.
//   - 5xx, 429, a dropped connection: the upload may or may not have landed.
//     Create re-sends it itself (the client's own retries are switched off
//     for this call, so that every attempt is known), up to
//     Options.Retries times with backoff on Options.Clock. If a
//     re-sent upload gets 412, the object may be our earlier attempt: Create
//     reads it back; our bytes → success, other bytes → ErrExists,
//     unreadable or gone → objstore.ErrUnavailable. When retries run out:
//     ErrUnavailable.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	const op = "create"
	if err := b.check(ctx, op, key); err != nil {
		return err
	}
	obj := b.bkt.Object(key).
		If(storage.Conditions{DoesNotExist: true}).
		Retryer(storage.WithPolicy(storage.RetryNever))
	sum := crc32.Checksum(data, crc32c)
	ambiguous := false // an earlier attempt may have landed
	for retry := 0; ; retry++ {
		err := upload(ctx, obj, data, sum)
		if err == nil {
			return nil
		}
		cerr := classifyCall(ctx, err)
		switch {
		case errors.Is(cerr, objstore.ErrExists):
			if !ambiguous {
				return b.opError(op, key, cerr)
			}
			b.log.WarnContext(ctx, "gcs create: precondition failed after a re-sent upload; reading the key back",
				"bucket", b.name, "key", key, "attempts", retry+1)
			if err := objstore.ReadBack(ctx, b, key, data, err); err != nil {
				return b.opError(op, key, err)
			}
			return nil
		case errors.Is(cerr, objstore.ErrUnavailable):
			ambiguous = true
			if retry >= b.maxRetries {
				return b.opError(op, key, cerr)
			}
			d := b.backoff.Delay(retry, rand.Uint64())
			b.log.DebugContext(ctx, "gcs create: outcome unknown, re-sending",
				"bucket", b.name, "key", key, "retry", retry+1, "backoff", d, "err", err)
			if serr := clock.Sleep(ctx, b.clk, d); serr != nil {
				return b.opError(op, key, objstore.ContextEnded(serr, err))
			}
		case errors.Is(cerr, objstore.ErrNotFound):
			// A create cannot miss the object; a 404 here is the bucket.
			return b.opError(op, key, objstore.Classify(objstore.ErrNoSuchBucket, err))
		default:
			return b.opError(op, key, cerr)
		}
	}
}

// upload sends one attempt. The error that matters (a failed precondition
// among them) comes from Close; a Write error is returned when Close has
// nothing better to say.
func upload(ctx context.Context, obj *storage.ObjectHandle, data []byte, sum uint32) error {
	// The writer's context is canceled after the attempt so that its
	// upload goroutine never outlives Create.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(wctx)
	w.ChunkSize = 0 // one request per attempt
	w.CRC32C = sum
	w.SendCRC32C = true
	w.ContentType = "application/octet-stream"
	_, werr := w.Write(data)
	cerr := w.Close()
	if cerr != nil {
		return cerr
	}
	return werr
}
