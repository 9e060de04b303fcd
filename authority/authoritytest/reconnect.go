package authoritytest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

// sequences returns every order of 0..n-1 and every order of each n-1 of
// them: a node's messages delivered in any order, with at most one lost.
func sequences(n int) [][]int {
	var out [][]int
	var perm func(prefix, rest []int)
	perm = func(prefix, rest []int) {
		if len(rest) == 0 {
			out = append(out, slices.Clone(prefix))
			return
		}
		for i := range rest {
			perm(append(prefix, rest[i]), slices.Concat(rest[:i:i], rest[i+1:]))
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	perm(nil, all)
	for lost := range n {
		perm(nil, slices.Concat(all[:lost:lost], all[lost+1:]))
	}
	return out
}

// formerHolder is a cluster whose former holder has just reconnected with
// the token it held: the controller's answers to it are held back.
type formerHolder struct {
	c     *cluster
	rt    *authority.Runtime
	grant authority.Grant // the grant it held
	msgs  []authority.Msg // the controller's answers to its reconnect
}

// A former holder reconnects with its old token, and the controller's
// answers reach it in every order, each one of them lost in turn. The
// first one to arrive ends its grant, whatever it is: the topology that
// names the newer token (or says the old one ended), the revocation, the
// requirement to recover. Admission stays closed for good: a delayed
// grant under the old token, time passing and health coming back change
// nothing.
func formerHolderReconnects(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name string
		// replaced: the next token was issued before it reconnected.
		// fenced: it was cut off and closed its own admission.
		replaced, fenced bool
	}{
		{"replaced after its self-fence", true, true},
		{"self-fenced, grant ended, next token not yet issued", false, true},
		{"channel lost, reservation ran out, still admitting", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := reconnectFormerHolder(t, b, tc.replaced, tc.fenced)
			kinds := map[authority.MsgKind]bool{}
			for _, m := range first.msgs {
				kinds[m.Kind()] = true
			}
			require.True(t, kinds[authority.MsgTopology] && kinds[authority.MsgRevoke], "the reconnect is answered with a topology and a revocation: %+v", first.msgs)
			seqs := sequences(len(first.msgs))
			t.Logf("%d messages (%v), %d orders with at most one lost", len(first.msgs), kindsOf(first.msgs), len(seqs))
			for _, seq := range seqs {
				var order []authority.MsgKind
				for _, i := range seq {
					order = append(order, first.msgs[i].Kind())
				}
				// Each order in a test of its own: a backend's keyspace is
				// the test's.
				t.Run(fmt.Sprint(order), func(t *testing.T) {
					fh := reconnectFormerHolder(t, b, tc.replaced, tc.fenced)
					require.Equal(t, first.msgs, fh.msgs, "the schedule is deterministic")
					c, rt := fh.c, fh.rt
					for n, i := range seq {
						_ = rt.Step(fh.msgs[i])
						c.run()
						require.ErrorIs(t, rt.Admit(c.now), authority.ErrNotAdmitted, "after %v", order[:n+1])
						require.Zero(t, rt.Grant().Token, "after %v: the grant under token %d survived", order[:n+1], fh.grant.Token)
					}
					// For good: a delayed grant under the old token is
					// refused, health and time change nothing while the old
					// deadline runs, and the next reconnect claims no token.
					late := fh.grant
					late.Deadline = late.Deadline.Add(time.Minute)
					require.ErrorIs(t, rt.Step(authority.GrantMsg{To: "holder", Token: late.Token, Topology: rt.Topology(), Grant: late}),
						authority.ErrRefused)
					c.nodes["holder"].hold = false
					st := c.state()
					holder := st.Holder
					if holder == "" {
						holder = st.Required.Star
					}
					for i := 0; c.now.Before(fh.grant.Deadline) && i < 400; i++ {
						if i%20 == 0 {
							c.pingRound(holder, st.Token, nil)
						}
						c.advance(50 * time.Millisecond)
						require.ErrorIs(t, rt.Admit(c.now), authority.ErrNotAdmitted, "%v after the reconnect", time.Duration(i+1)*50*time.Millisecond)
					}
					require.Zero(t, rt.Grant().Token)
				})
			}
		})
	}
}

// reconnectFormerHolder runs a cluster until the holder (token 1) lost its
// grant, then reconnects it, holding the controller's answers back.
func reconnectFormerHolder(t *testing.T, b Backend, replaced, fenced bool) formerHolder {
	t.Helper()
	c, h, nb, g := healthyHolder(t, b)
	held := h.Grant()
	nd := c.nodes["holder"]
	nextPing := c.now
	step := func() {
		if !c.now.Before(nextPing) {
			c.pingRound("holder", g.Token, nil)
			nextPing = c.now.Add(authority.PingEvery)
		}
		c.advance(50 * time.Millisecond)
	}
	if fenced {
		// Cut off from everyone: it fences itself, the voters' concerns
		// end its grant on the fast path.
		nd.partitioned = true
		for i := 0; (c.state().Phase == authority.Granted || !h.Fenced()) && i < 400; i++ {
			step()
		}
		require.True(t, h.Fenced(), "the holder fenced itself")
	} else {
		// Its channel breaks; its peers still reach it, so it neither
		// fences itself nor is confirmed unhealthy.
		c.disconnect("holder", true)
		for i := 0; c.state().Phase == authority.Granted && i < 400; i++ {
			step()
		}
		require.NoError(t, h.Admit(c.now), "cut off from the controller alone, it admits until its deadline")
	}
	require.Equal(t, authority.Vacant, c.state().Phase, "the grant ended")
	if replaced {
		nb.Step(authority.FrontierReport{Star: "holder", Pos: chain.Position{Epoch: 1, Slot: 4}, Usable: true})
		for i := 0; nb.Grant().Token == 0 && i < 400; i++ {
			step()
		}
		require.Equal(t, g.Token+1, nb.Grant().Token)
	}
	require.True(t, c.now.Before(held.Deadline), "the old deadline is still ahead: only the messages can close admission")
	require.Equal(t, g.Token, h.Grant().Token, "it still believes its grant")
	nd.partitioned, nd.hold = false, true
	if nd.connected {
		c.disconnect("holder", true)
	}
	c.connect("holder") // with token 1
	return formerHolder{c: c, rt: h, grant: held, msgs: nd.inbox}
}

func kindsOf(msgs []authority.Msg) []authority.MsgKind {
	out := make([]authority.MsgKind, len(msgs))
	for i, m := range msgs {
		out[i] = m.Kind()
	}
	return out
}
