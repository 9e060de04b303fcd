package fault_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/objstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return fault.Wrap(memblob.New("zone-a"), fault.Options{Seed: 1})
	})
}

// TestConformanceWithIdleRules: rules that never match leave the bucket
// conformant.
func TestConformanceWithIdleRules(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return fault.Wrap(memblob.New("zone-a"), fault.Options{Seed: 1, Rules: []fault.Rule{
			{Prefix: "elsewhere/"},
			{Glob: "*/never-*"},
			{Op: fault.OpCreate, Kind: fault.Straggler, Prefix: "nope/"},
		}})
	})
}

func requireInjected(t *testing.T, err error, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	require.ErrorIs(t, err, fault.ErrInjected)
	var op *objstore.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "zone-a", op.Bucket)
}

func TestDown(t *testing.T) {
	ctx := t.Context()
	inner := memblob.New("zone-a")
	require.NoError(t, inner.Create(ctx, "k", []byte("v")))
	b := fault.Wrap(inner, fault.Options{})
	b.SetDown(true)
	require.True(t, b.Down())

	requireInjected(t, b.Create(ctx, "new", []byte("x")), objstore.ErrUnavailable)
	_, err := b.Get(ctx, "k")
	requireInjected(t, err, fault.ErrDown)
	_, err = b.GetRange(ctx, "k", 0, 1)
	requireInjected(t, err, objstore.ErrUnavailable)
	requireInjected(t, b.Delete(ctx, "k"), objstore.ErrUnavailable)
	_, err = b.List(ctx, "", "", 10)
	requireInjected(t, err, objstore.ErrUnavailable)

	require.Equal(t, 1, inner.Len(), "nothing reached the inner bucket")
	st := b.Stats()
	for _, op := range []fault.Method{fault.OpCreate, fault.OpGet, fault.OpGetRange, fault.OpDelete, fault.OpList} {
		require.Equal(t, 1, st.Calls[op], op)
		require.Equal(t, 0, st.Forwarded[op], op)
		require.Equal(t, 1, st.Injected[op], op)
	}

	// Local answers come first: a bad key or a done context is not an
	// outage.
	_, err = b.Get(ctx, "../x")
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, b.Create(canceled, "x", nil), context.Canceled)

	b.SetDown(false)
	require.NoError(t, b.Create(ctx, "new", []byte("x")))
	got, err := b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(got))
}

func TestFailNextCalls(t *testing.T) {
	ctx := t.Context()
	inner := memblob.New("zone-a")
	b := fault.Wrap(inner, fault.Options{Rules: []fault.Rule{{Op: fault.OpCreate, Count: 2}}})
	for i := range 2 {
		requireInjected(t, b.Create(ctx, "k", []byte("v")), objstore.ErrUnavailable)
		require.Equal(t, 0, inner.Len(), "attempt %d: a failed create never lands", i)
	}
	require.NoError(t, b.Create(ctx, "k", []byte("v")), "the rule is spent")
	_, err := b.Get(ctx, "k")
	require.NoError(t, err, "the rule was for creates only")
}

func TestRuleMatching(t *testing.T) {
	ctx := t.Context()
	b := fault.Wrap(memblob.New("zone-a"), fault.Options{Rules: []fault.Rule{
		{Op: fault.OpGet, Prefix: "p/star-1/"},
		{Op: fault.OpGet, Glob: "q/*/00000003"},
		{Op: fault.OpList, Prefix: "p/"},
		{Op: fault.OpDelete, Err: objstore.ErrNotFound},
	}})
	for _, k := range []string{"p/star-1/1", "p/star-2/1", "q/a/00000003", "q/a/00000004", "q/a/b/00000003"} {
		require.NoError(t, b.Create(ctx, k, []byte(k)))
	}
	for k, fails := range map[string]bool{
		"p/star-1/1": true, "p/star-2/1": false,
		"q/a/00000003": true, "q/a/00000004": false, "q/a/b/00000003": false,
	} {
		_, err := b.Get(ctx, k)
		if fails {
			requireInjected(t, err, objstore.ErrUnavailable)
		} else {
			require.NoError(t, err, k)
		}
		_, err = b.GetRange(ctx, k, 0, 1)
		require.NoError(t, err, "getrange %s: rules were for get", k)
	}
	_, err := b.List(ctx, "p/star-2/", "", 10)
	requireInjected(t, err, objstore.ErrUnavailable)
	page, err := b.List(ctx, "q/", "", 10)
	require.NoError(t, err)
	require.Len(t, page, 3)

	// A custom error: here a delete that claims the object is missing.
	err = b.Delete(ctx, "q/a/00000004")
	requireInjected(t, err, objstore.ErrNotFound)
	require.NotErrorIs(t, err, objstore.ErrUnavailable)
}

// failures runs n creates and returns which ones failed.
func failures(t *testing.T, b *fault.Bucket, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		err := b.Create(t.Context(), fmt.Sprintf("k/%d", i), nil)
		if err != nil {
			require.ErrorIs(t, err, fault.ErrInjected)
			out[i] = true
		}
	}
	return out
}

