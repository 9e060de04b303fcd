package s3

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// DefaultRetries is how many times Create retries a 409
// ConditionalRequestConflict when Options.Retries is 0.
const DefaultRetries = 5

// MaxRetries bounds the retries of one Create that Options allows.
const MaxRetries = objstore.MaxRetries

// maxListKeys is S3's page size limit for ListObjectsV2.
const maxListKeys = 1000

// directoryBucketSuffix ends the name of every S3 Express One Zone
// (directory) bucket.
const directoryBucketSuffix = "--x-s3"

// MaxObjectSize is the largest object, in bytes, that Create writes and
// Get and GetRange read (objstore.MaxObjectSize). A larger one is refused
// with objstore.ErrObjectTooLarge, as an objstore.ErrRejected.
const MaxObjectSize = objstore.MaxObjectSize

// Options are the optional settings of a Bucket. The zero value works.
type Options struct {
	// RemoteOptions are the settings of every remote backend. Here Name
	// defaults to the S3 bucket name; Retries bounds how often Create
	// retries after a 409 ConditionalRequestConflict, DefaultRetries
	// when 0; Backoff's zero fields mean 25ms and 1s.
	objstore.RemoteOptions
	// DirectoryBucket makes List work around directory-bucket listing (no
	// StartAfter, prefixes only up to a '/', no lexical order). It is
	// switched on automatically for bucket names ending in "--x-s3".
	DirectoryBucket bool
}

// store is what New checks and fills in.
var store = objstore.RemoteStore{
	Kind:      "s3",
	NameField: "bucket",
	ValidName: func(name string) bool { return !strings.ContainsAny(name, "/\\ ") && len(name) <= 255 },
	NameRule:  "not a bucket name",
	Defaults:  objstore.RemoteOptions{Retries: DefaultRetries, Backoff: clock.Backoff{Min: 25 * time.Millisecond, Max: time.Second}},
	Classify:  classify,
}

// Bucket is an objstore.Bucket over one S3 bucket. It is safe for
// concurrent use. Create it with New.
type Bucket struct {
	client    *awss3.Client
	bucket    string
	directory bool
	remote    objstore.Remote
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns a Bucket that stores objects in bucket through client. The
// client is the host's: its endpoint, addressing style, TLS, retry policy
// and credentials are used untouched. New sends no request; run
// objstore.Verify at start-up to check that the store enforces create-only
// writes.
func New(client *awss3.Client, bucket string, opts Options) (*Bucket, error) {
	remote, err := objstore.NewRemote(client, bucket, opts.RemoteOptions, store)
	if err != nil {
		return nil, err
	}
	directory := opts.DirectoryBucket || strings.HasSuffix(bucket, directoryBucketSuffix)
	return &Bucket{client: client, bucket: bucket, directory: directory, remote: remote}, nil
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.remote.Name }

// BucketName returns the S3 bucket name.
func (b *Bucket) BucketName() string { return b.bucket }

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	const op = "get"
	if err := b.remote.Check(ctx, op, key); err != nil {
		return nil, err
	}
	out, err := b.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return nil, b.remote.Fail(ctx, op, key, err)
	}
	return b.remote.ReadBody(ctx, op, key, out.Body, out.ContentLength)
}

// GetRange implements objstore.Bucket. It sends "Range: bytes=off-end",
// or the open-ended "bytes=off-" when the range runs past MaxObjectSize:
// no object this package reads is that long, so such a range runs to the
// end, and saying so spares the store an end near 2⁶³ that some add to
// and overflow. A 416 InvalidRange (offset at or past the end) is an
// empty result.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	const op = "getrange"
	if err := b.remote.CheckRange(ctx, key, offset, length); err != nil {
		return nil, err
	}
	rng := rangeHeader(offset, length)
	out, err := b.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.bucket, Key: &key, Range: &rng})
	if err != nil {
		return b.remote.RangeFailed(ctx, key, err)
	}
	data, err := b.remote.ReadBody(ctx, op, key, out.Body, out.ContentLength)
	if err != nil {
		return nil, err
	}
	// Without a Content-Range the store ignored the Range header and sent
	// the whole object.
	return objstore.RangeOf(data, offset, length, out.ContentRange == nil || *out.ContentRange == ""), nil
}

// rangeHeader is GetRange's Range header.
func rangeHeader(offset, length int64) string {
	if objstore.OpenEndedRange(offset, length) {
		return fmt.Sprintf("bytes=%d-", offset)
	}
	return fmt.Sprintf("bytes=%d-%d", offset, offset+length-1)
}

// Delete implements objstore.Bucket. Deleting a missing object succeeds; a
// missing bucket does not.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	return b.remote.Delete(ctx, key, func(ctx context.Context) error {
		_, err := b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &b.bucket, Key: &key})
		return err
	})
}

// List implements objstore.Bucket with ListObjectsV2 (Prefix, StartAfter,
// MaxKeys). A page holds at most 1000 objects whatever limit asks.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	const op = "list"
	limit, err := b.remote.CheckList(ctx, prefix, limit, maxListKeys)
	if err != nil {
		return nil, err
	}
	if b.directory {
		return b.listDirectory(ctx, prefix, startAfter, limit)
	}
	in := &awss3.ListObjectsV2Input{Bucket: &b.bucket, MaxKeys: aws.Int32(int32(limit))}
	if prefix != "" {
		in.Prefix = &prefix
	}
	if startAfter != "" {
		in.StartAfter = &startAfter
	}
	for {
		out, err := b.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, b.remote.Fail(ctx, op, prefix, err)
		}
		page := collect(out, prefix, startAfter)
		// An empty but truncated page is not the end: S3 may return one.
		if len(page) > 0 || !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			sortInfos(page)
			if len(page) > limit {
				page = page[:limit]
			}
			return page, nil
		}
		in.ContinuationToken = out.NextContinuationToken
		in.StartAfter = nil
	}
}

// listDirectory lists a directory bucket, where ListObjectsV2 accepts only
// prefixes that end in '/', has no StartAfter and returns keys in no
// particular order. It reads every key under the enclosing '/' prefix,
// filters and sorts them, and returns the first limit: each call costs as
// many requests as that prefix has pages of 1000 keys.
func (b *Bucket) listDirectory(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	const op = "list"
	in := &awss3.ListObjectsV2Input{Bucket: &b.bucket, MaxKeys: aws.Int32(maxListKeys)}
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir := prefix[:i+1]
		in.Prefix = &dir
	}
	var all []objstore.ObjectInfo
	for {
		out, err := b.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, b.remote.Fail(ctx, op, prefix, err)
		}
		all = append(all, collect(out, prefix, startAfter)...)
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	sortInfos(all)
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// collect keeps the listed objects that match prefix and sort after
// startAfter; a store that ignores either parameter cannot leak keys.
func collect(out *awss3.ListObjectsV2Output, prefix, startAfter string) []objstore.ObjectInfo {
	page := make([]objstore.ObjectInfo, 0, len(out.Contents))
	for _, o := range out.Contents {
		k := aws.ToString(o.Key)
		if k == "" || !strings.HasPrefix(k, prefix) || k <= startAfter {
			continue
		}
		page = append(page, objstore.ObjectInfo{Key: k, Size: aws.ToInt64(o.Size)})
	}
	return page
}
