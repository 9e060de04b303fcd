package metastoretest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

func (s *suite) txnAllOrNothing(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	ra := put(t, ctx, st, "a", "a1", 0)
	rc := put(t, ctx, st, "c", "c1", 0)

	// The compare on b (must not exist) fails: nothing at all is applied.
	put(t, ctx, st, "b", "b1", 0)
	_, err := st.Txn(ctx, metastore.Txn{
		If: []metastore.Compare{{Key: "a", Revision: ra}, {Key: "b", Revision: 0}},
		Then: []metastore.Op{
			{Key: "a", Value: []byte("a2")},
			{Key: "d", Value: []byte("d1")},
			{Key: "c", Delete: true},
		},
	})
	require.ErrorIs(t, err, metastore.ErrConflict)
	kv, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "a1", string(kv.Value))
	_, err = st.Get(ctx, "d")
	require.ErrorIs(t, err, metastore.ErrNotFound)
	_, err = st.Get(ctx, "c")
	require.NoError(t, err)

	// Every compare holds: every op is applied at one revision.
	rev, err := st.Txn(ctx, metastore.Txn{
		If: []metastore.Compare{{Key: "a", Revision: ra}, {Key: "c", Revision: rc}, {Key: "d", Revision: 0}},
		Then: []metastore.Op{
			{Key: "a", Value: []byte("a2")},
			{Key: "d", Value: []byte("d1")},
			{Key: "c", Delete: true},
		},
	})
	require.NoError(t, err)
	for key, want := range map[string]string{"a": "a2", "d": "d1"} {
		kv, err := st.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, string(kv.Value), key)
		assert.Equal(t, rev, kv.Revision, "all ops of a txn share its revision (%s)", key)
	}
	_, err = st.Get(ctx, "c")
	require.ErrorIs(t, err, metastore.ErrNotFound)
}

func (s *suite) txnFirstFailing(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	ra := put(t, ctx, st, "a", "x", 0)
	rb := put(t, ctx, st, "b", "x", 0)
	rc := put(t, ctx, st, "c", "x", 0)
	_, err := st.Txn(ctx, metastore.Txn{
		If:   []metastore.Compare{{Key: "a", Revision: ra}, {Key: "b", Revision: rb + 1000}, {Key: "c", Revision: 0}},
		Then: []metastore.Op{{Key: "a", Value: []byte("y")}},
	})
	requireConflict(t, err, "b", rb+1000, rb)
	_, err = st.Txn(ctx, metastore.Txn{
		If:   []metastore.Compare{{Key: "c", Revision: 0}, {Key: "b", Revision: 0}},
		Then: []metastore.Op{{Key: "a", Value: []byte("y")}},
	})
	requireConflict(t, err, "c", 0, rc)
}

func (s *suite) txnCompareOnly(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	ra := put(t, ctx, st, "a", "x", 0)
	rev, err := st.Txn(ctx, metastore.Txn{If: []metastore.Compare{{Key: "a", Revision: ra}, {Key: "b"}}})
	require.NoError(t, err, "a txn without ops checks its compares")
	assert.GreaterOrEqual(t, rev, ra)
	_, err = st.Txn(ctx, metastore.Txn{If: []metastore.Compare{{Key: "a", Revision: 0}}})
	requireConflict(t, err, "a", 0, ra)
}

// transfers: concurrent two-key txns move units between accounts. The sum
// is invariant in every snapshot a List returns.
func (s *suite) transfers(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	const accounts, initial, workers, rounds = 4, 100, 8, 30
	key := func(i int) string { return fmt.Sprintf("acct/%d", i) }
	for i := range accounts {
		put(t, ctx, st, key(i), strconv.Itoa(initial), 0)
	}
	sum := func(kvs []metastore.KV) (int, error) {
		total := 0
		for _, kv := range kvs {
			n, err := strconv.Atoi(string(kv.Value))
			if err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil
	}
	var (
		mu        sync.Mutex
		failures  []error
		committed int
	)
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			kvs, _, err := st.List(ctx, "acct/")
			if err != nil {
				fail(err)
				return
			}
			if total, err := sum(kvs); err != nil || total != accounts*initial || len(kvs) != accounts {
				fail(fmt.Errorf("snapshot of %d accounts sums to %d (err %v), want %d", len(kvs), total, err, accounts*initial))
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				from, to := (w+r)%accounts, (w+r+1+w%(accounts-1))%accounts
				if from == to {
					to = (to + 1) % accounts
				}
				a, err := st.Get(ctx, key(from))
				if err != nil {
					fail(err)
					return
				}
				b, err := st.Get(ctx, key(to))
				if err != nil {
					fail(err)
					return
				}
				na, _ := strconv.Atoi(string(a.Value))
				nb, _ := strconv.Atoi(string(b.Value))
				_, err = st.Txn(ctx, metastore.Txn{
					If: []metastore.Compare{{Key: a.Key, Revision: a.Revision}, {Key: b.Key, Revision: b.Revision}},
					Then: []metastore.Op{
						{Key: a.Key, Value: []byte(strconv.Itoa(na - 7))},
						{Key: b.Key, Value: []byte(strconv.Itoa(nb + 7))},
					},
				})
				switch {
				case err == nil:
					mu.Lock()
					committed++
					mu.Unlock()
				case errors.Is(err, metastore.ErrConflict):
				default:
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	require.Empty(t, failures)
	kvs, _, err := st.List(ctx, "acct/")
	require.NoError(t, err)
	total, err := sum(kvs)
	require.NoError(t, err)
	assert.Equal(t, accounts*initial, total)
	assert.Positive(t, committed)
}