func TestProbabilityIsSeeded(t *testing.T) {
	rule := fault.Rule{Op: fault.OpCreate, Probability: 0.3}
	run := func(seed uint64) []bool {
		return failures(t, fault.Wrap(memblob.New("zone-a"), fault.Options{Seed: seed, Rules: []fault.Rule{rule}}), 200)
	}
	a, again, other := run(42), run(42), run(43)
	require.Equal(t, a, again, "same seed, same faults")
	require.NotEqual(t, a, other, "another seed, other faults")
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	require.Greater(t, n, 0)
	require.Less(t, n, 200)
}

func TestLostAnswer(t *testing.T) {
	ctx := t.Context()
	inner := memblob.New("zone-a")
	b := fault.Wrap(inner, fault.Options{Rules: []fault.Rule{
		{Op: fault.OpCreate, Kind: fault.LostAnswer, Count: 1},
		{Op: fault.OpDelete, Kind: fault.LostAnswer, Count: 1},
	}})
	requireInjected(t, b.Create(ctx, "k", []byte("landed")), objstore.ErrUnavailable)
	got, err := inner.Get(ctx, "k")
	require.NoError(t, err, "the write landed although the caller got an error")
	require.Equal(t, "landed", string(got))
	require.ErrorIs(t, b.Create(ctx, "k", []byte("retry")), objstore.ErrExists, "a retry finds its own write")

	requireInjected(t, b.Delete(ctx, "k"), objstore.ErrUnavailable)
	_, err = inner.Get(ctx, "k")
	require.ErrorIs(t, err, objstore.ErrNotFound, "the delete was carried out")

	st := b.Stats()
	require.Equal(t, 2, st.Calls[fault.OpCreate])
	require.Equal(t, 2, st.Forwarded[fault.OpCreate])
	require.Equal(t, 1, st.Injected[fault.OpCreate])
}

func TestStragglerLandsOnRelease(t *testing.T) {
	ctx := t.Context()
	inner := memblob.New("zone-a")
	b := fault.Wrap(inner, fault.Options{Rules: []fault.Rule{{Kind: fault.Straggler, Count: 2}}})
	data := []byte("late flight")
	requireInjected(t, b.Create(ctx, "p/1", data), objstore.ErrUnavailable)
	requireInjected(t, b.Create(ctx, "p/0", []byte("other")), objstore.ErrUnavailable)
	copy(data, "XXXX") // the straggler carries the bytes as they were sent
	require.Equal(t, 0, inner.Len(), "not landed yet")
	require.Equal(t, []string{"p/1", "p/0"}, b.PendingStragglers())

	_, err := b.Get(ctx, "p/1")
	require.ErrorIs(t, err, objstore.ErrNotFound, "straggler rules only hold back creates")

	require.Equal(t, 2, b.ReleaseStragglers(ctx))
	got, err := inner.Get(ctx, "p/1")
	require.NoError(t, err)
	require.Equal(t, "late flight", string(got))
	require.Empty(t, b.PendingStragglers())
	st := b.Stats()
	require.Equal(t, 2, st.StragglersQueued)
	require.Equal(t, 2, st.StragglersLanded)
	require.Equal(t, 0, st.Forwarded[fault.OpCreate], "the creates never reached the bucket when made")
}

func TestStragglerNeverOverwrites(t *testing.T) {
	ctx := t.Context()
	inner := memblob.New("zone-a")
	b := fault.Wrap(inner, fault.Options{Rules: []fault.Rule{{Kind: fault.Straggler, Count: 1}}})
	requireInjected(t, b.Create(ctx, "slot", []byte("flight")), objstore.ErrUnavailable)
	require.NoError(t, b.Create(ctx, "slot", []byte("poison")), "a fencer takes the key first")

	require.Equal(t, 0, b.ReleaseStragglers(ctx))
	got, err := inner.Get(ctx, "slot")
	require.NoError(t, err)
	require.Equal(t, "poison", string(got))
	st := b.Stats()
	require.Equal(t, 1, st.StragglersFailed)
	require.Equal(t, 0, st.StragglersLanded)
}

func TestDropStragglers(t *testing.T) {
	ctx := t.Context()
	inner := memblob.New("zone-a")
	b := fault.Wrap(inner, fault.Options{Rules: []fault.Rule{{Kind: fault.Straggler}}})
	requireInjected(t, b.Create(ctx, "a", nil), objstore.ErrUnavailable)
	require.Equal(t, 1, b.DropStragglers())
	require.Equal(t, 0, b.ReleaseStragglers(ctx))
	require.Equal(t, 0, inner.Len())
	require.Equal(t, 1, b.Stats().StragglersDropped)
}

// notifying signals every create that reaches it.
type notifying struct {
	*memblob.Bucket
	created chan string
}

func (n notifying) Create(ctx context.Context, key string, data []byte) error {
	err := n.Bucket.Create(ctx, key, data)
	n.created <- key
	return err
}

