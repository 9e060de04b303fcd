package authhttp

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
)

// wireSeeds are one message of every kind, each with every field its
// kind uses set.
func wireSeeds() []authority.Msg {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := authority.Grant{Domain: "orders", Holder: "node-a", Token: 3, Deadline: at, Revision: 9}
	req := authority.Required{Star: "node-b", Pos: chain.Position{Epoch: 2, Slot: 7}}
	return []authority.Msg{
		authority.GrantMsg{To: "node-a", Token: 3, Topology: 5, Grant: g},
		authority.RevokeMsg{To: "node-a", Token: 3},
		authority.RequiredMsg{To: "node-a", Token: 3, Required: req},
		authority.RecoverMsg{To: "node-a", Token: 3, Required: req, Grant: g},
		authority.ReleaseMsg{To: "node-a", Token: 3},
		authority.TopologyMsg{To: "node-a", Token: 3, Topology: 5, Voters: []string{"node-a", "node-b"}, Holder: "node-b", Ended: true},
		authority.HeartbeatNowMsg{To: "node-a", Token: 3, Topology: 5},
		authority.ConcernAnswerMsg{To: "node-a", Token: 3, Topology: 5, RetryAfter: 250 * time.Millisecond, Window: 4 * time.Second},
	}
}

// Every kind of message crosses the wire unchanged.
func TestWireMsgRoundTrip(t *testing.T) {
	seen := map[authority.MsgKind]bool{}
	for _, m := range wireSeeds() {
		line, err := json.Marshal(toWireMsg(m))
		require.NoError(t, err)
		var w wireMsg
		require.NoError(t, json.Unmarshal(line, &w))
		got, err := w.msg()
		require.NoError(t, err)
		require.Equal(t, m, got, "%s", line)
		seen[m.Kind()] = true
	}
	require.Len(t, seen, 8, "a kind has no seed")
	var w wireMsg
	require.NoError(t, json.Unmarshal([]byte(`{"to":"node-a","kind":"promote","token":3}`), &w))
	_, err := w.msg()
	require.Error(t, err, "an unknown kind was taken")
}

// Any line a client reads either names no kind it knows, or is a message
// whose own line reads back as the same message: a kind's line carries
// only the fields the kind uses, and nothing is lost on the way.
func FuzzWireMsg(f *testing.F) {
	for _, m := range wireSeeds() {
		line, err := json.Marshal(toWireMsg(m))
		require.NoError(f, err)
		f.Add(line)
	}
	f.Add([]byte(`{"to":"node-a","kind":"grant","token":3,"voters":["x"],"retry_after_ms":5}`))
	f.Add([]byte(`{"to":"node-a","kind":"unknown"}`))
	f.Add([]byte(`{"to":"node-a","kind":"topology","voters":[]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var w wireMsg
		if json.Unmarshal(line, &w) != nil {
			return
		}
		m, err := w.msg()
		if err != nil {
			return
		}
		require.Equal(t, w.Kind, string(m.Kind()))
		again, err := json.Marshal(toWireMsg(m))
		require.NoError(t, err)
		var w2 wireMsg
		require.NoError(t, json.Unmarshal(again, &w2))
		m2, err := w2.msg()
		require.NoError(t, err)
		require.Equal(t, m, m2, "%s read back as %s", line, again)
	})
}
