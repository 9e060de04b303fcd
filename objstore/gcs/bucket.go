package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/objstore"
)

// DefaultRetries is how many times Create re-sends an upload whose
// outcome was unknown, when Options.Retries is 0.
const DefaultRetries = 3

// maxListPage bounds a List page (GCS's own page limit).
const maxListPage = 1000

// Options are the optional settings of a Bucket. The zero value works.
type Options struct {
	// Name identifies the bucket in logs and errors (a zone name such as
	// "zone-c"). Default: the GCS bucket name.
	Name string
	// Logger receives debug and warning records. Default: discard.
	Logger *slog.Logger
	// Clock times the backoff between Create's retries. Default: the wall
	// clock.
	Clock clock.Clock
	// Retries bounds how often Create re-sends an upload after an answer
	// that left the outcome unknown (5xx, 429, a dropped connection), at
	// most MaxRetries. 0 means DefaultRetries.
	Retries int
	// Backoff spaces those retries, jittered so that racing creators
	// spread out. Zero fields mean 100ms and 2s.
	Backoff clock.Backoff
}

// Bucket is an objstore.Bucket over one Google Cloud Storage bucket. It is
// safe for concurrent use. Create it with New.
type Bucket struct {
	backoff    clock.Backoff
	bkt        *storage.BucketHandle
	bucket     string
	name       string
	log        *slog.Logger
	clk        clock.Clock
	maxRetries int
}

var _ objstore.Bucket = (*Bucket)(nil)

// MaxRetries bounds the retries of one Create that Options allows.
const MaxRetries = 100

// New returns a Bucket that stores objects in bucket through client. The
// client is the host's (credentials, endpoint, transport, retry policy for
// reads). New sends no request; run objstore.Verify at start-up.
func New(client *storage.Client, bucket string, opts Options) (*Bucket, error) {
	switch {
	case client == nil:
		return nil, &config.Error{Field: "client", Reason: "nil"}
	case bucket == "":
		return nil, &config.Error{Field: "bucket", Reason: "empty"}
	case strings.ContainsAny(bucket, "/\\ ") || len(bucket) > 222:
		return nil, &config.Error{Field: "bucket", Value: fmt.Sprintf("%q", bucket), Reason: "not a bucket name"}
	case opts.Retries < 0 || opts.Retries > MaxRetries:
		return nil, &config.Error{Field: "Retries", Value: opts.Retries, Reason: fmt.Sprintf("must satisfy 0 ≤ Retries ≤ %d", MaxRetries)}
	}
	if err := opts.Backoff.Validate("Backoff"); err != nil {
		return nil, err
	}
	b := &Bucket{
		bkt:        client.Bucket(bucket),
		bucket:     bucket,
		name:       opts.Name,
		log:        opts.Logger,
		clk:        clock.Or(opts.Clock),
		maxRetries: opts.Retries,
		backoff:    opts.Backoff.Or(clock.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}),
	}
	if b.name == "" {
		b.name = bucket
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.maxRetries == 0 {
		b.maxRetries = DefaultRetries
	}
	return b, nil
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.name }

// BucketName returns the GCS bucket name.
func (b *Bucket) BucketName() string { return b.bucket }

func (b *Bucket) opError(op, key string, err error) error {
	return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
}

func (b *Bucket) check(ctx context.Context, op, key string) error {
	if err := objstore.Precheck(ctx, key); err != nil {
		return b.opError(op, key, err)
	}
	return nil
}

func (b *Bucket) fail(ctx context.Context, op, key string, err error) error {
	return b.opError(op, key, classifyCall(ctx, err))
}

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	const op = "get"
	if err := b.check(ctx, op, key); err != nil {
		return nil, err
	}
	r, err := b.bkt.Object(key).NewReader(ctx)
	if err != nil {
		return nil, b.fail(ctx, op, key, err)
	}
	return b.read(ctx, op, key, r, -1)
}

