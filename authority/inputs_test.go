package authority_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A controller does not start from a durable state no controller writes:
// each is a *StateError naming what is wrong.
func TestNewControllerRefusesCorruptState(t *testing.T) {
	cfg := authority.ControllerConfig{Domain: "orders"}
	req := authority.Required{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 7}}
	for _, tc := range []struct {
		name string
		st   authority.StateRecord
		ok   bool
	}{
		{"never written", authority.StateRecord{}, true},
		{"vacant", authority.StateRecord{Phase: authority.Vacant, Token: 3, Required: req}, true},
		{"granted", authority.StateRecord{Phase: authority.Granted, Holder: "node-a", Token: 3}, true},
		{"recovering the first grant", authority.StateRecord{Phase: authority.Recovering, Candidate: "node-b"}, true},
		{"handoff", authority.StateRecord{Phase: authority.Handoff, Holder: "node-a", Target: "node-b", Token: 3}, true},

		{"an unknown phase", authority.StateRecord{Phase: "elected", Token: 3}, false},
		{"a phase in another case", authority.StateRecord{Phase: "Granted", Holder: "node-a", Token: 3}, false},
		{"granted without a holder", authority.StateRecord{Phase: authority.Granted, Token: 3}, false},
		{"granted without a token", authority.StateRecord{Phase: authority.Granted, Holder: "node-a"}, false},
		{"granted with a candidate", authority.StateRecord{Phase: authority.Granted, Holder: "node-a", Token: 3, Candidate: "node-b"}, false},
		{"granted with a target", authority.StateRecord{Phase: authority.Granted, Holder: "node-a", Token: 3, Target: "node-b"}, false},
		{"a holder that is no name", authority.StateRecord{Phase: authority.Granted, Holder: "../a", Token: 3}, false},
		{"handoff without a target", authority.StateRecord{Phase: authority.Handoff, Holder: "node-a", Token: 3}, false},
		{"handoff to the holder", authority.StateRecord{Phase: authority.Handoff, Holder: "node-a", Target: "node-a", Token: 3}, false},
		{"recovering without a candidate", authority.StateRecord{Phase: authority.Recovering, Token: 3}, false},
		{"recovering with a holder", authority.StateRecord{Phase: authority.Recovering, Candidate: "node-b", Holder: "node-a", Token: 3}, false},
		{"vacant with a holder", authority.StateRecord{Phase: authority.Vacant, Holder: "node-a", Token: 3}, false},
		{"vacant with a candidate", authority.StateRecord{Phase: authority.Vacant, Candidate: "node-b", Token: 3}, false},
		{"a token with no successor", authority.StateRecord{Phase: authority.Vacant, Token: ^authority.Token(0)}, false},
		{"a required position on no star", authority.StateRecord{Phase: authority.Vacant, Token: 3, Required: authority.Required{Pos: chain.Position{Epoch: 1}}}, false},
		{"a required star that is no name", authority.StateRecord{Phase: authority.Vacant, Token: 3, Required: authority.Required{Star: "a/b"}}, false},
	} {
		ctl, err := authority.NewController(cfg, tc.st, t0)
		if tc.ok {
			require.NoError(t, err, tc.name)
			require.NotNil(t, ctl, tc.name)
			continue
		}
		require.ErrorIs(t, err, authority.ErrBadState, tc.name)
		se, ok := errors.AsType[*authority.StateError](err)
		require.True(t, ok, "%s: %v", tc.name, err)
		require.Equal(t, "orders", se.Domain, tc.name)
		require.NotEmpty(t, se.Reason, tc.name)
		require.Nil(t, ctl, tc.name)
	}
	// Another domain's state is a configuration mistake, named as such.
	_, err := authority.NewController(cfg, authority.StateRecord{Domain: "billing"}, t0)
	require.ErrorIs(t, err, cutline.ErrInvalid)
}

// A nil event is refused as an invalid argument, and changes nothing.
func TestStepNil(t *testing.T) {
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, authority.StateRecord{}, t0)
	require.NoError(t, err)
	before := ctl.State()
	err = ctl.Step(nil)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	ce, ok := errors.AsType[*cutline.ConfigError](err)
	require.True(t, ok)
	require.Equal(t, "event", ce.Field)
	require.Equal(t, before, ctl.State())
	require.Equal(t, authority.Ready{}, ctl.Ready(), "nothing to persist or send")
}

