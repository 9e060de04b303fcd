package authoritytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

// A topology change starts a new decision from the self-fence, not a
// reopening: five voters, the holder loses two of them and fences itself
// when its challenge goes unanswered; 300 ms later the topology changes
// (a voter joins, or one of the missing leaves). The holder stays fenced
// through the change, a confirmation of the old topology reopens
// nothing, and only the controller's confirmation for the current token
// and topology restores writes, without a new token.
func fencedHolderTopologyChange(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name   string
		change func(c *cluster) // the new topology, which may or may not still put the holder in a minority
	}{
		{"a voter joins", func(c *cluster) { c.join("voter-4", voter) }},
		{"a missing voter leaves", func(c *cluster) { c.disconnect("voter-0", true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, b)
			h := c.join("holder", promotable)
			for i := range 4 {
				c.join(fmt.Sprintf("voter-%d", i), voter)
			}
			g := c.grantTo("holder")
			for range 6 {
				c.pingRound("holder", g.Token, nil)
				require.NoError(t, c.heartbeat("holder", chain.Position{}))
				c.advance(authority.PingEvery)
			}
			require.NoError(t, h.Admit(c.now))
			// voter-0 and voter-1 are cut off from everyone: the holder
			// misses them, and their concerns reach nobody. What the
			// holder sends is lost (its challenge gets no answer); what
			// the controller sends reaches it.
			c.nodes["voter-0"].partitioned = true
			c.nodes["voter-1"].partitioned = true
			c.nodes["holder"].mute = true
			fencedAt := c.runPartition("holder", g.Token, nil, h, 10*time.Second)
			require.False(t, fencedAt.IsZero(), "the holder never fenced itself")
			require.True(t, h.Fenced())
			require.Equal(t, authority.Granted, c.state().Phase, "the grant stands: only the holder's own fence acts")
			before := h.Topology()

			c.advance(authority.SelfFenceWait)
			tc.change(c)
			require.Greater(t, h.Topology(), before, "the holder learned the new topology")
			// It stays fenced through the new decision, whether or not the
			// new topology still makes it suspect: no confirmation came.
			for i := range 40 {
				if i%20 == 0 {
					c.pingRound("holder", g.Token, nil)
				}
				c.advance(50 * time.Millisecond)
				require.ErrorIs(t, h.Admit(c.now), authority.ErrNotAdmitted, "%v after the topology change", time.Duration(i+1)*50*time.Millisecond)
				require.True(t, h.Fenced())
			}
			require.True(t, c.now.Before(h.Grant().Deadline), "its deadline is still ahead: only the fence keeps it closed")
			// A confirmation of the topology it fenced under reopens
			// nothing.
			stale := h.Grant()
			stale.Deadline = stale.Deadline.Add(time.Second)
			require.NoError(t, h.Step(authority.GrantMsg{To: "holder", Token: g.Token, Topology: before, Grant: stale}))
			require.NoError(t, h.Step(authority.Tick{Now: c.now}))
			require.ErrorIs(t, h.Admit(c.now), authority.ErrNotAdmitted, "a confirmation of the old topology reopened admission")
			// Heard again: its next challenge (it asks at the heartbeat's
			// pace while fenced) is confirmed under the current topology,
			// and writes resume under the same token.
			c.nodes["holder"].mute = false
			heard := c.now
			for i := 0; h.Admit(c.now) != nil && i < 40; i++ {
				c.advance(50 * time.Millisecond)
			}
			require.NoError(t, h.Admit(c.now), "the confirmation for the current topology restores writes")
			require.LessOrEqual(t, c.now.Sub(heard), authority.PingEvery+50*time.Millisecond, "reopened within a ping period of being heard")
			require.False(t, h.Fenced())
			require.Equal(t, g.Token, h.Grant().Token, "no new token")
		})
	}
}
