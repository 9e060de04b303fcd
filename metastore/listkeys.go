package metastore

import "context"

// KeyLister is an optional capability of a Store: List without the
// values. A caller that needs only the keys under a prefix (the streams
// under a root, whose keys include snapshots of up to a MiB each) would
// otherwise read every value.
type KeyLister interface {
	// ListKeys is List with every KV's Value empty: the same keys,
	// revisions and snapshot revision.
	ListKeys(ctx context.Context, prefix string) ([]KV, int64, error)
}

// ListKeys lists prefix without the values: through the store's
// KeyLister when it has one, otherwise through List, dropping them.
func ListKeys(ctx context.Context, s Store, prefix string) ([]KV, int64, error) {
	if kl, ok := s.(KeyLister); ok {
		return kl.ListKeys(ctx, prefix)
	}
	kvs, rev, err := s.List(ctx, prefix)
	for i := range kvs {
		kvs[i].Value = nil
	}
	return kvs, rev, err
}
