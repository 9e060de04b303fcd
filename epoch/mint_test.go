package epoch_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

func TestMintNumbersFromOne(t *testing.T) {
	e := newEnv(t)
	for want := uint64(1); want <= 5; want++ {
		r := e.mint(t, "s1", standard())
		assert.Equal(t, want, r.Epoch)
		e.clock.Advance(time.Second)
	}
	ch, err := e.m.Chain(context.Background(), "s1")
	require.NoError(t, err)
	assert.Equal(t, uint64(6), ch.Next)
	assert.Equal(t, map[string]uint64{"standard": 5}, ch.Heads)
	assert.Positive(t, ch.Revision)
}

func TestMintRecordIsOpenWithConstants(t *testing.T) {
	e := newEnv(t)
	c := standard()
	r := e.mint(t, "s1", c)

	assert.Equal(t, "s1", r.Star)
	assert.Equal(t, uint64(1), r.Epoch)
	assert.Equal(t, c, r.Constants)
	assert.Equal(t, epoch.StateOpen, r.State)
	assert.False(t, r.Fenced())
	assert.Zero(t, r.Cut)
	assert.Equal(t, epoch.Cursors{}, r.Cursors)
	assert.True(t, r.MintedAt.Equal(t0), "minted at %v", r.MintedAt)
	assert.True(t, r.FencedAt.IsZero())
	assert.True(t, r.SettledAt.IsZero())
	assert.Equal(t, "test-writer", r.MintedBy)
	assert.Positive(t, r.Revision)
	assert.Equal(t, 3, r.Constants.K())
	assert.Equal(t, 2, r.Constants.B())
	assert.Equal(t, "s1/1 (standard, K=3 W=2 window=8) open", r.String())

	// The returned record is what the store holds.
	got := e.get(t, "s1", 1)
	requireSameRecord(t, r, got)

	// Counter and record were written in one transaction.
	txns, applied := e.store.counts()
	assert.Equal(t, 1, txns)
	assert.Equal(t, 1, applied)
	assert.Equal(t, []string{e.m.ChainKey("s1"), e.m.RecordKey("s1", 1)}, e.keys(t))

	// Operators read the records with etcdctl: versioned, readable JSON.
	v, rev := e.raw(t, e.m.RecordKey("s1", 1))
	assert.Equal(t, r.Revision, rev)
	assert.Equal(t, "epoch", v["kind"])
	assert.EqualValues(t, 1, v["format"])
	assert.Equal(t, "open", v["state"])
	assert.NotContains(t, v, "fenced_at")
	cv, _ := e.raw(t, e.m.ChainKey("s1"))
	assert.Equal(t, "chain", cv["kind"])
	assert.EqualValues(t, 2, cv["next"])
}

func TestMintDoesNotAliasBuckets(t *testing.T) {
	e := newEnv(t)
	c := standard()
	r := e.mint(t, "s1", c)
	c.Buckets[0] = "changed"
	assert.Equal(t, "zone-a", r.Constants.Buckets[0])
	assert.Equal(t, "zone-a", e.get(t, "s1", 1).Constants.Buckets[0])
}

func TestRecordKeysAreOrdered(t *testing.T) {
	e := newEnv(t)
	assert.Equal(t, "chains/s1", e.m.ChainKey("s1"))
	assert.Equal(t, "chains/s1/00000000000000000007", e.m.RecordKey("s1", 7))
	assert.Less(t, e.m.RecordKey("s1", 9), e.m.RecordKey("s1", 10))
	assert.Less(t, e.m.RecordKey("s1", 99999), e.m.RecordKey("s1", 100000))
}

func TestStarsHaveIndependentCounters(t *testing.T) {
	e := newEnv(t)
	e.mint(t, "s1", standard())
	e.mint(t, "s1", standard())
	// "s1.b" shares a key prefix with "s1" but not the "s1/" prefix.
	assert.Equal(t, uint64(1), e.mint(t, "s1.b", standard()).Epoch)
	assert.Equal(t, uint64(1), e.mint(t, "s2", express()).Epoch)
	assert.Equal(t, uint64(3), e.mint(t, "s1", standard()).Epoch)

	var got []uint64
	for r, err := range e.m.Epochs(context.Background(), "s1") {
		require.NoError(t, err)
		got = append(got, r.Epoch)
	}
	assert.Equal(t, []uint64{1, 2, 3}, got)
}

