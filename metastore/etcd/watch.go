package etcd

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/metastore"
)

var errWatchClosed = errors.New("etcd: watch channel closed")

// Watch implements metastore.Store with one etcd watch on the prefix.
//
// The watch requires a leader: a member cut off from the quorum ends the
// watch with metastore.ErrUnavailable instead of going silent, and the
// caller resumes from the last revision it saw plus one. from = 0 reads the
// current revision first, so the watch starts with the changes after the
// iteration began. Stopping the iteration early cancels the etcd watch.
func (s *Store) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	return func(yield func(metastore.WatchEvent, error) bool) {
		if err := metastore.ValidatePrefix(prefix); err != nil {
			yield(metastore.WatchEvent{}, err)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(metastore.WatchEvent{}, err)
			return
		}
		if from <= 0 {
			cctx, done := s.call(ctx)
			resp, err := s.client.Get(cctx, s.root, clientv3.WithCountOnly())
			done()
			if err != nil {
				yield(metastore.WatchEvent{}, s.fail(ctx, cctx, "watch", prefix, err))
				return
			}
			from = resp.Header.Revision + 1
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wch := s.client.Watch(clientv3.WithRequireLeader(wctx), s.root+prefix,
			clientv3.WithPrefix(), clientv3.WithRev(from))
		for {
			resp, ok := <-wch
			if err := ctx.Err(); err != nil {
				yield(metastore.WatchEvent{}, s.ended(ctx, fmt.Sprintf("metastore watch %q", prefix)))
				return
			}
			if !ok {
				yield(metastore.WatchEvent{}, fmt.Errorf("metastore watch %q: %w", prefix, metastore.Unavailable(errWatchClosed)))
				return
			}
			if err := resp.Err(); err != nil {
				if resp.CompactRevision != 0 || errors.Is(err, rpctypes.ErrCompacted) {
					err = fmt.Errorf("metastore watch %q from %d (compacted up to %d): %w",
						prefix, from, resp.CompactRevision, metastore.ErrCompacted)
				} else {
					err = classify(ctx, "watch", prefix, err)
				}
				yield(metastore.WatchEvent{}, err)
				return
			}
			for _, ev := range resp.Events {
				out := metastore.WatchEvent{Type: metastore.EventPut}
				if ev.Type == mvccpb.DELETE {
					out.Type = metastore.EventDelete
				}
				out.KV = s.toKV(ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision, ev.Kv.CreateRevision, ev.Kv.Lease)
				if out.Type == metastore.EventDelete {
					out.KV.Value = nil
				}
				if !yield(out, nil) {
					return
				}
				from = ev.Kv.ModRevision + 1
			}
		}
	}
}
