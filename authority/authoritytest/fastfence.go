package authoritytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

// pingRound runs one round of direct health pings between the holder and
// every other connected node: a link is up unless down says otherwise,
// and a partitioned node reaches nobody.
func (c *cluster) pingRound(holder string, token authority.Token, down func(a, b string) bool) {
	for _, name := range c.names() {
		nd := c.nodes[name]
		if name == holder || !nd.connected || nd.caps.Zero() {
			continue
		}
		h := c.nodes[holder]
		ok := !h.partitioned && !nd.partitioned && (down == nil || !down(holder, name))
		h.rt.Step(authority.PingResult{Peer: name, Token: token, OK: ok, Now: c.now})
		nd.rt.Step(authority.PingResult{Peer: holder, Token: token, OK: ok, Now: c.now})
	}
}

// The fast-fence arithmetic: C is the holder plus the connected voters, R
// the matching reports from connected voters, H 1 when the challenged
// holder did not heartbeat within ChallengeWait; the grant ends only when
// 2(R+H) > C.
func fastFenceArithmetic(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name       string
		voters     int // besides the holder
		nonvoters  int
		zero       int // zero-capability sessions
		reporters  int // voters reporting
		nonvoterRp bool
		heartbeat  bool // the holder answers the challenge
		ends       bool
	}{
		{"C=3 one report, holder silent", 2, 0, 0, 1, false, false, true},         // 2(1+1)=4 > 3
		{"C=3 one report, holder answers", 2, 0, 0, 1, false, true, false},        // 2(1+0)=2
		{"C=3 two reports, holder answers", 2, 0, 0, 2, false, true, true},        // 2(2+0)=4 > 3
		{"C=5 one report, holder silent", 4, 0, 0, 1, false, false, false},        // 2(1+1)=4
		{"C=5 two reports, holder silent", 4, 0, 0, 2, false, false, true},        // 6 > 5
		{"C=5 two reports, holder answers", 4, 0, 0, 2, false, true, false},       // 4
		{"C=2 one report, holder answers", 1, 0, 0, 1, false, true, false},        // 2 = 2
		{"C=2 one report, holder silent", 1, 0, 0, 1, false, false, true},         // 4 > 2
		{"nonvoters never count", 2, 3, 0, 0, true, false, false},                 // no incident at all
		{"zero-capability sessions are not in C", 2, 0, 5, 1, false, false, true}, // C stays 3
		{"C=7 three reports, holder silent", 6, 2, 2, 3, true, false, true},       // 2(3+1)=8 > 7
		{"C=7 two reports, holder silent", 6, 2, 2, 2, true, false, false},        // 6
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, b)
			c.join("holder", promotable)
			var voters, nonvoters []string
			for i := range tc.voters {
				n := fmt.Sprintf("voter-%d", i)
				c.join(n, voter)
				voters = append(voters, n)
			}
			for i := range tc.nonvoters {
				n := fmt.Sprintf("observer-%d", i)
				c.join(n, authority.Capabilities{Storage: true})
				nonvoters = append(nonvoters, n)
			}
			for i := range tc.zero {
				c.join(fmt.Sprintf("ghost-%d", i), authority.Capabilities{})
			}
			g := c.grantTo("holder")
			require.NoError(t, c.heartbeat("holder", chain.Position{}))
			if !tc.heartbeat {
				// The holder does not answer the challenge: its channel
				// looks open but nothing gets through.
				c.nodes["holder"].partitioned = true
			}
			concern := func(n string) error {
				return c.ctl.Step(authority.Concern{Node: n, Token: g.Token, Topology: c.topology(), RoundTrip: true})
			}
			for _, n := range voters[:tc.reporters] {
				require.NoError(t, concern(n))
			}
			if tc.nonvoterRp {
				for _, n := range nonvoters {
					require.NoError(t, c.ctl.Step(authority.Advisory{Node: n, Token: g.Token}))
					_ = concern(n) // a nonvoter's concern is an advisory
				}
			}
			c.run()
			c.advance(authority.ChallengeWait)
			// The reporters retry after the challenge.
			for _, n := range voters[:tc.reporters] {
				_ = concern(n)
			}
			c.run()
			st := c.state()
			if tc.ends {
				require.Equal(t, authority.Vacant, st.Phase, "the fast fence should end the grant")
				require.Contains(t, st.Ended, "fast fence")
				// Confirmed: a later heartbeat or ping cannot revive it.
				require.Error(t, c.heartbeat("holder", chain.Position{}))
				require.Equal(t, authority.Vacant, c.state().Phase)
				return
			}
			require.Equal(t, authority.Granted, st.Phase, "the grant should stand")
			require.Equal(t, g.Token, st.Token)
		})
	}
}

// topology is the controller's current topology version, as the last
// topology message to any node said.
func (c *cluster) topology() uint64 {
	var v uint64
	for _, nd := range c.nodes {
		if t := nd.rt.Topology(); t > v {
			v = t
		}
	}
	return v
}