func TestHeadsPerClass(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s1 := e.mint(t, "s1", standard()) // 1
	s2 := e.mint(t, "s1", standard()) // 2
	x3 := e.mint(t, "s1", express())  // 3
	s4 := e.mint(t, "s1", standard()) // 4

	ch, err := e.m.Chain(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"standard": 4, "express": 3}, ch.Heads,
		"a standard mint never moves the express head")
	assert.Equal(t, uint64(5), ch.Next)

	superseded := func(r *epoch.Record) bool {
		t.Helper()
		ok, err := e.m.Superseded(ctx, r)
		require.NoError(t, err)
		return ok
	}
	assert.True(t, superseded(s1))
	assert.True(t, superseded(s2))
	assert.False(t, superseded(x3), "a standard roll never supersedes an express epoch")
	assert.False(t, superseded(s4))

	x5 := e.mint(t, "s1", express())
	assert.True(t, superseded(x3))
	assert.False(t, superseded(x5))
	assert.False(t, superseded(s4), "an express roll never supersedes a standard epoch")
}

func TestMintAfterFenceAndSettle(t *testing.T) {
	// Nothing resumes an epoch: the next mint is a new number even when
	// every earlier epoch is settled.
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	_, err := e.m.Publish(ctx, "s1", 1, 3)
	require.NoError(t, err)
	_, err = e.m.MarkSettled(ctx, "s1", 1)
	require.NoError(t, err)
	r := e.mint(t, "s1", standard())
	assert.Equal(t, uint64(2), r.Epoch)
	assert.Equal(t, epoch.StateOpen, r.State)
	assert.Equal(t, epoch.Cursors{}, r.Cursors)
}

