package azblob

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// Create implements objstore.Bucket with Put Blob and "If-None-Match: *",
// in a single request carrying an MD5 of the bytes that the service
// checks.
//
//   - 409 BlobAlreadyExists (or 412 ConditionNotMet): a blob exists →
//     objstore.ErrExists.
//   - 5xx, 408, 429, a dropped connection: the upload may or may not have
//     landed. Create re-sends it itself (the client's own retries are
//     switched off for this call, so that every attempt is known), up to
//     Options.Retries times with backoff on Options.Clock. If a re-sent
//     upload finds a blob, it may be our earlier attempt: Create reads it
//     back; our bytes → success, other bytes → ErrExists, unreadable or
//     gone → objstore.ErrUnavailable. When retries run out:
//     ErrUnavailable.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	const op = "create"
	if err := b.check(ctx, op, key); err != nil {
		return err
	}
	if len(data) > MaxObjectSize {
		return b.opError(op, key, objstore.Classify(objstore.ErrRejected,
			fmt.Errorf("%w: %d bytes", ErrTooLarge, len(data))))
	}
	sum := md5.Sum(data)
	opts := &blockblob.UploadOptions{
		TransactionalValidation: blob.TransferValidationTypeMD5(sum[:]),
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{
			IfNoneMatch: new(azcore.ETagAny),
		}},
	}
	client := b.container.NewBlockBlobClient(key)
	once := policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
	ambiguous := false // an earlier attempt may have landed
	for retry := 0; ; retry++ {
		_, err := client.Upload(once, streaming.NopCloser(bytes.NewReader(data)), opts)
		if err == nil {
			return nil
		}
		cerr := classifyCall(ctx, err)
		switch {
		case errors.Is(cerr, objstore.ErrExists):
			if !ambiguous {
				return b.opError(op, key, cerr)
			}
			b.log.WarnContext(ctx, "azblob create: the blob exists after a re-sent upload; reading it back",
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
			b.log.DebugContext(ctx, "azblob create: outcome unknown, re-sending",
				"bucket", b.name, "key", key, "retry", retry+1, "backoff", d, "err", err)
			if serr := clock.Sleep(ctx, b.clk, d); serr != nil {
				return b.opError(op, key, objstore.ContextEnded(serr, err))
			}
		case errors.Is(cerr, objstore.ErrNotFound):
			// A create cannot miss the blob; a 404 here is the container.
			return b.opError(op, key, objstore.Classify(objstore.ErrNoSuchBucket, err))
		default:
			return b.opError(op, key, cerr)
		}
	}
}
