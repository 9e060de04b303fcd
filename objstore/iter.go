package objstore

import (
	"context"
	"iter"
)

// All lists every object under prefix in key order, paging through
// Bucket.List. Iteration stops at the first error, which is yielded once.
func All(ctx context.Context, b Bucket, prefix string) iter.Seq2[ObjectInfo, error] {
	return AllAfter(ctx, b, prefix, "")
}

// AllAfter is All from the first key after startAfter: a listing that
// need not page through the keys below it.
func AllAfter(ctx context.Context, b Bucket, prefix, startAfter string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		after := startAfter
		for {
			page, err := b.List(ctx, prefix, after, 1000)
			if err != nil {
				yield(ObjectInfo{}, err)
				return
			}
			if len(page) == 0 {
				return
			}
			for _, o := range page {
				if !yield(o, nil) {
					return
				}
			}
			after = page[len(page)-1].Key
		}
	}
}