func TestConcurrentMints(t *testing.T) {
	const goroutines, each = 8, 20
	ctx := context.Background()
	e := newEnv(t)
	var (
		mu      sync.Mutex
		byClass = map[string][]uint64{}
		all     []uint64
		wg      sync.WaitGroup
		start   = make(chan struct{})
		errs    = make(chan error, goroutines*each)
	)
	for g := range goroutines {
		c := standard()
		if g%2 == 1 {
			c = express()
		}
		wg.Go(func() {
			<-start
			for range each {
				r, err := e.m.Mint(ctx, "s1", c)
				if err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				all = append(all, r.Epoch)
				byClass[c.Class] = append(byClass[c.Class], r.Epoch)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("mint: %v", err)
	}

	slices.Sort(all)
	want := make([]uint64, goroutines*each)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	require.Equal(t, want, all, "numbers distinct and contiguous")

	var listed []uint64
	for r, err := range e.m.Epochs(ctx, "s1") {
		require.NoError(t, err)
		listed = append(listed, r.Epoch)
	}
	assert.Equal(t, want, listed, "every number has its record")

	ch, err := e.m.Chain(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, uint64(goroutines*each+1), ch.Next)
	for class, nums := range byClass {
		assert.Equal(t, slices.Max(nums), ch.Heads[class], "head of %s", class)
	}
}

func TestBurnedNumberFromCrash(t *testing.T) {
	// A crash between the counter and the record leaves the counter
	// advanced with no record: the number is burned.
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	e.mint(t, "s1", standard())
	e.putChain(t, "s1", 4, map[string]uint64{"standard": 3})

	_, err := e.m.Get(ctx, "s1", 3)
	require.ErrorIs(t, err, epoch.ErrNoRecord)
	assert.NotErrorIs(t, err, metastore.ErrBadRecord)

	var got []uint64
	for r, err := range e.m.Epochs(ctx, "s1") {
		require.NoError(t, err)
		got = append(got, r.Epoch)
	}
	assert.Equal(t, []uint64{1, 2}, got, "burned numbers are not yielded")

	// The burned epoch was the head, so 2 is superseded.
	sup, err := e.m.Superseded(ctx, e.get(t, "s1", 2))
	require.NoError(t, err)
	assert.True(t, sup)

	r := e.mint(t, "s1", standard())
	assert.Equal(t, uint64(4), r.Epoch, "the next mint continues past the burned number")
	_, err = e.m.Get(ctx, "s1", 3)
	assert.ErrorIs(t, err, epoch.ErrNoRecord)

	// Transitions of a burned epoch find no record and write nothing.
	txns, _ := e.store.counts()
	_, err = e.m.Publish(ctx, "s1", 3, 0)
	assert.ErrorIs(t, err, epoch.ErrNoRecord)
	_, err = e.m.MarkSettled(ctx, "s1", 3)
	assert.ErrorIs(t, err, epoch.ErrNoRecord)
	_, err = e.m.Advance(ctx, "s1", 3, epoch.Cursors{Checkpoint: 1})
	assert.ErrorIs(t, err, epoch.ErrNoRecord)
	after, _ := e.store.counts()
	assert.Equal(t, txns, after)
}

func TestBurnedNumberFromDeletedRecord(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for range 3 {
		e.mint(t, "s1", standard())
	}
	e.remove(t, e.m.RecordKey("s1", 2))

	_, err := e.m.Get(ctx, "s1", 2)
	require.ErrorIs(t, err, epoch.ErrNoRecord)
	var got []uint64
	for r, err := range e.m.Epochs(ctx, "s1") {
		require.NoError(t, err)
		got = append(got, r.Epoch)
	}
	assert.Equal(t, []uint64{1, 3}, got)
	assert.Equal(t, uint64(4), e.mint(t, "s1", standard()).Epoch)
}

func TestNeverMintedStar(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ch, err := e.m.Chain(ctx, "fresh")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), ch.Next)
	assert.Empty(t, ch.Heads)
	assert.NotNil(t, ch.Heads)
	assert.Zero(t, ch.Revision)

	_, err = e.m.Get(ctx, "fresh", 1)
	assert.ErrorIs(t, err, epoch.ErrNoRecord)
	_, err = e.m.Get(ctx, "fresh", 0)
	assert.ErrorIs(t, err, epoch.ErrNoRecord)
	for r, err := range e.m.Epochs(ctx, "fresh") {
		t.Fatalf("unexpected epoch %v %v", r, err)
	}
	assert.Empty(t, e.keys(t), "reads write nothing")
}

func TestCounterLaggingRecordsNeverReusesANumber(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		deleted []uint64          // records removed after minting 1..5
		next    uint64            // counter put back to
		heads   map[string]uint64 // restored heads
		want    uint64
	}{
		{name: "restored to before all", next: 1, heads: nil, want: 6},
		{name: "restored to the middle", next: 3, heads: map[string]uint64{"standard": 2}, want: 6},
		{name: "restored to the last", next: 5, heads: map[string]uint64{"standard": 4}, want: 6},
		// A gap in the records must not be filled: the new epoch is
		// numbered above every existing record, or the star's epochs
		// would no longer be ordered by number.
		{name: "gap below the last record", deleted: []uint64{4}, next: 2, heads: map[string]uint64{"standard": 1}, want: 6},
		{name: "gap at the counter", deleted: []uint64{3}, next: 2, heads: map[string]uint64{"standard": 1}, want: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for range 5 {
				e.mint(t, "s1", standard())
			}
			for _, n := range tc.deleted {
				e.remove(t, e.m.RecordKey("s1", n))
			}
			e.putChain(t, "s1", tc.next, tc.heads)

			r := e.mint(t, "s1", standard())
			assert.Equal(t, tc.want, r.Epoch)
			ch, err := e.m.Chain(ctx, "s1")
			require.NoError(t, err)
			assert.Equal(t, tc.want+1, ch.Next)
			assert.Equal(t, tc.want, ch.Heads["standard"])
			assert.Equal(t, uint64(tc.want+1), e.mint(t, "s1", standard()).Epoch)
		})
	}
}

