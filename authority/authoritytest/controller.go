package authoritytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

var (
	promotable = authority.Capabilities{Vote: true, Storage: true, Promotable: true}
	voter      = authority.Capabilities{Vote: true}
)

// Tokens grow strictly, across grants and across controllers; a deposed
// controller writes nothing, and a racing write from a stale read loses.
func tokenMonotonicAcrossControllers(t *testing.T, b Backend) {
	c := newCluster(t, b)
	a := c.join("node-a", promotable)
	nb := c.join("node-b", promotable)
	g1 := c.grantTo("node-a")
	require.Equal(t, authority.Token(1), g1.Token)
	oldEl, oldCtl := c.el, c.ctl
	// ctl-1's session ends: ctl-2 is elected and loads the state with the
	// next term.
	c.expire()
	c.elect("ctl-2")
	st := c.state()
	require.Equal(t, uint64(2), st.Term)
	require.Equal(t, authority.Granted, st.Phase)
	// The deposed controller tries to end the grant: refused.
	vacant := oldCtl.State()
	vacant.Phase, vacant.Holder = authority.Vacant, ""
	_, err := oldEl.Save(c.ctx, oldCtl.State(), vacant)
	require.ErrorIs(t, err, authority.ErrDeposed)
	// A write from a stale read of the state loses too, under the live
	// election.
	stale := st
	stale.Revision--
	_, err = c.el.Save(c.ctx, stale, vacant)
	require.ErrorIs(t, err, authority.ErrDeposed)
	require.Equal(t, st.Revision, c.state().Revision, "nothing was written")
	// node-a goes silent: ctl-2 assumed a fresh deadline at its election;
	// past it the grant ends and node-b gets a greater token.
	c.disconnect("node-a", true)
	c.advance(11 * time.Second)
	require.Equal(t, authority.Vacant, c.state().Phase)
	g2 := c.grantTo("node-b")
	require.Equal(t, authority.Token(2), g2.Token)
	require.NoError(t, nb.Admit(c.now))
	// node-a's late grant message from ctl-1 cannot bring it back.
	c.connect("node-a")
	require.Error(t, a.Step(authority.GrantMsg{To: "node-a", Token: 1,
		Grant: authority.Grant{Domain: domain, Holder: "node-a", Token: 1, Deadline: c.now.Add(time.Hour)}}))
	require.ErrorIs(t, a.Admit(c.now), authority.ErrNotAdmitted)
}

// Two controllers campaign at once: one is elected; the other waits until
// the first resigns.
func racingCampaigns(t *testing.T, b Backend) {
	c := newCluster(t, b)
	sess, err := c.store.NewSession(c.ctx, time.Minute)
	require.NoError(t, err)
	defer sess.Close(c.ctx)
	// While ctl-1 leads, a campaign waits: bounded here, it ends with its
	// context, unelected.
	ctx, cancel := context.WithTimeout(c.ctx, 100*time.Millisecond)
	defer cancel()
	_, err = authority.Campaign(ctx, c.store, "", domain, "ctl-2", sess)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second controller was elected while the first leads")
	require.NoError(t, c.el.Resign(c.ctx))
	el, err := authority.Campaign(c.ctx, c.store, "", domain, "ctl-2", sess)
	require.NoError(t, err)
	st, err := el.Load(c.ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), st.Term)
	_, err = c.el.Save(c.ctx, st, st)
	require.ErrorIs(t, err, authority.ErrDeposed, "the resigned controller writes nothing")
}

// Planned handoff: one durable transition changes holder and token; no
// state without a holder is ever written; the old holder stays fenced.
func plannedHandoff(t *testing.T, b Backend) {
	c := newCluster(t, b)
	a := c.join("node-a", promotable)
	nb := c.join("node-b", promotable)
	c.join("voter-v", voter)
	c.grantTo("node-a")
	written := c.watchStates()
	require.ErrorIs(t, c.event(authority.HandoffRequest{Target: "voter-v"}), authority.ErrRefused, "not promotable")
	require.ErrorIs(t, c.event(authority.HandoffRequest{Target: "node-a"}), authority.ErrRefused, "already the holder")
	require.NoError(t, c.event(authority.HandoffRequest{Target: "node-b"}))
	require.Equal(t, authority.Handoff, c.state().Phase)
	require.True(t, c.release["node-a"], "the holder is asked to drain and release")
	require.ErrorIs(t, a.Admit(c.now), authority.ErrNotAdmitted, "draining: admission closed")
	require.ErrorIs(t, nb.Admit(c.now), authority.ErrNotAdmitted, "the target waits for its grant")
	a.Step(authority.ReleaseDone{Progress: chain.Position{Epoch: 1, Slot: 12}})
	c.run()
	st := c.state()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-b", st.Holder)
	require.Equal(t, authority.Token(2), st.Token)
	require.NoError(t, nb.Admit(c.now))
	require.ErrorIs(t, a.Admit(c.now), authority.ErrNotAdmitted)
	states := written()
	require.GreaterOrEqual(t, len(states), 2, "the reservation and the transition were written")
	for _, s := range states {
		require.NotEqual(t, authority.Vacant, s.Phase, "a state without a holder was written during the handoff: %s", s)
	}
}