// A Connect claiming a token the controller never issued is refused, and
// the node is not connected: it sees no topology, gets no grant and
// cannot offer.
func TestConnectClaimingATokenNeverIssued(t *testing.T) {
	caps := authority.Capabilities{Vote: true, Promotable: true}
	for _, st := range []authority.StateRecord{
		{Phase: authority.Granted, Holder: "node-a", Token: 12},
		{Phase: authority.Vacant, Token: 12, Required: authority.Required{Star: "node-a"}},
		{},
	} {
		ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, st, t0)
		require.NoError(t, err)
		for _, node := range []string{"node-a", "node-b"} {
			err = ctl.Step(authority.Connect{Node: node, Caps: caps, Token: st.Token + 1})
			require.ErrorIs(t, err, authority.ErrRefused, "%s claims %d in %s", node, st.Token+1, st)
			re, ok := errors.AsType[*authority.RefusedError](err)
			require.True(t, ok)
			require.Equal(t, "connect", re.Event)
			require.Contains(t, re.Reason, "never issued")
			require.Empty(t, ctl.Ready().Msgs, "a refused connect sends nothing")
		}
		require.ErrorIs(t, ctl.Step(authority.Offer{Node: "node-b", Token: st.Token, Usable: true}), authority.ErrRefused, "not connected")
	}
}

// Timings out of range are refused, each naming its field.
func TestControllerConfigRefused(t *testing.T) {
	for field, cfg := range map[string]authority.ControllerConfig{
		"Lease":           {Domain: "orders", Lease: 2 * time.Hour},
		"Reconnect":       {Domain: "orders", Lease: time.Second, Reconnect: 2 * time.Second},
		"RecoveryTimeout": {Domain: "orders", RecoveryTimeout: -time.Second},
	} {
		_, err := authority.NewController(cfg, authority.StateRecord{}, t0)
		require.ErrorIs(t, err, cutline.ErrInvalid, field)
		ce, ok := errors.AsType[*cutline.ConfigError](err)
		require.True(t, ok, field)
		require.Equal(t, field, ce.Field)
	}
	_, err := authority.NewController(authority.ControllerConfig{Domain: "orders", RecoveryTimeout: 2 * time.Hour}, authority.StateRecord{}, t0)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	// A lease shorter than DefaultReconnect shortens the default: a field
	// the host never set is never refused.
	_, err = authority.NewController(authority.ControllerConfig{Domain: "orders", Lease: 500 * time.Millisecond}, authority.StateRecord{}, t0)
	require.NoError(t, err)
}

// A new controller's topology versions start above its predecessor's
// (the term is in their high bits): a node takes its first topology,
// rather than refusing it as older than the last one it saw.
func TestTopologyAcrossControllers(t *testing.T) {
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: bothCaps}, t0)
	require.NoError(t, err)
	deliver := func(ctl *authority.Controller) uint64 {
		t.Helper()
		var last uint64
		for _, m := range ctl.Ready().Msgs {
			if m.Recipient() == "node-a" && m.Kind() == authority.MsgTopology {
				require.NoError(t, rt.Step(m))
				last = m.(authority.TopologyMsg).Topology
			}
		}
		return last
	}
	old, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, authority.StateRecord{Term: 1}, t0)
	require.NoError(t, err)
	require.NoError(t, old.Step(authority.Connect{Node: "node-a", Caps: bothCaps}))
	for i := range 5 { // voters come and go: the version grows
		n := fmt.Sprintf("voter-%d", i)
		require.NoError(t, old.Step(authority.Connect{Node: n, Caps: bothCaps}))
		require.NoError(t, old.Step(authority.Disconnect{Node: n}))
	}
	before := deliver(old)
	require.Equal(t, before, rt.Topology())

	next, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, authority.StateRecord{Term: 2}, t0)
	require.NoError(t, err)
	require.NoError(t, next.Step(authority.Connect{Node: "node-a", Caps: bothCaps}))
	after := deliver(next)
	require.Greater(t, after, before)
	require.Equal(t, after, rt.Topology(), "the new controller's topology was refused as older")
}