func TestCounterLagIgnoresStrayKeys(t *testing.T) {
	// Keys under the chain that are not record keys do not steer numbering.
	e := newEnv(t)
	e.mint(t, "s1", standard())
	e.mint(t, "s1", standard())
	e.overwrite(t, "chains/s1/900", []byte(`{}`))
	e.overwrite(t, "chains/s1/zz", []byte(`{}`))
	e.putChain(t, "s1", 1, nil)
	assert.Equal(t, uint64(3), e.mint(t, "s1", standard()).Epoch)
}

func TestMintRetriesAfterLosingTheCounter(t *testing.T) {
	// Another minter takes the number between our read and our txn: we
	// read the counter again and take the next one.
	ctx := context.Background()
	e := newEnv(t)
	other, err := epoch.NewMinter(e.mem, epoch.Options{})
	require.NoError(t, err)
	var once sync.Once
	e.store.set(func(f *faultStore) {
		f.beforeTxn = func(metastore.Txn) {
			once.Do(func() {
				r, err := other.Mint(ctx, "s1", express())
				require.NoError(t, err)
				require.Equal(t, uint64(1), r.Epoch)
			})
		}
	})
	r, err := e.m.Mint(ctx, "s1", standard())
	require.NoError(t, err)
	assert.Equal(t, uint64(2), r.Epoch)
	txns, applied := e.store.counts()
	assert.Equal(t, 2, txns)
	assert.Equal(t, 1, applied)
	assert.Equal(t, "express", e.get(t, "s1", 1).Constants.Class)
}

func TestMintUnavailable(t *testing.T) {
	ctx := context.Background()
	unavailable := metastore.Unavailable(errDown)
	for _, tc := range []struct {
		name string
		set  func(f *faultStore)
	}{
		{"txn", func(f *faultStore) { f.failTxn = unavailable }},
		{"get", func(f *faultStore) { f.failGet = unavailable }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.store.set(tc.set)
			r, err := e.m.Mint(ctx, "s1", standard())
			require.ErrorIs(t, err, metastore.ErrUnavailable)
			assert.ErrorIs(t, err, errDown, "the cause is kept")
			assert.Nil(t, r)
			assert.Empty(t, e.keys(t))
		})
	}
}

func TestMintLostResponse(t *testing.T) {
	// The txn lands but its answer is lost: the caller sees an unknown
	// outcome and mints again. The first epoch exists, open and unheld;
	// the retry gets a fresh number.
	ctx := context.Background()
	e := newEnv(t)
	e.store.set(func(f *faultStore) { f.loseTxn = metastore.Unavailable(errDown) })
	_, err := e.m.Mint(ctx, "s1", standard())
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	e.store.set(func(f *faultStore) { f.loseTxn = nil })

	r := e.mint(t, "s1", standard())
	assert.Equal(t, uint64(2), r.Epoch)
	orphan := e.get(t, "s1", 1)
	assert.Equal(t, epoch.StateOpen, orphan.State)
	sup, err := e.m.Superseded(ctx, orphan)
	require.NoError(t, err)
	assert.True(t, sup)
}

func TestReadsUnavailable(t *testing.T) {
	// "Unknown" is never read as "absent".
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	r1 := e.get(t, "s1", 1)
	e.store.set(func(f *faultStore) {
		f.failGet = metastore.Unavailable(errDown)
		f.failList = metastore.Unavailable(errDown)
	})

	_, err := e.m.Get(ctx, "s1", 1)
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	assert.NotErrorIs(t, err, epoch.ErrNoRecord)

	_, err = e.m.Chain(ctx, "s1")
	assert.ErrorIs(t, err, metastore.ErrUnavailable)

	_, err = e.m.Superseded(ctx, r1)
	assert.ErrorIs(t, err, metastore.ErrUnavailable)

	n := 0
	for r, err := range e.m.Epochs(ctx, "s1") {
		n++
		assert.Nil(t, r)
		assert.ErrorIs(t, err, metastore.ErrUnavailable)
	}
	assert.Equal(t, 1, n)

	_, err = e.m.Publish(ctx, "s1", 1, 0)
	assert.ErrorIs(t, err, metastore.ErrUnavailable)
}

