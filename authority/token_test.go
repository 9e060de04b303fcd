package authority_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// bigToken has decimal prefixes and low bits that are tokens too: a
// comparison by prefix or of truncated integers would take one of its
// variants for it.
const bigToken = authority.Token(1<<32 | 12) // 4294967308

// variants are bigToken presented truncated or extended: a decimal
// prefix, a decimal extension, its low 32 bits, and high bits added.
func variants(tok authority.Token) map[string]authority.Token {
	return map[string]authority.Token{
		fmt.Sprintf("decimal prefix %d", tok/10):      tok / 10,
		fmt.Sprintf("decimal extension %d", tok*10+8): tok*10 + 8,
		fmt.Sprintf("low bits %d", tok&0xffffffff):    tok & 0xffffffff,
		fmt.Sprintf("high bits %d", tok|1<<40):        tok | 1<<40,
	}
}

var bothCaps = authority.Capabilities{Vote: true, Promotable: true}

// controllerAt returns a controller started from st with node-a, node-b
// and two voters connected (node-a with the token it holds).
func controllerAt(t *testing.T, st authority.StateRecord) *authority.Controller {
	t.Helper()
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, st, t0)
	require.NoError(t, err)
	tok := authority.Token(0)
	if st.Holder == "node-a" {
		tok = st.Token
	}
	require.NoError(t, ctl.Step(authority.Connect{Node: "node-a", Caps: bothCaps, Token: tok}))
	for _, n := range []string{"node-b", "voter-0", "voter-1"} {
		require.NoError(t, ctl.Step(authority.Connect{Node: n, Caps: bothCaps}))
	}
	_ = ctl.Ready()
	return ctl
}

// topologyOf returns the topology version the controller last sent.
func topologyOf(t *testing.T, ctl *authority.Controller) uint64 {
	t.Helper()
	require.NoError(t, ctl.Step(authority.Connect{Node: "voter-0", Caps: bothCaps}))
	for _, m := range ctl.Ready().Msgs {
		if m.Kind() == authority.MsgTopology {
			return m.(authority.TopologyMsg).Topology
		}
	}
	t.Fatal("no topology sent")
	return 0
}