// A handoff whose controller dies between the holder's drain and the
// durable transition: the next controller finds the handoff, asks again,
// and completes it.
func handoffCrashBeforeTransition(t *testing.T, b Backend) {
	c := newCluster(t, b)
	a := c.join("node-a", promotable)
	nb := c.join("node-b", promotable)
	c.grantTo("node-a")
	require.NoError(t, c.event(authority.HandoffRequest{Target: "node-b"}))
	// The holder drained and released; the controller dies before it
	// persisted the transition.
	a.Step(authority.ReleaseDone{Progress: chain.Position{Epoch: 1, Slot: 4}})
	a.Advance(a.Ready()) // the report was lost with the controller
	c.expire()
	c.release = map[string]bool{}
	c.elect("ctl-2")
	st := c.state()
	require.Equal(t, authority.Handoff, st.Phase, "the handoff is durable")
	require.True(t, c.release["node-a"], "the new controller asks the holder again")
	a.Step(authority.ReleaseDone{Progress: chain.Position{Epoch: 1, Slot: 4}})
	c.run()
	st = c.state()
	require.Equal(t, "node-b", st.Holder)
	require.Equal(t, authority.Token(2), st.Token)
	require.NoError(t, nb.Admit(c.now))
	require.ErrorIs(t, a.Admit(c.now), authority.ErrNotAdmitted)
}

// Process takeover keeps the grant only while identity, token and the
// absolute deadline validate.
func processTakeover(t *testing.T, b Backend) {
	c := newCluster(t, b)
	a := c.join("node-a", promotable)
	g := c.grantTo("node-a")
	cfg := authority.RuntimeConfig{Node: "node-a", Domain: domain, Caps: promotable}
	for _, tc := range []struct {
		name string
		cfg  authority.RuntimeConfig
		g    authority.Grant
		at   time.Time
		ok   bool
	}{
		{"valid", cfg, g, c.now, true},
		{"expired deadline", cfg, g, g.Deadline, false},
		{"another identity", authority.RuntimeConfig{Node: "node-b", Domain: domain}, g, c.now, false},
		{"another domain", authority.RuntimeConfig{Node: "node-a", Domain: "other"}, g, c.now, false},
		{"no token", cfg, authority.Grant{Domain: domain, Holder: "node-a", Deadline: g.Deadline}, c.now, false},
	} {
		rt, err := authority.Resume(tc.cfg, tc.g, tc.at)
		if !tc.ok {
			require.ErrorIs(t, err, authority.ErrNotAdmitted, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.NoError(t, rt.Admit(tc.at), tc.name)
	}
	// The new process connects with the grant's token: the controller
	// keeps the grant; no new holder is selected.
	rt, err := authority.Resume(cfg, g, c.now)
	require.NoError(t, err)
	c.nodes["node-a"].rt = rt
	c.disconnect("node-a", true)
	c.connect("node-a")
	st := c.state()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, g.Token, st.Token)
	require.NoError(t, c.heartbeat("node-a", chain.Position{}))
	_ = a
}

// Zero-capability sessions are invisible; a message meant for another
// node, or a grant naming another holder, is refused by a runtime.
func capabilitiesAndMisaddressed(t *testing.T, b Backend) {
	c := newCluster(t, b)
	c.join("node-a", promotable)
	ghost := c.join("ghost", authority.Capabilities{})
	c.grantTo("node-a")
	c.disconnect("node-a", false)
	require.ErrorIs(t, c.event(authority.Offer{Node: "ghost", Token: 1, Usable: true}), authority.ErrRefused, "a zero-capability node is not in the topology")
	for _, m := range []authority.Msg{
		authority.GrantMsg{To: "node-a", Token: 9, Grant: authority.Grant{Domain: domain, Holder: "node-a", Token: 9}},
		authority.GrantMsg{To: "ghost", Token: 9, Grant: authority.Grant{Domain: domain, Holder: "node-a", Token: 9}},
		authority.GrantMsg{To: "ghost", Token: 9, Grant: authority.Grant{Domain: "other", Holder: "ghost", Token: 9}},
		authority.GrantMsg{To: "ghost", Token: 8, Grant: authority.Grant{Domain: domain, Holder: "ghost", Token: 9}},
		authority.ReleaseMsg{To: "ghost", Token: 9},
	} {
		require.ErrorIs(t, ghost.Step(m), authority.ErrRefused, "%+v", m)
	}
	require.ErrorIs(t, ghost.Admit(c.now), authority.ErrNotAdmitted)
}