func TestTransitionsUnavailable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	e.store.set(func(f *faultStore) { f.failTxn = metastore.Unavailable(errDown) })
	_, err := e.m.Publish(ctx, "s1", 1, 4)
	assert.ErrorIs(t, err, metastore.ErrUnavailable)
	_, err = e.m.Advance(ctx, "s1", 1, epoch.Cursors{Trimmed: 0, Rewritten: 0, Checkpoint: 0})
	assert.NoError(t, err, "equal cursors write nothing")
	_, err = e.claims["s1/1"].Advance(ctx, 1)
	assert.ErrorIs(t, err, metastore.ErrUnavailable)
	e.store.set(func(f *faultStore) { f.failTxn = nil })
	assert.Equal(t, epoch.StateOpen, e.get(t, "s1", 1).State)
}

func TestMintCanceled(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.m.Mint(ctx, "s1", standard())
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, e.keys(t))
}

func TestRoot(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Options{})
	prod, err := epoch.NewMinter(ms, epoch.Options{Root: "prod/"})
	require.NoError(t, err)
	staging, err := epoch.NewMinter(ms, epoch.Options{Root: "staging/"})
	require.NoError(t, err)

	assert.Equal(t, "prod/chains/s1", prod.ChainKey("s1"))
	assert.Equal(t, "prod/chains/s1/00000000000000000001", prod.RecordKey("s1", 1))

	for i := range 3 {
		r, err := prod.Mint(ctx, "s1", standard())
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), r.Epoch)
	}
	r, err := staging.Mint(ctx, "s1", standard())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), r.Epoch, "roots do not share counters")

	kvs, _, err := ms.List(ctx, "prod/")
	require.NoError(t, err)
	assert.Len(t, kvs, 4)
	kvs, _, err = ms.List(ctx, "chains/")
	require.NoError(t, err)
	assert.Empty(t, kvs)
}

func TestNewMinterRefuses(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	for _, tc := range []struct {
		name  string
		store metastore.Store
		opts  epoch.Options
		field string
	}{
		{"nil store", nil, epoch.Options{}, "store"},
		{"root without slash", ms, epoch.Options{Root: "prod"}, "Root"},
		{"root with control byte", ms, epoch.Options{Root: "pr\x00od/"}, "Root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := epoch.NewMinter(tc.store, tc.opts)
			require.ErrorIs(t, err, cutline.ErrInvalid)
			var ce *cutline.ConfigError
			require.True(t, errors.As(err, &ce))
			assert.Equal(t, tc.field, ce.Field)
			assert.Nil(t, m)
		})
	}
}

func TestRecordString(t *testing.T) {
	r := &epoch.Record{Star: "s1", Epoch: 7, Constants: standard(), State: epoch.StateFenced, Cut: 12}
	assert.Equal(t, "s1/7 (standard, K=3 W=2 window=8) fenced cut=12", r.String())
	assert.True(t, r.Fenced())
	r.State = epoch.StateSettled
	assert.True(t, r.Fenced())
	assert.Equal(t, fmt.Sprintf("s1/7 (standard, K=3 W=2 window=8) %s cut=12", epoch.StateSettled), r.String())
}

func TestMintRefusesToWrapAround(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.putChain(t, "s1", math.MaxUint64, nil)
	rev := e.mem.Revision()
	_, err := e.m.Mint(ctx, "s1", standard())
	require.ErrorIs(t, err, metastore.ErrBadRecord)
	assert.Contains(t, err.Error(), "exhausted")
	assert.Equal(t, rev, e.mem.Revision())

	// A record at the last number, found through a lagging counter.
	e = newEnv(t)
	e.mint(t, "s1", standard())
	rec, _ := e.raw(t, e.m.RecordKey("s1", 1))
	e.overwrite(t, e.m.RecordKey("s1", math.MaxUint64), mustJSON(t, rec))
	e.putChain(t, "s1", 1, nil)
	rev = e.mem.Revision()
	_, err = e.m.Mint(ctx, "s1", standard())
	require.ErrorIs(t, err, metastore.ErrBadRecord)
	assert.Contains(t, err.Error(), "exhausted")
	assert.Equal(t, rev, e.mem.Revision())
}
