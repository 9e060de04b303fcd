package cutlinetest_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// Each kind of object Put places reads back as what a fence sees.
func TestPutAndState(t *testing.T) {
	e := cutlinetest.NewMem(t, 3)
	rec := e.Party("setup").Mint(starA, e.Constants(2, 8))
	for s, c := range []struct{ put, state byte }{
		{cutlinetest.Flight, cutlinetest.Flight},
		{cutlinetest.Poison, cutlinetest.Poison},
		{cutlinetest.Corrupt, cutlinetest.Corrupt},
		{cutlinetest.Misplaced, cutlinetest.Corrupt},
		{cutlinetest.BadBody, cutlinetest.Corrupt},
		{cutlinetest.Conflicting, cutlinetest.Flight},
		{cutlinetest.Empty, cutlinetest.Empty},
	} {
		e.Put(1, rec, uint64(s), c.put)
		require.Equal(t, "E "+string(c.state)+" E", e.State(rec, uint64(s)), "Put %c", c.put)
	}
	e.Delete(1, rec, 0)
	require.Equal(t, "E E E", e.State(rec, 0))
}

// The README's walk, small: a fence completes what the writer started,
// poisons the first empty slot, and settlement deletes what lies past it.
// The environment runs on any buckets and store: here New over directory
// zones, with a metastore root and a key prefix of the test's own.
func TestLayoutFenceSettle(t *testing.T) {
	var buckets []objstore.Bucket
	for _, name := range []string{"a", "b", "c"} {
		b, err := fs.New(filepath.Join(t.TempDir(), name), fs.Options{Name: name, NoSync: true, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		buckets = append(buckets, b)
	}
	e := cutlinetest.New(t, memstore.New(memstore.Options{}), buckets, cutlinetest.Options{Root: "t1/", Prefix: "t1/chains"})
	p := e.Party("fencer-1")
	rec := p.Mint(starA, e.Constants(2, 8))
	e.Layout(rec,
		"F F F",
		"F E F",
		"F E E",
		"E E E",
		"F F E",
	)
	reps, err := p.Settler.SettleAll(t.Context(), starA)
	require.NoError(t, err)
	require.Equal(t, uint64(3), reps[0].Cut)
	for s, want := range []string{"F F F", "F E F", "F F F", "P P E", "E E E"} {
		require.Equal(t, want, e.State(rec, uint64(s)), "slot %d", s)
	}
	require.True(t, e.Record(starA, rec.Epoch).Fenced())
}

// A slot holding two different flights stops the fence.
func TestConflictingFlight(t *testing.T) {
	e := cutlinetest.NewMem(t, 3)
	p := e.Party("fencer-1")
	rec := p.Mint(starA, e.Constants(2, 8))
	e.Layout(rec, "F F E", "F Y E")
	_, err := p.Fencer.Fence(t.Context(), starA, rec.Epoch)
	require.ErrorIs(t, err, chain.ErrConflictingFlight)
}

// The host over a roll.Roller: records keep being acknowledged across a
// planned roll (a window change), and the run checks clean.
func TestRollerHost(t *testing.T) {
	ctx := t.Context()
	e := cutlinetest.NewMem(t, 3)
	p := e.Party(starA)
	r, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 4), roll.Options{})
	require.NoError(t, err)
	var hist cutlinetest.History
	h := cutlinetest.StartRoller(p, r, cutlinetest.HostOptions{History: &hist, AbsorbEvery: 3})
	for i := range 10 {
		require.NoError(t, h.Submit(ctx, id(i)))
	}
	require.NoError(t, r.Roll(ctx, e.Constants(2, 8)))
	for i := 10; i < 20; i++ {
		require.NoError(t, h.Submit(ctx, id(i)))
	}
	require.NoError(t, h.Close(ctx))
	require.Equal(t, 20, h.Acked())
	require.Empty(t, h.Failed())
	e.Verify(&hist)
}

// A producer that sends an acknowledged record again makes it appear
// twice: the checker reports the duplicated id.
func TestCheckDuplicatedID(t *testing.T) {
	ctx := t.Context()
	e := cutlinetest.NewMem(t, 3)
	p := e.Party(starA)
	h := cutlinetest.StartHost(p, p.Writer(p.Mint(starA, e.Constants(2, 8)), chain.WriterOptions{}), cutlinetest.HostOptions{})
	for _, id := range []string{"x", "y", "x"} {
		require.NoError(t, h.Submit(ctx, id))
	}
	require.NoError(t, h.Close(ctx))
	vs := e.Check(h.History())
	require.Len(t, vs, 2, "%v", vs.Err())
	for _, v := range vs {
		require.Equal(t, 5, v.Guarantee)
		require.Contains(t, v.Msg, `record id "x" is found 2 times`)
	}
}

// A killed host refuses further records, answers nothing more, and a
// closed one likewise; WaitAcked honours its context.
func TestHostStops(t *testing.T) {
	ctx := t.Context()
	e := cutlinetest.NewMem(t, 3)
	p := e.Party(starA)
	h := cutlinetest.StartHost(p, p.Writer(p.Mint(starA, e.Constants(2, 8)), chain.WriterOptions{}), cutlinetest.HostOptions{})
	require.NoError(t, h.Submit(ctx, "a"))
	require.NoError(t, h.WaitAcked(ctx, 1))
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, h.WaitAcked(done, 2), context.Canceled)
	h.Kill()
	require.ErrorIs(t, h.Submit(ctx, "b"), cutlinetest.ErrStopped)
	require.Error(t, h.WaitAcked(ctx, 2))
	require.Equal(t, []string{"b"}, h.Failed())
	require.NoError(t, h.Err())
}