// Wherever the controller compares a token, a truncated or extended form
// of the current one is not it: no resumed grant, no renewal, no
// release, no offer or recovery, no fast-fence report, challenge or
// advisory, and a cleared concern under it clears nothing.
func TestControllerTokenTruncatedOrExtended(t *testing.T) {
	granted := authority.StateRecord{Phase: authority.Granted, Holder: "node-a", Token: bigToken}
	vacant := authority.StateRecord{Phase: authority.Vacant, Token: bigToken, Required: authority.Required{Star: "node-a"}}
	recovering := authority.StateRecord{Phase: authority.Recovering, Candidate: "node-b", Token: bigToken, Required: authority.Required{Star: "node-a"}}
	handoff := authority.StateRecord{Phase: authority.Handoff, Holder: "node-a", Target: "node-b", Token: bigToken}
	for name, v := range variants(bigToken) {
		t.Run(name, func(t *testing.T) {
			// The holder reconnecting under v does not resume the grant.
			ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, granted, t0)
			require.NoError(t, err)
			err = ctl.Step(authority.Connect{Node: "node-a", Caps: bothCaps, Token: v})
			if v > bigToken {
				require.ErrorIs(t, err, authority.ErrRefused, "a token never issued")
			} else {
				require.NoError(t, err)
			}
			for _, m := range ctl.Ready().Msgs {
				require.NotEqual(t, authority.MsgGrant, m.Kind(), "the grant was resumed under %d", v)
				if m.Kind() == authority.MsgRevoke {
					require.Equal(t, v, m.(authority.RevokeMsg).Token, "the revocation names the token presented")
				}
			}

			ctl = controllerAt(t, granted)
			deadline := ctl.Deadline()
			tp := topologyOf(t, ctl)
			for _, ev := range []authority.Event{
				authority.Heartbeat{Node: "node-a", Token: v},
				authority.Challenge{Node: "node-a", Token: v, Topology: tp},
				authority.Concern{Node: "voter-0", Token: v, Topology: tp, RoundTrip: true},
				authority.Advisory{Node: "voter-0", Token: v},
			} {
				require.ErrorIs(t, ctl.Step(ev), authority.ErrRefused, "%T", ev)
				for _, m := range ctl.Ready().Msgs {
					require.NotEqual(t, authority.MsgGrant, m.Kind(), "%T under %d renewed the grant", ev, v)
					require.NotEqual(t, authority.MsgHeartbeatNow, m.Kind(), "%T under %d challenged the holder", ev, v)
				}
			}
			require.Equal(t, deadline, ctl.Deadline(), "renewed under %d", v)
			require.Equal(t, authority.Granted, ctl.State().Phase)

			ctl = controllerAt(t, handoff)
			require.ErrorIs(t, ctl.Step(authority.Released{Node: "node-a", Token: v}), authority.ErrRefused)
			require.Nil(t, ctl.Ready().Persist, "released under %d", v)

			ctl = controllerAt(t, vacant)
			require.ErrorIs(t, ctl.Step(authority.Offer{Node: "node-b", Token: v, Star: "node-a", Usable: true}), authority.ErrRefused)
			require.Nil(t, ctl.Ready().Persist, "an offer under %d was taken", v)
			require.ErrorIs(t, ctl.Step(authority.Concern{Node: "voter-0", Token: v, Topology: topologyOf(t, ctl), RoundTrip: true}), authority.ErrRefused)

			ctl = controllerAt(t, recovering)
			require.ErrorIs(t, ctl.Step(authority.Recovered{Node: "node-b", Token: v, Star: "node-a"}), authority.ErrRefused)
			ctl.Step(authority.Tick{Now: t0.Add(time.Hour)})
			require.NotEqual(t, authority.Granted, func() authority.Phase {
				if p := ctl.Ready().Persist; p != nil {
					return p.Phase
				}
				return ctl.State().Phase
			}(), "a recovery reported under %d was granted", v)
		})
	}
}

// A concern cleared under a truncated or extended token does not clear
// the report made under the current one: with C = 5, the two reports and
// the silent holder still end the grant.
func TestConcernClearedUnderAnotherToken(t *testing.T) {
	granted := authority.StateRecord{Phase: authority.Granted, Holder: "node-a", Token: bigToken}
	for name, v := range variants(bigToken) {
		t.Run(name, func(t *testing.T) {
			ctl := controllerAt(t, granted)
			require.NoError(t, ctl.Step(authority.Connect{Node: "voter-2", Caps: bothCaps}))
			tp := topologyOf(t, ctl)
			concern := func(n string) error {
				return ctl.Step(authority.Concern{Node: n, Token: bigToken, Topology: tp, RoundTrip: true})
			}
			require.NoError(t, concern("voter-0"))
			require.NoError(t, concern("voter-1"))
			require.NoError(t, ctl.Step(authority.ConcernCleared{Node: "voter-0", Token: v}))
			require.NoError(t, ctl.Step(authority.Tick{Now: t0.Add(authority.ChallengeWait)}))
			require.NoError(t, concern("voter-1"))
			p := ctl.Ready().Persist
			require.NotNil(t, p, "the grant stands: the report of voter-0 was cleared under %d", v)
			require.Equal(t, authority.Vacant, p.Phase)
		})
	}
}

