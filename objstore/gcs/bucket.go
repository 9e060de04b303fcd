package gcs

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// DefaultRetries is how many times Create re-sends an upload whose
// outcome was unknown, when Options.Retries is 0.
const DefaultRetries = 3

// MaxRetries bounds the retries of one Create that Options allows.
const MaxRetries = objstore.MaxRetries

// maxListPage bounds a List page (GCS's own page limit).
const maxListPage = 1000

// Options are the optional settings of a Bucket, those of every remote
// backend; the zero value works. Here Name defaults to the GCS bucket
// name; Retries bounds how often Create re-sends an upload after an
// answer that left the outcome unknown (5xx, 429, a dropped connection),
// DefaultRetries when 0; Backoff's zero fields mean 100ms and 2s.
type Options = objstore.RemoteOptions

// store is what New checks and fills in.
var store = objstore.RemoteStore{
	Kind:      "gcs",
	NameField: "bucket",
	ValidName: func(name string) bool { return !strings.ContainsAny(name, "/\\ ") && len(name) <= 222 },
	NameRule:  "not a bucket name",
	Defaults:  Options{Retries: DefaultRetries, Backoff: clock.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}},
	Classify:  classify,
}

// Bucket is an objstore.Bucket over one Google Cloud Storage bucket. It is
// safe for concurrent use. Create it with New.
type Bucket struct {
	bkt    *storage.BucketHandle
	remote objstore.Remote
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns a Bucket that stores objects in bucket through client. The
// client is the host's (credentials, endpoint, transport, retry policy for
// reads). New sends no request; run objstore.Verify at start-up.
func New(client *storage.Client, bucket string, opts Options) (*Bucket, error) {
	remote, err := objstore.NewRemote(client, bucket, opts, store)
	if err != nil {
		return nil, err
	}
	return &Bucket{bkt: client.Bucket(bucket), remote: remote}, nil
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.remote.Name }

// BucketName returns the GCS bucket name.
func (b *Bucket) BucketName() string { return b.bkt.BucketName() }

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	const op = "get"
	if err := b.remote.Check(ctx, op, key); err != nil {
		return nil, err
	}
	r, err := b.bkt.Object(key).NewReader(ctx)
	if err != nil {
		return nil, b.remote.Fail(ctx, op, key, err)
	}
	return b.read(ctx, op, key, r, -1)
}

// GetRange implements objstore.Bucket. An offset at or past the end (416)
// is an empty result.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	const op = "getrange"
	if err := b.remote.CheckRange(ctx, key, offset, length); err != nil {
		return nil, err
	}
	n := length
	if length > math.MaxInt64-offset {
		n = -1 // to the end; the client computes offset+length-1
	}
	r, err := b.bkt.Object(key).NewRangeReader(ctx, offset, n)
	if err != nil {
		return b.remote.RangeFailed(ctx, key, err)
	}
	return b.read(ctx, op, key, r, length)
}

// read drains r, at most objstore.MaxObjectSize bytes (Remote.ReadBody:
// a failure while reading is ErrUnavailable or the context's error, the
// object may well exist), and returns at most length of them when length
// is positive. When the body's size is known the buffer is allocated once
// at that size, so a read costs what it returns.
func (b *Bucket) read(ctx context.Context, op, key string, r *storage.Reader, length int64) ([]byte, error) {
	size := r.Remain()
	data, err := b.remote.ReadBody(ctx, op, key, r, &size)
	if err != nil || length <= 0 {
		return data, err
	}
	return objstore.RangeOf(data, 0, length, false), nil
}

// Delete implements objstore.Bucket. Deleting a missing object succeeds; a
// missing bucket does not.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	return b.remote.Delete(ctx, key, b.bkt.Object(key).Delete)
}

// List implements objstore.Bucket with an object listing from
// StartOffset (inclusive, so the startAfter key itself is skipped). A page
// holds at most 1000 objects whatever limit asks.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	const op = "list"
	limit, err := b.remote.CheckList(ctx, prefix, limit, maxListPage)
	if err != nil {
		return nil, err
	}
	q := &storage.Query{Prefix: prefix}
	if startAfter > prefix {
		q.StartOffset = startAfter
	}
	if err := q.SetAttrSelection([]string{"Name", "Size"}); err != nil {
		return nil, b.remote.Err(op, prefix, err)
	}
	it := b.bkt.Objects(ctx, q)
	// One more than limit: the first may be startAfter itself.
	it.PageInfo().MaxSize = limit + 1
	page := make([]objstore.ObjectInfo, 0, min(limit, 64))
	for len(page) < limit {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, b.remote.Fail(ctx, op, prefix, err)
		}
		if attrs.Name <= startAfter || !strings.HasPrefix(attrs.Name, prefix) || attrs.Prefix != "" {
			continue
		}
		page = append(page, objstore.ObjectInfo{Key: attrs.Name, Size: attrs.Size})
	}
	return page, nil
}
