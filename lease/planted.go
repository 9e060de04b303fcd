package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/metastore"
)

// What the planted variants of package internal/planted do here; reached
// only in builds with the cutline_planted tag (elsewhere the branches that
// call them are compiled out).

// markFirst is MarkBeforeFlush: it stamps the clean-release mark as land
// does, but before the release flush has run, so that it certifies every
// offset the tenure appended instead of what the index covers. The
// landing goes on with the flush and then finds the mark its own.
func (s *Star) markFirst(ctx context.Context, t *tenure) error {
	stream := t.info.Stream
	s.mu.Lock()
	mark := &Mark{Header: hdr(releaseKind), Stream: stream, Star: s.cfg.Star, Epoch: t.epoch, Tenure: t.info.Tenure, Next: t.next, Reason: t.reason, At: s.clock.Now().UTC()}
	wrev, lrev := t.writerRev, t.leaseRev
	s.mu.Unlock()
	v, err := encode(mark)
	if err != nil {
		return err
	}
	// Guarded again, so that its requests count as planted ones (see
	// internal/crashpoint): markFirst runs only under the variant.
	if planted.On(planted.MarkBeforeFlush) {
		withLease := !s.lostNow()
		for range 3 {
			relRev := int64(0)
			if kv, ok, err := getOptional(ctx, s.cfg.Store, s.keys.release(stream)); err != nil {
				return err
			} else if ok {
				if old, err := decodeMark(kv, stream); err == nil && old.Star == s.cfg.Star && old.Tenure == t.info.Tenure {
					return nil
				}
				relRev = kv.Revision
			}
			txn := metastore.Txn{
				If:   []metastore.Compare{{Key: s.keys.writer(stream), Revision: wrev}, {Key: s.keys.release(stream), Revision: relRev}},
				Then: []metastore.Op{{Key: s.keys.release(stream), Value: v}},
			}
			if withLease {
				txn.If = append(txn.If, metastore.Compare{Key: s.keys.lease(stream), Revision: lrev})
				txn.Then = append(txn.Then, metastore.Op{Key: s.keys.lease(stream), Delete: true})
			}
			_, err = s.cfg.Store.Txn(ctx, txn)
			var ce *metastore.ConflictError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &ce) && ce.Key == s.keys.writer(stream):
				return ErrSuperseded
			case errors.As(err, &ce) && ce.Key == s.keys.lease(stream):
				withLease = false
			case !errors.As(err, &ce):
				return err
			}
		}
	}
	return fmt.Errorf("the release mark of %s kept changing", stream)
}