// Options.Fault is every zone's fault injection: here a rule that fails
// the first create in each zone, which the backends never see.
func TestFaultOptions(t *testing.T) {
	e := cutlinetest.New(t, memstore.New(memstore.Options{}), []objstore.Bucket{memblob.New("a"), memblob.New("b")},
		cutlinetest.Options{Fault: fault.Options{Seed: 16, Rules: []fault.Rule{{Op: fault.OpCreate, Count: 1}}}})
	for i, z := range e.Zones {
		require.Error(t, z.Create(t.Context(), "k", []byte("x")), "zone %d", i)
		require.NoError(t, z.Create(t.Context(), "k", []byte("x")), "zone %d", i)
	}
}

// Options.Wrap wraps each fault zone once, in what every party sees: the
// parties' requests pass through the wrapper, while Put and State reach
// the backends directly.
func TestWrapOptions(t *testing.T) {
	var seen []*countingBucket
	e := cutlinetest.New(t, memstore.New(memstore.Options{}), []objstore.Bucket{memblob.New("a"), memblob.New("b")},
		cutlinetest.Options{Wrap: func(i int, z objstore.Bucket) objstore.Bucket {
			require.IsType(t, &fault.Bucket{}, z, "zone %d", i)
			c := &countingBucket{Bucket: z}
			seen = append(seen, c)
			return c
		}})
	require.Len(t, seen, 2)
	p := e.Party("writer")
	q := e.Party("another")
	rec := p.Mint(starA, e.Constants(2, 8))
	e.Put(0, rec, 1, cutlinetest.Poison)
	w := p.Writer(rec, chain.WriterOptions{})
	_, err := w.Append(t.Context(), cutlinetest.Record("s", 0, "x"))
	require.NoError(t, err)
	require.NoError(t, w.Close(t.Context()))
	require.Equal(t, "F F", e.State(rec, 0))
	for i, c := range seen {
		require.Equal(t, int64(1), c.creates.Load(), "zone %d", i) // slot 0 only: Put went around
		require.Equal(t, 1, e.Zones[i].Stats().Calls[fault.OpCreate], "zone %d", i)
	}
	_, err = q.Reader.Read(t.Context(), starA, chain.Position{Epoch: rec.Epoch, Slot: 0})
	require.NoError(t, err)
	require.Positive(t, seen[0].reads.Load()+seen[1].reads.Load())
}

// countingBucket counts the creates and reads that pass through it.
type countingBucket struct {
	objstore.Bucket
	creates, reads atomic.Int64
}

func (c *countingBucket) Create(ctx context.Context, key string, data []byte) error {
	c.creates.Add(1)
	return c.Bucket.Create(ctx, key, data)
}

func (c *countingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	c.reads.Add(1)
	return c.Bucket.Get(ctx, key)
}

func (c *countingBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.reads.Add(1)
	return c.Bucket.GetRange(ctx, key, off, n)
}

// flakyCoverage refuses to cover slots from 8 on while down is set, as a
// metastore that is unreachable.
type flakyCoverage struct {
	settle.Coverage
	down atomic.Bool
}

var errDown = errors.New("metastore unreachable")

func (c *flakyCoverage) Cover(ctx context.Context, star string, f chain.Flight) error {
	if c.down.Load() && f.Slot >= 8 {
		return errDown
	}
	return c.Coverage.Cover(ctx, star, f)
}

// With LagCheckpoint the checkpoint stays one batch behind what is
// covered. A refused cover is recorded and what it left stays pending,
// for the next absorb or for Flush once the host is closed.
func TestHostLagAndRetry(t *testing.T) {
	ctx := t.Context()
	e := cutlinetest.NewMem(t, 3)
	p := e.Party(starA)
	rec := p.Mint(starA, e.Constants(2, 16))
	cov := &flakyCoverage{Coverage: p.Refs}
	cov.down.Store(true)
	h := cutlinetest.StartHost(p, p.Writer(rec, chain.WriterOptions{}), cutlinetest.HostOptions{AbsorbEvery: 4, LagCheckpoint: true, Coverage: cov})
	for i := range 12 {
		require.NoError(t, h.Submit(ctx, id(i)))
	}
	require.ErrorIs(t, h.Close(ctx), errDown)
	require.Equal(t, 12, h.Acked())
	require.Len(t, h.Errors(), 1)
	require.Equal(t, 8, h.Covered(), "slots 8 to 11 are pending")
	at := func(s uint64) chain.Position { return chain.Position{Epoch: rec.Epoch, Slot: s} }
	require.Equal(t, at(4), h.Checkpoint(), "one batch behind what is covered")
	require.Equal(t, uint64(4), e.Record(starA, rec.Epoch).Cursors.Checkpoint)

	require.ErrorIs(t, h.Flush(), errDown)
	require.Len(t, h.Errors(), 2)
	cov.down.Store(false)
	require.NoError(t, h.Flush())
	require.NoError(t, h.Flush(), "nothing is left pending")
	require.Equal(t, 12, h.Covered())
	require.Equal(t, at(8), h.Checkpoint())
	require.Equal(t, uint64(8), e.Record(starA, rec.Epoch).Cursors.Checkpoint)
	require.Equal(t, []string{id(0), id(1), id(2), id(3), id(4), id(5), id(6), id(7), id(8), id(9), id(10), id(11)}, p.StreamIDs("s"))
	ids, _ := p.ChainIDs(starA)
	require.Equal(t, p.StreamIDs("s"), ids)
	e.Verify(h.History())
}
