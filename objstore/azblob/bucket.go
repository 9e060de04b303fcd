package azblob

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
)

// DefaultRetries is how many times Create re-sends an upload whose
// outcome was unknown, when Options.Retries is 0.
const DefaultRetries = 3

// MaxRetries bounds the retries of one Create that Options allows.
const MaxRetries = objstore.MaxRetries

// maxListPage is Azure's page size limit for List Blobs.
const maxListPage = 5000

// MaxObjectSize is the largest object, in bytes, that Create writes and
// Get and GetRange read (objstore.MaxObjectSize). A larger one is refused
// with objstore.ErrObjectTooLarge, as an objstore.ErrRejected.
const MaxObjectSize = objstore.MaxObjectSize

// Options are the optional settings of a Bucket, those of every remote
// backend; the zero value works. Here Name defaults to the container
// name; Retries bounds how often Create re-sends an upload after an
// answer that left the outcome unknown (5xx, 408, 429, a dropped
// connection), DefaultRetries when 0; Backoff's zero fields mean 100ms
// and 2s.
type Options = objstore.RemoteOptions

// store is what New checks and fills in.
var store = objstore.RemoteStore{
	Kind:      "azblob",
	NameField: "container",
	ValidName: validContainer,
	NameRule:  "not a container name (3 to 63 of a-z, 0-9 and '-', starting with a letter or digit, no '--')",
	Defaults:  Options{Retries: DefaultRetries, Backoff: clock.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}},
	Classify:  classify,
}

// Bucket is an objstore.Bucket over one Azure Blob Storage container. It
// is safe for concurrent use. Create it with New.
type Bucket struct {
	container *container.Client
	cname     string
	remote    objstore.Remote
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns a Bucket that stores objects as block blobs in the container
// named containerName through client. The client is the host's: its
// service URL, credentials (shared key, SAS, Entra ID), transport and
// retry policy for reads are used untouched. New sends no request; run
// objstore.VerifyZones at start-up.
func New(client *sdk.Client, containerName string, opts Options) (*Bucket, error) {
	remote, err := objstore.NewRemote(client, containerName, opts, store)
	if err != nil {
		return nil, err
	}
	return &Bucket{container: client.ServiceClient().NewContainerClient(containerName), cname: containerName, remote: remote}, nil
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
func (b *Bucket) Name() string { return b.remote.Name }

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
	return b.remote.Delete(ctx, key, func(ctx context.Context) error {
		_, err := b.container.NewBlobClient(key).Delete(ctx, &blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)})
		return err
	})
}

// List implements objstore.Bucket with List Blobs (Prefix, StartFrom,
// MaxResults). StartFrom is inclusive, so the startAfter key itself is
// skipped. A page holds at most 5000 objects whatever limit asks.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	const op = "list"
	limit, err := b.remote.CheckList(ctx, prefix, limit, maxListPage)
	if err != nil {
		return nil, err
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
