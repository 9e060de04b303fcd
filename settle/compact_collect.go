package settle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// CollectReport describes one Collect call.
type CollectReport struct {
	Star  string
	Epoch uint64
	// Segments counts the segments found, Garbage those no page names or
	// ever will, Deleted the copies deleted and Left those an unreachable
	// bucket kept (a later Collect deletes them).
	Segments, Garbage, Deleted, Left int
}

// Collect deletes the segments of star's epoch ep that no ref page names
// and none ever will: what a compactor that crashed, lost a race, or
// failed to verify a segment left behind, and segments whose offsets
// retention dropped. A segment written for the offsets [first, next) is
// garbage once the stream's retention point reaches next, or once every
// page of [first, next) is a page of other segments: pages of segments
// never become pages of flights again, so the compare-and-set that would
// have named it (on the pages as they were when they held flights) can
// no longer succeed. A segment whose offsets some page of flights still
// holds may yet be named by a compactor at work, and stays.
//
// It lists the epoch's segments in every bucket and reads the pages of
// each, so run it as maintenance, after Compact or Retain. It is
// idempotent.
func (c *Compactor) Collect(ctx context.Context, star string, ep uint64) (CollectReport, error) {
	rep := CollectReport{Star: star, Epoch: ep}
	if err := epoch.ValidateName("star", star); err != nil {
		return rep, err
	}
	rec, err := c.minter.Get(ctx, star, ep)
	if err != nil {
		return rep, fmt.Errorf("settle collect %s/%d: %w", star, ep, err)
	}
	buckets, err := c.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return rep, fmt.Errorf("settle collect %s/%d: %w", star, ep, err)
	}
	prefix := segmentPrefix(wire.KeysOf(rec), star, ep)
	found := map[string]bool{}
	for _, b := range buckets {
		for o, err := range objstore.All(ctx, b, prefix) {
			if err != nil {
				if ctx.Err() != nil {
					return rep, fmt.Errorf("settle collect %s/%d: %w", star, ep, ctx.Err())
				}
				rep.Left++ // an unreachable bucket is collected next time
				c.opts.Logger.WarnContext(ctx, "collect could not list a bucket", "bucket", b.Name(), "err", err)
				break
			}
			found[o.Key] = true
		}
	}
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		n, ok := parseSegmentKey(key)
		if !ok || n.Star != star || n.Epoch != ep || n.key(wire.KeysOf(rec)) != key {
			continue // not a segment of this epoch: never ours to delete
		}
		rep.Segments++
		garbage, err := c.unnamed(ctx, key, n)
		if err != nil {
			return rep, fmt.Errorf("settle collect %s/%d: %w", star, ep, err)
		}
		if !garbage {
			continue
		}
		rep.Garbage++
		for _, b := range buckets {
			if err := b.Delete(ctx, key); err != nil {
				rep.Left++
				c.opts.Logger.WarnContext(ctx, "collect left a segment", "bucket", b.Name(), "key", key, "err", err)
				continue
			}
			rep.Deleted++
		}
	}
	return rep, nil
}

// unnamed reports whether no page names the segment n at key, nor ever
// will.
func (c *Compactor) unnamed(ctx context.Context, key string, n segmentName) (bool, error) {
	x := c.index
	start, _, err := x.start(ctx, n.Stream)
	if err != nil {
		return false, err
	}
	off := max(n.First, start)
	for off < n.Next {
		kv, err := metastore.Floor(ctx, x.store, x.pagePrefix(n.Stream), x.pageKey(n.Stream, off))
		if errors.Is(err, metastore.ErrNotFound) {
			return false, nil // no page there: a state Collect does not judge
		}
		if err != nil {
			return false, fmt.Errorf("ref page %s/%d: %w", n.Stream, off, err)
		}
		pg, err := x.decodePage(kv, n.Stream)
		if err != nil {
			return false, err
		}
		if off >= pg.Next || pg.Segment == key || pg.Segment == "" {
			return false, nil
		}
		off = pg.Next
	}
	return true, nil
}
