package authoritytest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// The progress fence: a former holder's token cannot advance a cursor,
// write coverage or publish a cut, through the guard its host wires into
// its store; admission refuses it; the new holder's writes pass. Each
// refusal applies nothing and is not a conflict writers would retry.
func staleTokenOnEveryWritePath(t *testing.T, b Backend) {
	c := newCluster(t, b)
	a := c.join("node-a", promotable)
	nb := c.join("node-b", promotable)
	ga := c.grantTo("node-a")
	storeA, err := authority.Guard(c.store, "", domain, ga.Revision)
	require.NoError(t, err)
	minterA, err := epoch.NewMinter(storeA, epoch.Options{Identity: "node-a"})
	require.NoError(t, err)
	refsA, err := settle.NewRefIndex(storeA, "", cutlinetest.Locate)
	require.NoError(t, err)
	cons := epoch.Constants{Class: "standard", Buckets: []string{"zone-a"}, W: 1, Window: 4}
	rec, err := minterA.Mint(c.ctx, "node-a", cons)
	require.NoError(t, err, "the holder writes under its grant")
	require.NoError(t, refsA.CoverSpan(c.ctx, "node-a", chain.Position{Epoch: rec.Epoch, Slot: 0}, settle.Span{Stream: "s", Offset: 0, Count: 1}))
	other, err := minterA.Mint(c.ctx, "node-a", epoch.Constants{Class: "express", Buckets: []string{"zone-a"}, W: 1, Window: 4})
	require.NoError(t, err)

	// The grant moves to node-b (node-a leaves; node-b recovers).
	require.NoError(t, c.heartbeat("node-a", chain.Position{Epoch: rec.Epoch, Slot: 1}))
	c.disconnect("node-a", true) // partitioned: its reservation runs out
	c.advance(3 * time.Second)
	recov := c.state()
	require.Equal(t, authority.Vacant, recov.Phase)
	nb.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{}, Usable: true})
	nb.Step(authority.RecoverableReport{Star: "node-a", Pos: recov.Required.Pos})
	c.advance(time.Second)
	order := c.recover["node-b"]
	require.NotNil(t, order)
	// node-b's recovery writes pass through the recovery transition.
	storeR, err := authority.Guard(c.store, "", domain, order.Grant.Revision)
	require.NoError(t, err)
	minterR, err := epoch.NewMinter(storeR, epoch.Options{Identity: "node-b"})
	require.NoError(t, err)
	_, err = minterR.Publish(c.ctx, "node-a", rec.Epoch, 1)
	require.NoError(t, err, "the candidate fences the predecessor's epoch through its recovery transition")

	before := revisions(t, c.store)
	// node-a, now stale, tries every write path. (Its local deadline
	// still runs: no new token is issued before it passes.)
	for name, write := range map[string]func() error{
		"cursor advance": func() error {
			_, err := minterA.Advance(c.ctx, "node-a", rec.Epoch, epoch.Cursors{Checkpoint: 1})
			return err
		},
		"coverage": func() error {
			return refsA.CoverSpan(c.ctx, "node-a", chain.Position{Epoch: rec.Epoch, Slot: 1}, settle.Span{Stream: "s", Offset: 1, Count: 1})
		},
		"publication": func() error {
			_, err := minterA.Publish(c.ctx, "node-a", other.Epoch, 0)
			return err
		},
		"mint": func() error {
			_, err := minterA.Mint(c.ctx, "node-a", cons)
			return err
		},
	} {
		err := write()
		require.ErrorIs(t, err, authority.ErrStaleGrant, name)
		require.NotErrorIs(t, err, metastore.ErrConflict, "%s: a stale token is not a conflict to retry", name)
	}
	require.Equal(t, before, revisions(t, c.store), "the stale writes applied nothing")

	// node-b recovers and gets token 2; its recovery guard is now stale
	// too, and its new grant's guard passes.
	nb.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{Epoch: rec.Epoch, Slot: 1}, Usable: true})
	for range 12 {
		c.advance(time.Second)
	}
	gb := nb.Grant()
	require.Equal(t, authority.Token(2), gb.Token)
	require.ErrorIs(t, a.Admit(c.now), authority.ErrNotAdmitted, "admission: the former holder's deadline passed before token 2")
	c.connect("node-a")
	require.ErrorIs(t, a.Admit(ga.Deadline.Add(-time.Second)), authority.ErrNotAdmitted, "revoked on reconnect, whatever its clock says")
	_, err = minterR.Advance(c.ctx, "node-a", rec.Epoch, epoch.Cursors{Checkpoint: 1})
	require.ErrorIs(t, err, authority.ErrStaleGrant, "the recovery transition ended with the grant")
	storeB, err := authority.Guard(c.store, "", domain, gb.Revision)
	require.NoError(t, err)
	refsB, err := settle.NewRefIndex(storeB, "", cutlinetest.Locate)
	require.NoError(t, err)
	require.NoError(t, refsB.CoverSpan(c.ctx, "node-a", chain.Position{Epoch: rec.Epoch, Slot: 0}, settle.Span{Stream: "s", Offset: 0, Count: 1}), "idempotent cover by the new holder")
	_, err = authority.Guard(c.store, "", domain, 0)
	require.Error(t, err, "a guard needs a revision")
}

// revisions lists every key's revision.
func revisions(t *testing.T, s metastore.Store) map[string]int64 {
	kvs, _, err := s.List(t.Context(), "")
	require.NoError(t, err)
	out := map[string]int64{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Revision
	}
	return out
}
