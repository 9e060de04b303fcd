package azblob

import (
	"bytes"
	"context"
	"crypto/md5"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
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
	if err := b.remote.CheckCreate(ctx, key, data); err != nil {
		return err
	}
	sum := md5.Sum(data)
	opts := &blockblob.UploadOptions{
		TransactionalValidation: blob.TransferValidationTypeMD5(sum[:]),
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{
			IfNoneMatch: new(azcore.ETagAny),
		}},
	}
	client := b.container.NewBlockBlobClient(key)
	send := func(ctx context.Context) error {
		// One attempt per call: the Resender re-sends, knowing each.
		once := policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
		_, err := client.Upload(once, streaming.NopCloser(bytes.NewReader(data)), opts)
		return err
	}
	return b.remote.Resender(b).Create(ctx, key, data, send, b.remote.Call)
}
