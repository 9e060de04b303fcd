package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/metastore"
)

var _ metastore.ManyReader = (*Store)(nil)

// ReadMany implements metastore.ManyReader: one transaction without
// compares whose operations are the reads, all at one revision.
func (s *Store) ReadMany(ctx context.Context, reads []metastore.Read) ([]metastore.ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := metastore.CheckMany(reads); err != nil {
		return nil, err
	}
	ops := make([]clientv3.Op, len(reads))
	for i, r := range reads {
		if r.Floor {
			ops[i] = clientv3.OpGet(s.root+r.Prefix, clientv3.WithRange(s.root+r.Key+"\x00"),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
		} else {
			ops[i] = clientv3.OpGet(s.root + r.Key)
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	cctx, done := s.call(ctx)
	defer done()
	resp, err := s.client.Txn(cctx).Then(ops...).Commit()
	if err != nil {
		return nil, s.fail(ctx, cctx, "read many", reads[0].Key, err)
	}
	if len(resp.Responses) != len(reads) {
		return nil, fmt.Errorf("metastore read many: %d answers to %d reads: %w", len(resp.Responses), len(reads), metastore.ErrUnavailable)
	}
	out := make([]metastore.ReadResult, len(reads))
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		if rr == nil || len(rr.Kvs) == 0 {
			continue
		}
		kv := rr.Kvs[0]
		out[i] = metastore.ReadResult{KV: s.toKV(kv.Key, kv.Value, kv.ModRevision, kv.CreateRevision, kv.Lease), Found: true}
	}
	return out, nil
}
