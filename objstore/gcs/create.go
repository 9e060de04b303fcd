package gcs

import (
	"context"
	"hash/crc32"

	"cloud.google.com/go/storage"
)

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
	if err := b.remote.CheckCreate(ctx, key, data); err != nil {
		return err
	}
	obj := b.bkt.Object(key).
		If(storage.Conditions{DoesNotExist: true}).
		Retryer(storage.WithPolicy(storage.RetryNever))
	sum := crc32.Checksum(data, crc32c)
	return b.remote.Resender(b).Create(ctx, key, data,
		func(ctx context.Context) error { return upload(ctx, obj, data, sum) }, b.remote.Call)
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
