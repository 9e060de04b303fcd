package authority_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

func resumed(t *testing.T) (*authority.Runtime, authority.Grant) {
	t.Helper()
	g := authority.Grant{Domain: "orders", Holder: "node-a", Token: 3, Deadline: t0.Add(time.Hour), Revision: 7}
	rt, err := authority.Resume(authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: bothCaps}, g, t0)
	require.NoError(t, err)
	return rt, g
}

// Ready hands the same work out until Advance acknowledges it, and
// Advance acknowledges only what the Ready it is given held: what came
// after that Ready stays.
func TestRuntimeReadyUntilAdvance(t *testing.T) {
	rt, g := resumed(t)
	rd := rt.Ready()
	require.NotNil(t, rd.State, "the resumed grant is news to the host")
	require.Equal(t, g, rd.State.Grant)
	require.Equal(t, int64(7), rd.State.Revision)
	rt.Advance(rd)
	require.False(t, rt.HasReady())
	require.Equal(t, authority.RuntimeReady{}, rt.Ready())

	now := authority.HeartbeatNowMsg{To: "node-a", Token: 3}
	require.NoError(t, rt.Step(now))
	first := rt.Ready()
	require.Len(t, first.Events, 1)
	require.Equal(t, first, rt.Ready(), "Ready cleared what it handed out")
	require.True(t, rt.HasReady())

	require.NoError(t, rt.Step(now))
	rt.Advance(first)
	rest := rt.Ready()
	require.Len(t, rest.Events, 1, "the heartbeat asked for after the Ready was acknowledged with it")
	rt.Advance(rest)
	require.False(t, rt.HasReady())
}

// A heartbeat is handed out only when one is due and a grant is held,
// with the progress the host reported.
func TestRuntimeHeartbeatDue(t *testing.T) {
	idle, err := authority.NewRuntime(authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: bothCaps}, t0)
	require.NoError(t, err)
	require.NoError(t, idle.Step(authority.HeartbeatDue{Progress: chain.Position{Epoch: 1, Slot: 2}}))
	require.Nil(t, idle.Ready().Heartbeat, "a node holding nothing heartbeats")

	rt, _ := resumed(t)
	rt.Advance(rt.Ready())
	require.NoError(t, rt.Step(authority.HeartbeatDue{Progress: chain.Position{Epoch: 1, Slot: 2}}))
	rd := rt.Ready()
	require.Equal(t, &authority.Heartbeat{Node: "node-a", Token: 3, Progress: chain.Position{Epoch: 1, Slot: 2}}, rd.Heartbeat)
	require.Empty(t, rd.Events, "the periodic heartbeat is not an event to retry")
	rt.Advance(rd)
	require.Nil(t, rt.Ready().Heartbeat)
}

// A release is handed out once, its completion is reported as Released
// under the grant held, and the admission state it changes comes with it.
func TestRuntimeReleaseThroughReady(t *testing.T) {
	rt, _ := resumed(t)
	rt.Advance(rt.Ready())
	require.NoError(t, rt.Step(authority.ReleaseMsg{To: "node-a", Token: 3}))
	rd := rt.Ready()
	require.True(t, rd.Release)
	require.NotNil(t, rd.State)
	require.True(t, rd.State.Draining)
	require.ErrorIs(t, rt.Admit(t0), authority.ErrNotAdmitted)
	rt.Advance(rd)
	require.False(t, rt.Ready().Release, "the release was handed out twice")

	require.NoError(t, rt.Step(authority.ReleaseDone{Progress: chain.Position{Epoch: 1, Slot: 9}}))
	rd = rt.Ready()
	require.Equal(t, []authority.Event{authority.Released{Node: "node-a", Token: 3, Progress: chain.Position{Epoch: 1, Slot: 9}}}, rd.Events)
}

// A recovery placement is handed out, and again at each tick until the
// host's frontier reaches it; the frontier that does is reported.
func TestRuntimeRecoverUntilReached(t *testing.T) {
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "node-b", Domain: "orders", Caps: bothCaps}, t0)
	require.NoError(t, err)
	req := authority.Required{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 7}}
	require.NoError(t, rt.Step(authority.RecoverMsg{To: "node-b", Token: 3, Required: req, Grant: authority.Grant{Holder: "node-b", Revision: 11}}))
	rd := rt.Ready()
	require.NotNil(t, rd.Recover)
	require.Equal(t, int64(11), rd.State.Revision, "the recovery's writes are guarded with its revision")
	rt.Advance(rd)
	require.Nil(t, rt.Ready().Recover)
	require.NoError(t, rt.Step(authority.FrontierReport{Star: "node-a", Pos: chain.Position{Epoch: 2, Slot: 3}, Usable: true}))
	require.NoError(t, rt.Step(authority.Tick{Now: t0.Add(time.Second)}))
	require.NotNil(t, rt.Ready().Recover, "a recovery stopped short is asked again at the next tick")
	require.Empty(t, rt.Ready().Events)
	require.NoError(t, rt.Step(authority.FrontierReport{Star: "node-a", Pos: req.Pos, Usable: true}))
	rd = rt.Ready()
	require.Nil(t, rd.Recover)
	require.Equal(t, []authority.Event{authority.Recovered{Node: "node-b", Token: 3, Star: "node-a", Frontier: req.Pos}}, rd.Events)
}

// An input the runtime does not know is refused.
func TestRuntimeRefusesUnknownInput(t *testing.T) {
	rt, _ := resumed(t)
	require.ErrorIs(t, rt.Step(nil), authority.ErrRefused)
}