func TestStragglerDelayOnFakeClock(t *testing.T) {
	ctx := t.Context()
	fake := clock.NewFake(time.Unix(1000, 0))
	inner := notifying{memblob.New("zone-a"), make(chan string, 4)}
	b := fault.Wrap(inner, fault.Options{
		Clock:          fake,
		StragglerDelay: 5 * time.Second,
		Rules:          []fault.Rule{{Kind: fault.Straggler, Count: 1}},
	})
	requireInjected(t, b.Create(ctx, "late", []byte("x")), objstore.ErrUnavailable)
	require.Equal(t, 1, fake.Waiters())

	fake.Advance(4 * time.Second)
	require.Equal(t, []string{"late"}, b.PendingStragglers())
	fake.Advance(time.Second)
	require.Equal(t, "late", <-inner.created, "the straggler lands when its delay has passed")
	b.ReleaseStragglers(ctx) // waits for the landing to finish
	st := b.Stats()
	require.Equal(t, 1, st.StragglersLanded)
	require.Empty(t, b.PendingStragglers())
	require.Equal(t, 1, inner.Len())
}

func TestStragglerReleasedBeforeItsDelay(t *testing.T) {
	ctx := t.Context()
	fake := clock.NewFake(time.Unix(1000, 0))
	inner := memblob.New("zone-a")
	b := fault.Wrap(inner, fault.Options{
		Clock:          fake,
		StragglerDelay: time.Minute,
		Rules:          []fault.Rule{{Kind: fault.Straggler, Count: 1}},
	})
	requireInjected(t, b.Create(ctx, "late", []byte("x")), objstore.ErrUnavailable)
	require.Equal(t, 1, b.ReleaseStragglers(ctx))
	require.Equal(t, 0, fake.Waiters(), "its timer is stopped")
	fake.Advance(time.Hour)
	require.Equal(t, 1, b.Stats().StragglersLanded, "it lands once")
}

func TestStragglerDelayUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		inner := memblob.New("zone-a")
		b := fault.Wrap(inner, fault.Options{
			StragglerDelay: time.Second, // real clock: virtual inside the bubble
			Rules:          []fault.Rule{{Kind: fault.Straggler, Count: 1}},
		})
		requireInjected(t, b.Create(ctx, "late", []byte("x")), objstore.ErrUnavailable)
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, 0, inner.Len())
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, inner.Len())
		require.Equal(t, 1, b.Stats().StragglersLanded)
	})
}

func TestRuleValidation(t *testing.T) {
	for _, r := range []fault.Rule{
		{Op: "put"},
		{Kind: fault.Effect(9)},
		{Op: fault.OpGet, Kind: fault.Straggler},
		{Glob: "["},
		{Probability: 1.5},
		{Probability: -0.1},
		{Count: -1},
	} {
		b := fault.Wrap(memblob.New("zone-a"), fault.Options{})
		require.Error(t, b.AddRule(r), "%+v", r)
		require.Panics(t, func() { fault.Wrap(memblob.New("zone-a"), fault.Options{Rules: []fault.Rule{r}}) })
	}
}

func TestClearRulesAndResetStats(t *testing.T) {
	ctx := t.Context()
	b := fault.Wrap(memblob.New("zone-a"), fault.Options{Rules: []fault.Rule{{}}})
	_, err := b.Get(ctx, "k")
	requireInjected(t, err, objstore.ErrUnavailable)
	b.ClearRules()
	_, err = b.Get(ctx, "k")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.NotErrorIs(t, err, fault.ErrInjected)
	require.Equal(t, 2, b.Stats().Calls[fault.OpGet])
	b.ResetStats()
	require.Equal(t, 0, b.Stats().Calls[fault.OpGet])
	require.Equal(t, "zone-a", b.Name())
	require.NotNil(t, b.Inner())
}

func Example() {
	ctx := context.Background()
	zone := fault.Wrap(memblob.New("zone-a"), fault.Options{
		Seed:  1,
		Rules: []fault.Rule{{Op: fault.OpCreate, Kind: fault.Straggler, Count: 1}},
	})

	// The writer's create times out, but the request is still on its way.
	err := zone.Create(ctx, "p/s/1/7", []byte("flight"))
	fmt.Println("writer sees unavailable:", errors.Is(err, objstore.ErrUnavailable))

	// A fencer poisons the slot first; the straggler then arrives too late
	// to overwrite anything.
	fmt.Println("fencer creates poison:", zone.Create(ctx, "p/s/1/7", []byte("poison")))
	fmt.Println("straggler created:", zone.ReleaseStragglers(ctx))
	data, _ := zone.Get(ctx, "p/s/1/7")
	fmt.Println("slot holds:", string(data))

	zone.SetDown(true)
	_, err = zone.Get(ctx, "p/s/1/7")
	fmt.Println("zone down:", errors.Is(err, objstore.ErrUnavailable))
	fmt.Println("get calls:", zone.Stats().Calls[fault.OpGet])
	// Output:
	// writer sees unavailable: true
	// fencer creates poison: <nil>
	// straggler created: 0
	// slot holds: poison
	// zone down: true
	// get calls: 2
}