// A partitioned holder keeps its lease deadline but loses the majority:
// it stops admitting within SelfFenceWait of its suspicion; the voters'
// concerns end its grant on the fast path; the successor admits only
// after its grant, which waits for the old deadline.
func partitionedHolder(t *testing.T, b Backend) {
	c, h, nb, g := healthyHolder(t, b)
	deadline := h.Grant().Deadline
	c.nodes["holder"].partitioned = true
	start := c.now
	var endedAt time.Time
	fencedAt := c.runPartition("holder", g.Token, nil, h, 10*time.Second, func() {
		if endedAt.IsZero() && c.state().Phase != authority.Granted {
			endedAt = c.now
		}
		require.ErrorIs(t, nb.Admit(c.now), authority.ErrNotAdmitted, "the successor admits nothing before its grant")
	})
	require.False(t, fencedAt.IsZero(), "the holder never fenced itself")
	for i := 0; endedAt.IsZero() && i < 100; i++ {
		c.advance(50 * time.Millisecond)
		if c.state().Phase != authority.Granted {
			endedAt = c.now
		}
	}
	require.False(t, endedAt.IsZero(), "the fast fence never ended the grant")
	require.True(t, fencedAt.Before(deadline), "fenced at %v, before its deadline %v", fencedAt, deadline)
	require.True(t, endedAt.Before(deadline), "the fast fence ended the grant before the heartbeat timeout")
	// voter-0 offers; the next token waits for the holder's self-fence,
	// not for its lease deadline.
	nb.Step(authority.FrontierReport{Star: "holder", Pos: chain.Position{Epoch: 1, Slot: 4}, Usable: true})
	for i := 0; nb.Grant().Token == 0 && i < 200; i++ {
		require.ErrorIs(t, nb.Admit(c.now), authority.ErrNotAdmitted, "the successor admits nothing before its grant")
		c.advance(50 * time.Millisecond)
	}
	grantedAt := c.now
	require.Equal(t, g.Token+1, nb.Grant().Token)
	require.False(t, grantedAt.Before(fencedAt), "the next token (at %v) came before the holder fenced itself (at %v)", grantedAt.Sub(start), fencedAt.Sub(start))
	require.True(t, grantedAt.Before(deadline), "the fast fence, not the lease deadline, decided the failover")
	require.NoError(t, nb.Admit(c.now))
	require.ErrorIs(t, h.Admit(c.now), authority.ErrNotAdmitted)
	t.Logf("failover on the fake clock: partitioned at 0, holder self-fenced at %v, grant ended at %v, next token at %v (the old deadline was at %v)",
		fencedAt.Sub(start), endedAt.Sub(start), grantedAt.Sub(start), deadline.Sub(start))
}

// runPartition advances the clock in 50 ms steps for up to d, pinging
// every PingEvery, until h stops admitting; it returns when (zero if
// never). each, when set, runs at every step.
func (c *cluster) runPartition(holder string, token authority.Token, down func(a, b string) bool, h *authority.Runtime, d time.Duration, each ...func()) time.Time {
	const step = 50 * time.Millisecond
	nextPing := c.now
	for end := c.now.Add(d); c.now.Before(end); {
		if !c.now.Before(nextPing) {
			c.pingRound(holder, token, down)
			nextPing = c.now.Add(authority.PingEvery)
		}
		c.advance(step)
		for _, f := range each {
			f()
		}
		if h.Admit(c.now) != nil {
			return c.now
		}
	}
	return time.Time{}
}

// crashedHolderConfirmedLate: the holder crashes (its channel closes);
// the reservation runs out and the grant ends, but the next token would
// wait for the holder's lease deadline. The voters' direct health then
// confirms it unhealthy after the fact: the next token waits only for
// the self-fence.
func crashedHolderConfirmedLate(t *testing.T, b Backend) {
	c, h, nb, g := healthyHolder(t, b)
	deadline := h.Grant().Deadline
	start := c.now
	c.disconnect("holder", true) // the crash
	c.nodes["holder"].partitioned = true
	nb.Step(authority.FrontierReport{Star: "holder", Pos: chain.Position{Epoch: 1, Slot: 4}, Usable: true})
	var endedAt time.Time
	nextPing := c.now
	for i := 0; nb.Grant().Token == 0 && i < 400; i++ {
		if !c.now.Before(nextPing) {
			c.pingRound("holder", g.Token, nil)
			nextPing = c.now.Add(authority.PingEvery)
		}
		c.advance(50 * time.Millisecond)
		if endedAt.IsZero() && c.state().Phase != authority.Granted {
			endedAt = c.now
		}
	}
	require.Equal(t, g.Token+1, nb.Grant().Token)
	grantedAt := c.now
	require.True(t, grantedAt.Before(deadline), "the next token came at %v, not before the old deadline %v", grantedAt.Sub(start), deadline.Sub(start))
	t.Logf("crash: grant ended at %v (reservation), next token at %v after the voters confirmed, the old deadline was at %v",
		endedAt.Sub(start), grantedAt.Sub(start), deadline.Sub(start))
}