// GetRange implements objstore.Bucket. An offset at or past the end (416)
// is an empty result.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	const op = "getrange"
	if err := b.check(ctx, op, key); err != nil {
		return nil, err
	}
	if offset < 0 || length <= 0 {
		return nil, b.opError(op, key, fmt.Errorf("%w: offset %d length %d", objstore.ErrInvalidRange, offset, length))
	}
	n := length
	if length > math.MaxInt64-offset {
		n = -1 // to the end; the client computes offset+length-1
	}
	r, err := b.bkt.Object(key).NewRangeReader(ctx, offset, n)
	if err != nil {
		cerr := classifyCall(ctx, err)
		if errors.Is(cerr, errRange) {
			return []byte{}, nil
		}
		return nil, b.opError(op, key, cerr)
	}
	return b.read(ctx, op, key, r, length)
}

// maxObject bounds what read buffers: the largest flight (64 MiB of
// payload and a header) with room to spare. A longer body is refused, as
// objstore.ErrRejected, rather than buffered without bound.
const maxObject = 64<<20 + 1<<20

// read drains r. A failure while reading is ErrUnavailable (or the
// context's error): the object may well exist. When the object's size is
// known the buffer is allocated once at that size, so a read costs what
// it returns (a growing buffer would double past it).
func (b *Bucket) read(ctx context.Context, op, key string, r *storage.Reader, limit int64) ([]byte, error) {
	defer r.Close()
	fail := func(err error) ([]byte, error) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, b.opError(op, key, objstore.ContextEnded(ctxErr, err))
		}
		return nil, b.opError(op, key, objstore.Unavailable(fmt.Errorf("reading body: %w", err)))
	}
	want := r.Attrs.Size - r.Attrs.StartOffset
	if limit > 0 && (want < 0 || want > limit) {
		want = limit
	}
	if want > maxObject {
		return nil, b.opError(op, key, objstore.Classify(objstore.ErrRejected, fmt.Errorf("object of %d bytes exceeds %d", want, maxObject)))
	}
	if want <= 0 {
		data, err := io.ReadAll(io.LimitReader(r, maxObject+1))
		if err != nil {
			return fail(err)
		}
		if len(data) > maxObject {
			return nil, b.opError(op, key, objstore.Classify(objstore.ErrRejected, fmt.Errorf("body exceeds %d bytes", maxObject)))
		}
		return data, nil
	}
	buf := make([]byte, want)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fail(err)
	}
	return buf, nil
}

// Delete implements objstore.Bucket. Deleting a missing object succeeds; a
// missing bucket does not.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	const op = "delete"
	if err := b.check(ctx, op, key); err != nil {
		return err
	}
	if err := b.bkt.Object(key).Delete(ctx); err != nil {
		cerr := classifyCall(ctx, err)
		if errors.Is(cerr, objstore.ErrNotFound) {
			return nil
		}
		return b.opError(op, key, cerr)
	}
	return nil
}

// List implements objstore.Bucket with an object listing from
// StartOffset (inclusive, so the startAfter key itself is skipped). A page
// holds at most 1000 objects whatever limit asks.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	const op = "list"
	if err := ctx.Err(); err != nil {
		return nil, b.opError(op, prefix, err)
	}
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, b.opError(op, prefix, err)
	}
	if limit <= 0 || limit > maxListPage {
		limit = maxListPage
	}
	q := &storage.Query{Prefix: prefix}
	if startAfter > prefix {
		q.StartOffset = startAfter
	}
	if err := q.SetAttrSelection([]string{"Name", "Size"}); err != nil {
		return nil, b.opError(op, prefix, err)
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
			return nil, b.fail(ctx, op, prefix, err)
		}
		if attrs.Name <= startAfter || !strings.HasPrefix(attrs.Name, prefix) || attrs.Prefix != "" {
			continue
		}
		page = append(page, objstore.ObjectInfo{Key: attrs.Name, Size: attrs.Size})
	}
	return page, nil
}
