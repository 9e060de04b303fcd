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

// readMany checks metastore.ReadMany through the store's ManyReader (when
// it has one) and through one read at a time: both must give the same
// answers, in order, also past one request's MaxReadMany reads.
func (s *suite) readMany(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	for _, k := range []string{"r/a/001", "r/a/003", "r/b/002"} {
		put(t, ctx, st, k, k, 0)
	}
	var reads []metastore.Read
	var want []string // "" for not found
	for i := range metastore.MaxReadMany + 10 {
		switch i % 4 {
		case 0:
			reads, want = append(reads, metastore.Read{Key: "r/a/001"}), append(want, "r/a/001")
		case 1:
			reads, want = append(reads, metastore.Read{Key: "r/a/002"}), append(want, "")
		case 2:
			reads, want = append(reads, metastore.Read{Floor: true, Prefix: "r/a/", Key: "r/a/999"}), append(want, "r/a/003")
		case 3:
			reads, want = append(reads, metastore.Read{Floor: true, Prefix: "r/b/", Key: "r/b/001"}), append(want, "")
		}
	}
	stores := map[string]metastore.Store{"one by one": listOnly{st}}
	if _, ok := st.(metastore.ManyReader); ok {
		stores["many reader"] = st
	}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			res, err := metastore.ReadMany(ctx, st, reads)
			require.NoError(t, err)
			require.Len(t, res, len(reads))
			for i, r := range res {
				if want[i] == "" {
					assert.False(t, r.Found, "read %d (%+v)", i, reads[i])
					continue
				}
				assert.True(t, r.Found, "read %d (%+v)", i, reads[i])
				assert.Equal(t, want[i], r.KV.Key, "read %d", i)
				assert.Equal(t, want[i], string(r.KV.Value), "read %d", i)
				assert.Positive(t, r.KV.Revision)
			}
			_, err = metastore.ReadMany(ctx, st, []metastore.Read{{Key: ""}})
			assert.ErrorIs(t, err, metastore.ErrInvalidKey)
			_, err = metastore.ReadMany(ctx, st, []metastore.Read{{Floor: true, Prefix: "r/a/", Key: "r/b/1"}})
			assert.ErrorIs(t, err, metastore.ErrInvalidKey)
		})
	}
}

// listKeys checks metastore.ListKeys through the store's KeyLister (when
// it has one) and through the List fallback: the keys and revisions List
// gives, without a value.
func (s *suite) listKeys(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	// More keys than a page of a backend that reads in pages (the etcd
	// conformance run reads 3 at a time).
	for _, k := range []string{"lk/b", "lk/a/1", "lk/a/2", "lk/c", "lk/d", "lk/e/1", "lk/e/2", "lk0", "other"} {
		put(t, ctx, st, k, "value of "+k, 0)
	}
	want, _, err := st.List(ctx, "lk/")
	require.NoError(t, err)
	require.Len(t, want, 7)
	stores := map[string]metastore.Store{"fallback": listOnly{st}}
	if _, ok := st.(metastore.KeyLister); ok {
		stores["keylister"] = st
	}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			got, rev, err := metastore.ListKeys(ctx, st, "lk/")
			require.NoError(t, err)
			assert.Positive(t, rev)
			require.Len(t, got, len(want))
			for i, kv := range got {
				assert.Empty(t, kv.Value, "%s", kv.Key)
				kv.Value = want[i].Value
				assert.Equal(t, want[i], kv)
			}
			_, _, err = metastore.ListKeys(ctx, st, "\x00bad")
			assert.ErrorIs(t, err, metastore.ErrInvalidKey)
		})
	}
}
