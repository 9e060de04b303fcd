package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/metastore"
)

var _ metastore.Floorer = (*Store)(nil)

// Floor implements metastore.Floorer: one ranged read of [prefix, key],
// newest key first, limited to one. The read is linearizable.
func (s *Store) Floor(ctx context.Context, prefix, key string) (metastore.KV, error) {
	if err := ctx.Err(); err != nil {
		return metastore.KV{}, err
	}
	if err := metastore.CheckFloor(prefix, key); err != nil {
		return metastore.KV{}, err
	}
	cctx, done := s.call(ctx)
	defer done()
	// The range's end is exclusive: key plus the smallest byte after it
	// is the first key past key.
	resp, err := s.client.Get(cctx, s.root+prefix,
		clientv3.WithRange(s.root+key+"\x00"),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
		clientv3.WithLimit(1))
	if err != nil {
		return metastore.KV{}, s.fail(ctx, cctx, "floor", key, err)
	}
	if len(resp.Kvs) == 0 {
		return metastore.KV{}, fmt.Errorf("metastore floor %q under %q: %w", key, prefix, metastore.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return s.toKV(kv.Key, kv.Value, kv.ModRevision, kv.CreateRevision, kv.Lease), nil
}
