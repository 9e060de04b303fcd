package authoritytest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/metastore"
)

// putTxn is a write of one key, as any progress write would be.
func putTxn(key string) metastore.Txn {
	return metastore.Txn{Then: []metastore.Op{{Key: key, Value: []byte("x")}}}
}

// vacantAt runs a cluster to a vacant grant whose requirement is node-a's
// chain at (2, 7), with the promotable nodes named joined.
func vacantAt(t *testing.T, b Backend, names ...string) (*cluster, map[string]*authority.Runtime) {
	t.Helper()
	c := newCluster(t, b)
	c.join("node-a", promotable)
	rts := map[string]*authority.Runtime{}
	for _, n := range names {
		rts[n] = c.join(n, promotable)
	}
	c.grantTo("node-a")
	require.NoError(t, c.heartbeat("node-a", chain.Position{Epoch: 2, Slot: 7}))
	c.disconnect("node-a", false) // a goodbye: the grant ends at once
	st := c.state()
	require.Equal(t, authority.Vacant, st.Phase)
	require.Equal(t, authority.Required{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 7}}, st.Required)
	return c, rts
}

// A selected candidate that does not recover within RecoveryTimeout loses
// the selection: the grant is vacant again, its recovery guard is stale,
// its offers are refused for as long again, and another covering
// candidate is selected and granted. Alone, it is asked again once its
// backoff ends.
func recoveryTimeout(t *testing.T, b Backend) {
	t.Run("another candidate is chosen", func(t *testing.T) {
		c, rts := vacantAt(t, b, "node-c", "node-d")
		nc, nd := rts["node-c"], rts["node-d"]
		nc.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{}, Usable: true})
		nc.Step(authority.RecoverableReport{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 7}})
		nd.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{}, Usable: true}) // nothing it can say yet: no offer
		c.advance(time.Second)
		st := c.state()
		require.Equal(t, authority.Recovering, st.Phase)
		require.Equal(t, "node-c", st.Candidate)
		placed := c.now
		order := c.recover["node-c"]
		require.NotNil(t, order)
		nd.Step(authority.RecoverableReport{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 8}}) // too late: the grant is not vacant

		// node-c recovers nothing. Just before the timeout it is still
		// the candidate; at the timeout it is not.
		for c.now.Before(placed.Add(authority.DefaultRecoveryTimeout - time.Second)) {
			c.advance(time.Second)
		}
		require.Equal(t, authority.Recovering, c.state().Phase)
		require.Equal(t, "node-c", c.state().Candidate)
		c.advance(time.Second)
		st = c.state()
		require.NotEqual(t, "node-c", st.Candidate, "the selection was withdrawn at the timeout")
		c.recover = map[string]*authority.RecoverMsg{} // from here on, who is asked to recover
		require.Contains(t, st.Ended, "did not recover")
		guard, err := authority.Guard(c.store, "", domain, order.Grant.Revision)
		require.NoError(t, err)
		_, err = guard.Txn(c.ctx, putTxn("authority-test/probe"))
		require.ErrorIs(t, err, authority.ErrStaleGrant, "the withdrawn candidate's recovery writes are refused")
		require.ErrorIs(t, c.event(authority.Offer{Node: "node-c", Token: st.Token, Star: "node-a", Recoverable: chain.Position{Epoch: 2, Slot: 7}, Usable: true}),
			authority.ErrRefused, "its offers are refused for a while")

		// node-d, asked again, offers after its decision delay and is
		// selected; it recovers and gets the next token.
		for i := 0; c.state().Candidate != "node-d" && i < 10; i++ {
			c.advance(500 * time.Millisecond)
		}
		st = c.state()
		require.Equal(t, authority.Recovering, st.Phase)
		require.Equal(t, "node-d", st.Candidate)
		require.NotNil(t, c.recover["node-d"])
		require.Nil(t, c.recover["node-c"], "node-c no longer recovers")
		nd.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 8}, Usable: true})
		c.run()
		st = c.state()
		require.Equal(t, authority.Granted, st.Phase)
		require.Equal(t, "node-d", st.Holder)
		require.Equal(t, authority.Token(2), st.Token)
		require.NoError(t, nd.Admit(c.now))
		require.ErrorIs(t, nc.Admit(c.now), authority.ErrNotAdmitted)
	})
	t.Run("alone, it is asked again", func(t *testing.T) {
		c, rts := vacantAt(t, b, "node-c")
		nc := rts["node-c"]
		nc.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{}, Usable: true})
		nc.Step(authority.RecoverableReport{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 7}})
		c.advance(time.Second)
		require.Equal(t, "node-c", c.state().Candidate)
		withdrawn := time.Time{}
		for i := 0; withdrawn.IsZero() && i < 120; i++ {
			c.advance(time.Second)
			if c.state().Phase == authority.Vacant {
				withdrawn = c.now
			}
		}
		require.False(t, withdrawn.IsZero(), "the selection was never withdrawn")
		// Its own offer after the decision delay is refused; once the
		// backoff ends the controller asks it again, and it is selected.
		for i := 0; c.state().Phase == authority.Vacant && i < 120; i++ {
			c.advance(time.Second)
		}
		require.Equal(t, "node-c", c.state().Candidate)
		require.False(t, c.now.Before(withdrawn.Add(authority.DefaultRecoveryTimeout)), "selected again before its backoff ended")
		nc.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 7}, Usable: true})
		c.run()
		require.Equal(t, "node-c", c.state().Holder)
	})
}
