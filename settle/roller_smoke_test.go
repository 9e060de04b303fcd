package settle

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	metamem "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/mem"
)

type smoke struct {
	minter  *epoch.Minter
	zones   chain.Zones
	buckets []*mem.Bucket
	settler *Settler
	refs    *RefIndex
	keys    chain.Keys
}

func locate(p []byte) (string, uint64, uint64, error) {
	var off uint64
	_, err := fmt.Sscanf(string(p), "s|%d|", &off)
	return "s", off, 1, err
}

func newSmoke(t *testing.T) *smoke {
	store := metamem.New(metamem.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	require.NoError(t, err)
	s := &smoke{minter: m, keys: chain.Keys{Prefix: "c"}}
	var bs []objstore.Bucket
	for _, n := range []string{"a", "b", "c"} {
		b := mem.New(n)
		s.buckets = append(s.buckets, b)
		bs = append(bs, b)
	}
	s.zones = chain.NewZones(bs...)
	f, err := fence.New(m, s.zones, fence.Options{Keys: s.keys})
	require.NoError(t, err)
	s.refs, err = NewRefIndex(store, "", locate)
	require.NoError(t, err)
	s.settler, err = New(m, s.zones, s.refs, Options{Keys: s.keys, Fencer: f})
	require.NoError(t, err)
	return s
}

func TestRollerSmoke(t *testing.T) {
	ctx := context.Background()
	s := newSmoke(t)
	c := epoch.Constants{Class: "standard", Buckets: []string{"a", "b", "c"}, W: 2, Window: 8}
	r, err := OpenRoller(ctx, s.settler, "star", c, RollerOptions{RollOnHalt: true})
	require.NoError(t, err)
	var as []*Append
	for i := range 50 {
		a, err := r.Submit(ctx, fmt.Appendf(nil, "s|%d|x", i))
		require.NoError(t, err)
		as = append(as, a)
	}
	c2 := c
	c2.W = 3
	require.NoError(t, r.Roll(ctx, c2))
	for i := 50; i < 100; i++ {
		a, err := r.Submit(ctx, fmt.Appendf(nil, "s|%d|x", i))
		require.NoError(t, err)
		as = append(as, a)
	}
	// poison a slot ahead of the writer: it halts, and the roller rolls
	ep := r.Epoch().Epoch
	for _, b := range s.buckets[:2] {
		require.NoError(t, b.Create(ctx, s.keys.Slot("star", ep, 60), chain.EncodePoison("star", ep, 60, "x")))
	}
	for i := 100; i < 200; i++ {
		a, err := r.Submit(ctx, fmt.Appendf(nil, "s|%d|x", i))
		require.NoError(t, err)
		as = append(as, a)
	}
	var last chain.Position
	for i, a := range as {
		pos, err := a.Wait(ctx)
		require.NoError(t, err, "append %d", i)
		if i > 0 {
			require.True(t, last.Less(pos), "append %d at %v after %v", i, pos, last)
		}
		last = pos
	}
	require.NoError(t, r.Close(ctx))
	_, err = s.settler.SettleAll(ctx, "star")
	require.NoError(t, err)
	rd, err := chain.NewReader(s.minter, s.zones, chain.ReaderOptions{Keys: s.keys})
	require.NoError(t, err)
	n := 0
	for f, err := range rd.Flights(ctx, "star", chain.Position{}) {
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("s|%d|x", n), string(f.Payload))
		n++
	}
	require.Equal(t, 200, n)
	next, err := s.refs.Next(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, uint64(200), next)
}