// Wherever the runtime compares a token, a truncated or extended form of
// the grant's is not it: a grant whose message and grant tokens differ,
// a release, a heartbeat request or a revocation under it do not act on
// the grant, and health links under it are not the grant's.
func TestRuntimeTokenTruncatedOrExtended(t *testing.T) {
	cfg := authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: bothCaps}
	g := authority.Grant{Domain: "orders", Holder: "node-a", Token: bigToken, Deadline: t0.Add(time.Hour), Revision: 7}
	now := t0.Add(time.Minute)
	for name, v := range variants(bigToken) {
		t.Run(name, func(t *testing.T) {
			fresh := func() *authority.Runtime {
				rt, err := authority.Resume(cfg, g, t0)
				require.NoError(t, err)
				return rt
			}
			rt := fresh()
			mixed := g
			mixed.Token = v
			require.ErrorIs(t, rt.Step(authority.GrantMsg{To: "node-a", Token: bigToken, Grant: mixed}), authority.ErrRefused)
			require.ErrorIs(t, rt.Step(authority.GrantMsg{To: "node-a", Token: v, Grant: g}), authority.ErrRefused)
			require.Equal(t, g, rt.Grant())

			// A message under an older token leaves the grant as it is;
			// one under a newer token ends it (a newer token was issued),
			// but never acts on it.
			still := func(what string) {
				t.Helper()
				if v < bigToken {
					require.NoError(t, rt.Admit(now), "%s under %d acted on the grant of %d", what, v, bigToken)
					require.Equal(t, g, rt.Grant())
				} else {
					require.ErrorIs(t, rt.Admit(now), authority.ErrNotAdmitted, "%s under the newer %d: the older grant ended", what, v)
				}
			}
			rt = fresh()
			require.ErrorIs(t, rt.Step(authority.ReleaseMsg{To: "node-a", Token: v}), authority.ErrRefused)
			require.False(t, rt.Ready().Release, "a release under %d drains the grant", v)
			still("a release")

			rt = fresh()
			require.ErrorIs(t, rt.Step(authority.HeartbeatNowMsg{To: "node-a", Token: v}), authority.ErrRefused)
			require.Empty(t, rt.Ready().Events, "a heartbeat request under %d was answered", v)
			still("a heartbeat request")

			rt = fresh()
			require.NoError(t, rt.Step(authority.RevokeMsg{To: "node-a", Token: v}))
			still("a revocation")

			// Health: the holder's links to its voters complete round
			// trips only under v; under the grant's token they are
			// missing, and it challenges.
			for _, under := range []authority.Token{bigToken, v} {
				rt = fresh()
				require.NoError(t, rt.Step(authority.TopologyMsg{To: "node-a", Topology: 1, Token: bigToken, Holder: "node-a", Voters: []string{"node-a", "voter-0", "voter-1"}}))
				at := t0
				for range 8 {
					at = at.Add(authority.PingEvery)
					rt.Step(authority.PingResult{Peer: "voter-0", Token: under, OK: true, Now: at})
					rt.Step(authority.PingResult{Peer: "voter-1", Token: under, OK: true, Now: at})
					rt.Step(authority.Tick{Now: at})
				}
				challenged := false
				rd := rt.Ready()
				rt.Advance(rd)
				for _, ev := range rd.Events {
					if _, ok := ev.(authority.Challenge); ok {
						challenged = true
					}
				}
				require.Equal(t, under != bigToken, challenged, "links pinged under %d, grant %d", under, bigToken)
			}
		})
	}
}

// The progress fence compares the token record's revision exactly: a
// guard whose revision is the current one truncated or extended writes
// nothing.
func TestGuardRevisionTruncatedOrExtended(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	for i := range 120 {
		_, err := metastore.Put(ctx, store, fmt.Sprintf("filler/%d", i), []byte("x"), 0)
		require.NoError(t, err)
	}
	rev, err := metastore.Put(ctx, store, "authority/orders/token", []byte("{}"), 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, rev, int64(100), "a revision with decimal prefixes")
	write := metastore.Txn{Then: []metastore.Op{{Key: "progress", Value: []byte("x")}}}
	for _, bad := range []int64{rev / 10, rev*10 + 1, rev & 0x3f, rev | 1<<40} {
		g, err := authority.Guard(store, "", "orders", bad)
		require.NoError(t, err)
		_, err = g.Txn(ctx, write)
		require.ErrorIs(t, err, authority.ErrStaleGrant, "guard %d, token record at %d", bad, rev)
	}
	g, err := authority.Guard(store, "", "orders", rev)
	require.NoError(t, err)
	_, err = g.Txn(ctx, write)
	require.NoError(t, err)
}
