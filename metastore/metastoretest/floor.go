package metastoretest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

// listOnly hides a store's optional capabilities, so that metastore.Floor
// takes its List fallback.
type listOnly struct{ metastore.Store }

// floor checks metastore.Floor through the store's Floorer (when it has
// one) and through the List fallback: both must give the same answers.
func (s *suite) floor(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	for _, k := range []string{"f/a/001", "f/a/003", "f/a/005", "f/a0", "f/b/002", "f/a/005x"} {
		put(t, ctx, st, k, k, 0)
	}
	stores := map[string]metastore.Store{"fallback": listOnly{st}}
	if _, ok := st.(metastore.Floorer); ok {
		stores["floorer"] = st
	}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct{ prefix, key, want string }{
				{"f/a/", "f/a/004", "f/a/003"},
				{"f/a/", "f/a/003", "f/a/003"},
				{"f/a/", "f/a/005", "f/a/005"},
				{"f/a/", "f/a/999", "f/a/005x"},
				{"f/a/", "f/a/0050", "f/a/005"},
				{"f/b/", "f/b/999", "f/b/002"},
				{"", "f/a/002", "f/a/001"},
			} {
				kv, err := metastore.Floor(ctx, st, c.prefix, c.key)
				require.NoError(t, err, "floor of %q under %q", c.key, c.prefix)
				assert.Equal(t, c.want, kv.Key, "floor of %q under %q", c.key, c.prefix)
				assert.Equal(t, c.want, string(kv.Value))
				assert.Positive(t, kv.Revision)
			}
			for _, c := range []struct{ prefix, key string }{
				{"f/a/", "f/a/000"},
				{"f/b/", "f/b/001"},
				{"f/c/", "f/c/zzz"},
			} {
				_, err := metastore.Floor(ctx, st, c.prefix, c.key)
				assert.ErrorIs(t, err, metastore.ErrNotFound, "floor of %q under %q", c.key, c.prefix)
			}
			_, err := metastore.Floor(ctx, st, "f/a/", "f/b/001")
			assert.ErrorIs(t, err, metastore.ErrInvalidKey, "a key outside its prefix")
			_, err = metastore.Floor(ctx, st, "f/a/", "")
			assert.ErrorIs(t, err, metastore.ErrInvalidKey, "an empty key")
		})
	}
}
