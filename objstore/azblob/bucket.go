package azblob

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// DefaultRetries is how many times Create re-sends an upload whose
// outcome was unknown, when Options.Retries is 0.
const DefaultRetries = 3

// MaxRetries bounds the retries of one Create that Options allows.
const MaxRetries = 100

// maxListPage is Azure's page size limit for List Blobs.
const maxListPage = 5000

// MaxObjectSize is the largest object, in bytes, that Create writes and
// Get and GetRange read (objstore.MaxObjectSize). A larger one is refused
// with objstore.ErrObjectTooLarge, as an objstore.ErrRejected.
const MaxObjectSize = objstore.MaxObjectSize

// Options are the optional settings of a Bucket. The zero value works.
type Options struct {
	// Name identifies the bucket in logs and errors (a zone name such as
	// "zone-d"). Default: the container name.
	Name string
	// Logger receives debug and warning records. Default: discard.
	Logger *slog.Logger
	// Clock times the backoff between Create's retries. Default: the wall
	// clock.
	Clock clock.Clock
	// Retries bounds how often Create re-sends an upload after an answer
	// that left the outcome unknown (5xx, 408, 429, a dropped connection),
	// at most MaxRetries. 0 means DefaultRetries.
	Retries int
	// Backoff spaces those retries, jittered so that racing creators
	// spread out. Zero fields mean 100ms and 2s.
	Backoff clock.Backoff
}

// Bucket is an objstore.Bucket over one Azure Blob Storage container. It
// is safe for concurrent use. Create it with New.
type Bucket struct {
	backoff    clock.Backoff
	container  *container.Client
	cname      string
	name       string
	log        *slog.Logger
	clk        clock.Clock
	maxRetries int
	remote     objstore.Remote
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns a Bucket that stores objects as block blobs in the container
// named containerName through client. The client is the host's: its
// service URL, credentials (shared key, SAS, Entra ID), transport and
// retry policy for reads are used untouched. New sends no request; run
// objstore.VerifyZones at start-up.
func New(client *sdk.Client, containerName string, opts Options) (*Bucket, error) {
	switch {
	case client == nil:
		return nil, &cutline.ConfigError{Field: "client", Reason: "nil"}
	case containerName == "":
		return nil, &cutline.ConfigError{Field: "container", Reason: "empty"}
	case !validContainer(containerName):
		return nil, &cutline.ConfigError{Field: "container", Value: fmt.Sprintf("%q", containerName),
			Reason: "not a container name (3 to 63 of a-z, 0-9 and '-', starting with a letter or digit, no '--')"}
	case opts.Retries < 0 || opts.Retries > MaxRetries:
		return nil, &cutline.ConfigError{Field: "Retries", Value: opts.Retries, Reason: fmt.Sprintf("must satisfy 0 ≤ Retries ≤ %d", MaxRetries)}
	}
	if err := opts.Backoff.Validate("Backoff"); err != nil {
		return nil, err
	}
	b := &Bucket{
		container:  client.ServiceClient().NewContainerClient(containerName),
		cname:      containerName,
		name:       opts.Name,
		log:        opts.Logger,
		clk:        clock.Or(opts.Clock),
		maxRetries: opts.Retries,
		backoff:    opts.Backoff.Or(clock.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}),
	}
	if b.name == "" {
		b.name = containerName
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.maxRetries == 0 {
		b.maxRetries = DefaultRetries
	}
	b.remote = objstore.Remote{Name: b.name, Classify: classify}
	return b, nil
}

// validContainer is Azure's rule for container names, checked before
// anything is sent so that a name cannot reach another path of the
// account.
func validContainer(name string) bool {
	if len(name) < 3 || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' || strings.Contains(name, "--") {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.name }

// ContainerName returns the Azure container name.
func (b *Bucket) ContainerName() string { return b.cname }

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	const op = "get"
	if err := b.remote.Check(ctx, op, key); err != nil {
		return nil, err
	}
	resp, err := b.container.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, b.remote.Fail(ctx, op, key, err)
	}
	return b.remote.ReadBody(ctx, op, key, resp.Body, resp.ContentLength)
}

// GetRange implements objstore.Bucket. A range that runs past
// MaxObjectSize is sent open-ended ("bytes=off-"): no object this package
// reads is that long, so it runs to the end. A 416 InvalidRange (offset
// at or past the end, or any range of an empty blob) is an empty result.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	const op = "getrange"
	if err := b.remote.CheckRange(ctx, key, offset, length); err != nil {
		return nil, err
	}
	rng := blob.HTTPRange{Offset: offset, Count: length} // Count 0: to the end
	if objstore.OpenEndedRange(offset, length) {
		rng.Count = 0
	}
	resp, err := b.container.NewBlobClient(key).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: rng})
	if err != nil {
		return b.remote.RangeFailed(ctx, key, err)
	}
	data, err := b.remote.ReadBody(ctx, op, key, resp.Body, resp.ContentLength)
	if err != nil {
		return nil, err
	}
	// Without a Content-Range the whole object came back: no Range was
	// sent (offset 0, to the end) or the store ignored it.
	return objstore.RangeOf(data, offset, length, resp.ContentRange == nil || *resp.ContentRange == ""), nil
}

// Delete implements objstore.Bucket, with the blob's snapshots. Deleting a
// missing blob succeeds; a missing container does not.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	const op = "delete"
	if err := b.remote.Check(ctx, op, key); err != nil {
		return err
	}
	_, err := b.container.NewBlobClient(key).Delete(ctx, &blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)})
	if err != nil {
		return b.remote.DeleteFailed(ctx, key, err)
	}
	return nil
}

// List implements objstore.Bucket with List Blobs (Prefix, StartFrom,
// MaxResults). StartFrom is inclusive, so the startAfter key itself is
// skipped. A page holds at most 5000 objects whatever limit asks.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	const op = "list"
	if err := b.remote.CheckList(ctx, prefix); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > maxListPage {
		limit = maxListPage
	}
	o := &container.ListBlobsFlatOptions{MaxResults: to.Ptr(int32(min(limit+1, maxListPage)))}
	if prefix != "" {
		o.Prefix = &prefix
	}
	if startAfter > prefix {
		o.StartFrom = &startAfter
	}
	pager := b.container.NewListBlobsFlatPager(o)
	page := make([]objstore.ObjectInfo, 0, min(limit, 64))
	for pager.More() && len(page) < limit {
		resp, err := pager.NextPage(ctx)
		if err != nil {
			return nil, b.remote.Fail(ctx, op, prefix, err)
		}
		for _, item := range resp.Segment.BlobItems {
			k := deref(item.Name)
			// A store that ignores Prefix or StartFrom cannot leak keys.
			if k == "" || k <= startAfter || !strings.HasPrefix(k, prefix) {
				continue
			}
			var size int64
			if item.Properties != nil {
				size = deref(item.Properties.ContentLength)
			}
			page = append(page, objstore.ObjectInfo{Key: k, Size: size})
			if len(page) == limit {
				break
			}
		}
	}
	sortInfos(page)
	return page, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func sortInfos(infos []objstore.ObjectInfo) {
	slices.SortFunc(infos, func(a, b objstore.ObjectInfo) int { return cmp.Compare(a.Key, b.Key) })
}
