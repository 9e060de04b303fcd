package authoritytest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// recoveryWithTheLibrary: the holder acknowledges records and dies before
// absorbing them; the candidate placed in recovery fences and settles the
// holder's epoch with this library, through its recovery guard, reports a
// continuous frontier covering the requirement, and gets the next token;
// every acknowledged record is covered.
func recoveryWithTheLibrary(t *testing.T, b Backend) {
	c := newCluster(t, b)
	c.join("node-a", promotable)
	nb := c.join("node-b", promotable)
	ga := c.grantTo("node-a")
	env := cutlinetest.New(t, c.store, []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}, cutlinetest.Options{})
	// node-a writes under its grant: its minter's store is guarded.
	storeA, err := authority.Guard(c.store, "", domain, ga.Revision)
	require.NoError(t, err)
	minterA, err := epoch.NewMinter(storeA, epoch.Options{Identity: "node-a"})
	require.NoError(t, err)
	rec, err := minterA.Mint(c.ctx, "node-a", env.Constants(2, 8))
	require.NoError(t, err)
	p := env.Party("node-a")
	w := p.Writer(rec, chain.WriterOptions{})
	h := &cutlinetest.History{}
	host := cutlinetest.StartHost(p, w, cutlinetest.HostOptions{History: h, AbsorbEvery: 1000})
	for i := range 5 {
		require.NoError(t, host.Submit(c.ctx, "r"+string(rune('0'+i))))
	}
	require.NoError(t, host.WaitAcked(c.ctx, 5))
	require.NoError(t, c.heartbeat("node-a", chain.Position{Epoch: rec.Epoch, Slot: 5}))
	host.Kill()
	c.disconnect("node-a", true)
	c.advance(11 * time.Second)
	require.Equal(t, authority.Vacant, c.state().Phase)

	nb.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{}, Usable: true})
	nb.Step(authority.RecoverableReport{Star: "node-a", Pos: c.state().Required.Pos}) // every acknowledged record is in the zones
	c.advance(time.Second)
	order := c.recover["node-b"]
	require.NotNil(t, order, "node-b is placed in recovery")
	require.ErrorIs(t, nb.Admit(c.now), authority.ErrNotAdmitted)
	storeR, err := authority.Guard(c.store, "", domain, order.Grant.Revision)
	require.NoError(t, err)
	minterR, err := epoch.NewMinter(storeR, epoch.Options{Identity: "node-b"})
	require.NoError(t, err)
	zones := p.Zones
	fencer, err := fence.New(minterR, zones, fence.Options{Identity: "node-b"})
	require.NoError(t, err)
	refs, err := settle.NewRefIndex(storeR, "", cutlinetest.Locate)
	require.NoError(t, err)
	settler, err := settle.New(minterR, zones, refs, settle.Options{Fencer: fencer})
	require.NoError(t, err)
	frontier, _, err := authority.RecoverChain(c.ctx, minterR, settler, "node-a")
	require.NoError(t, err)
	require.True(t, order.Required.Covers("node-a", frontier), "frontier %v covers %v", frontier, order.Required)
	nb.Step(authority.FrontierReport{Star: "node-a", Pos: frontier, Usable: true})
	c.run()
	st := c.state()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-b", st.Holder)
	require.NoError(t, nb.Admit(c.now))
	next, err := refs.Next(c.ctx, "s")
	require.NoError(t, err)
	require.Equal(t, uint64(5), next, "every acknowledged record is covered")
	env.Verify(h)
}
