package authoritytest

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/internal/script"
)

//go:embed testdata/*.txt
var scripts embed.FS

// runScripts runs every script of testdata as a subtest, on a cluster of
// its own. With -rewrite, the scripts are rewritten in the source tree.
func runScripts(t *testing.T, b Backend) {
	files, err := scripts.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	_, src, _, _ := runtime.Caller(0)
	for _, f := range files {
		name := path.Join("testdata", f.Name())
		t.Run(strings.TrimSuffix(f.Name(), ".txt"), func(t *testing.T) {
			disk := filepath.Join(filepath.Dir(src), name)
			if _, err := os.Stat(disk); err != nil {
				disk = ""
			}
			c := newCluster(t, b)
			c.trace = &tracer{}
			script.RunFS(t, scripts, name, disk, c.command)
		})
	}
}

// command runs one command of a script and returns what moved (see
// testdata/01-grant.txt for the commands).
func (c *cluster) command(t *testing.T, cmd *script.Cmd) string {
	c.t = t
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	nodes := bare(cmd)
	switch cmd.Name {
	case "join":
		caps, ok := capsNamed(cmd.Get("caps", "promotable"))
		if !ok {
			t.Fatalf("%s: unknown caps %q", cmd.Pos, cmd.Get("caps", ""))
		}
		for _, n := range nodes {
			c.join(n, caps)
		}
	case "grant-to":
		// As grantTo: a covering frontier, then the clock in seconds
		// until the node holds the grant.
		st, rt := c.state(), c.nodes[nodes[0]].rt
		rt.Step(authority.FrontierReport{Star: st.Required.Star, Pos: st.Required.Pos, Usable: true})
		c.advanceScript(t, cmd, (2 * c.cfg.Lease).String(), time.Second, func() bool { return rt.Grant().Holder == nodes[0] }, say)
		if rt.Grant().Holder != nodes[0] {
			t.Fatalf("%s: %s got no grant", cmd.Pos, nodes[0])
		}
	case "connect":
		for _, n := range nodes {
			c.connect(n)
		}
	case "disconnect":
		for _, n := range nodes {
			c.nodes[n].connected = false
			c.event(authority.Disconnect{Node: n, Unexpected: !cmd.Has("goodbye")})
		}
	case "heartbeat":
		if err := c.heartbeat(nodes[0], pos(t, cmd, "progress")); errors.Is(err, authority.ErrNotAdmitted) {
			say("%s: no grant to heartbeat", nodes[0])
		}
	case "advance":
		c.advanceScript(t, cmd, nodes[0], 0, nil, say)
	case "ping":
		c.pingRound(nodes[0], c.state().Token, nil)
		c.run()
	case "partition", "heal", "mute", "unmute":
		for _, n := range nodes {
			nd := c.nodes[n]
			switch cmd.Name {
			case "partition", "heal":
				nd.partitioned = cmd.Name == "partition"
			default:
				nd.mute = cmd.Name == "mute"
			}
		}
	case "report-frontier":
		c.nodes[nodes[0]].rt.Step(authority.FrontierReport{Star: cmd.Get("star", ""), Pos: pos(t, cmd, "pos"), Usable: !cmd.Has("unusable")})
		c.run()
	case "report-recoverable":
		c.nodes[nodes[0]].rt.Step(authority.RecoverableReport{Star: cmd.Get("star", ""), Pos: pos(t, cmd, "pos")})
		c.run()
	case "release-done":
		c.nodes[nodes[0]].rt.Step(authority.ReleaseDone{Progress: pos(t, cmd, "progress")})
		c.run()
	case "step":
		ev := c.eventOf(t, cmd, nodes[0])
		err := c.ctl.Step(ev)
		c.trace.event(ev, fate(err))
		if !cmd.Has("nosettle") {
			c.run()
		}
	case "settle":
		c.run()
	case "deliver":
		to := cmd.Get("to", "")
		m := c.msgOf(t, cmd, nodes[0], to)
		err := c.nodes[to].rt.Step(m)
		c.trace.msgs([]delivery{{m: m, err: err}})
		c.run()
	case "expire":
		c.expire()
	case "elect":
		c.elect(nodes[0])
	case "state":
		say("%s", showState(c.state()))
	case "admit":
		for _, n := range nodes {
			say("%s", c.admission(n))
		}
	default:
		t.Fatalf("%s: unknown command %q", cmd.Pos, cmd.Name)
	}
	return strings.Join(append(c.trace.take(), out...), "\n")
}

// advanceScript moves the clock by the duration named, in steps of by=
// (the whole at once by default): at each step, before the clock moves,
// the holder named by ping= pings its peers when PingEvery has passed
// since the command's first round, and the node named by beat=
// heartbeats with progress=. The lines of each step that moved anything
// follow a line with the time. It stops early once until (when set)
// holds.
func (c *cluster) advanceScript(t *testing.T, cmd *script.Cmd, total string, by time.Duration, until func() bool, say func(string, ...any)) {
	d, err := time.ParseDuration(total)
	if err != nil {
		t.Fatalf("%s: %v", cmd.Pos, err)
	}
	if by == 0 {
		by = d
	}
	if s := cmd.Get("by", ""); s != "" {
		if by, err = time.ParseDuration(s); err != nil || by <= 0 {
			t.Fatalf("%s: bad step %q", cmd.Pos, s)
		}
	}
	head := func() {
		if l := c.trace.take(); len(l) > 0 {
			say("%s", showTime(c.now))
			for _, s := range l {
				say("  %s", s)
			}
		}
	}
	nextPing := c.now
	for end := c.now.Add(d); c.now.Before(end) && (until == nil || !until()); {
		if h := cmd.Get("ping", ""); h != "" && !c.now.Before(nextPing) {
			c.pingRound(h, c.state().Token, nil)
			nextPing = c.now.Add(authority.PingEvery)
		}
		if n := cmd.Get("beat", ""); n != "" {
			if err := c.heartbeat(n, pos(t, cmd, "progress")); errors.Is(err, authority.ErrNotAdmitted) {
				c.trace.add("%s: no grant to heartbeat", n)
			}
		}
		head()
		c.advance(min(by, end.Sub(c.now)))
		head()
	}
}

// admission says whether a node admits writes now, and under what.
func (c *cluster) admission(n string) string {
	rt := c.nodes[n].rt
	g := rt.Grant()
	s := n + ": "
	if err := rt.Admit(c.now); err != nil {
		s += "not admitted"
	} else {
		s += "admits"
	}
	if g.Token != 0 {
		s += fmt.Sprintf(", token %d until %s", g.Token, showTime(g.Deadline))
	}
	if rt.Fenced() {
		s += ", fenced"
	}
	// Which revision its writes are guarded with: the durable token
	// record's, or a stale one.
	rev := g.Revision
	if g.Token == 0 && c.recover[n] != nil {
		rev = c.recover[n].Grant.Revision
	}
	switch {
	case rev == 0:
	case rev == c.state().TokenRevision:
		s += ", guard current"
	default:
		s += ", guard stale"
	}
	return s
}

// eventOf builds the controller event a step command names.
func (c *cluster) eventOf(t *testing.T, cmd *script.Cmd, kind string) authority.Event {
	node, tok := cmd.Get("node", ""), c.token(t, cmd)
	switch kind {
	case "offer":
		return authority.Offer{Node: node, Token: tok, Star: cmd.Get("star", ""), Frontier: pos(t, cmd, "frontier"),
			Recoverable: pos(t, cmd, "recoverable"), Usable: !cmd.Has("unusable")}
	case "recovered":
		return authority.Recovered{Node: node, Token: tok, Star: cmd.Get("star", ""), Frontier: pos(t, cmd, "frontier")}
	case "handoff":
		return authority.HandoffRequest{Target: cmd.Get("target", "")}
	case "concern":
		return authority.Concern{Node: node, Token: tok, Topology: c.topo(t, cmd), RoundTrip: !cmd.Has("no-round-trip")}
	case "concern-cleared":
		return authority.ConcernCleared{Node: node, Token: tok}
	case "advisory":
		return authority.Advisory{Node: node, Token: tok}
	case "challenge":
		return authority.Challenge{Node: node, Token: tok, Topology: c.topo(t, cmd)}
	}
	t.Fatalf("%s: unknown event %q", cmd.Pos, kind)
	return nil
}

// msgOf builds the controller message a deliver command names.
func (c *cluster) msgOf(t *testing.T, cmd *script.Cmd, kind, to string) authority.Msg {
	tok := c.token(t, cmd)
	switch kind {
	case "grant":
		d, err := time.ParseDuration(cmd.Get("deadline", "0s"))
		if err != nil {
			t.Fatalf("%s: %v", cmd.Pos, err)
		}
		return authority.GrantMsg{To: to, Token: tok, Topology: c.topo(t, cmd), Grant: authority.Grant{
			Domain: cmd.Get("domain", domain), Holder: cmd.Get("holder", to), Token: authority.Token(num(t, cmd, "grant-token", uint64(tok))),
			Deadline: t0.Add(d)}}
	case "release":
		return authority.ReleaseMsg{To: to, Token: tok}
	}
	t.Fatalf("%s: unknown message %q", cmd.Pos, kind)
	return nil
}

func (c *cluster) token(t *testing.T, cmd *script.Cmd) authority.Token {
	return authority.Token(num(t, cmd, "token", 0))
}

// topo reads topology=T.N, or the current topology without it.
func (c *cluster) topo(t *testing.T, cmd *script.Cmd) uint64 {
	s := cmd.Get("topology", "")
	if s == "" {
		return c.topology()
	}
	term, n, ok := strings.Cut(s, ".")
	a, err1 := strconv.ParseUint(term, 10, 32)
	b, err2 := strconv.ParseUint(n, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("%s: bad topology %q", cmd.Pos, s)
	}
	return a<<32 | b
}

func num(t *testing.T, cmd *script.Cmd, key string, def uint64) uint64 {
	s := cmd.Get(key, "")
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: bad %s %q", cmd.Pos, key, s)
	}
	return v
}

// pos reads a chain position written epoch/slot (0/0 without it).
func pos(t *testing.T, cmd *script.Cmd, key string) chain.Position {
	s := cmd.Get(key, "0/0")
	e, sl, ok := strings.Cut(s, "/")
	a, err1 := strconv.ParseUint(e, 10, 64)
	b, err2 := strconv.ParseUint(sl, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("%s: bad position %q", cmd.Pos, s)
	}
	return chain.Position{Epoch: a, Slot: b}
}

// bare lists the command's arguments without a value: node names, or the
// kind of an event or message, or a duration.
func bare(cmd *script.Cmd) []string {
	var out []string
	for _, a := range cmd.Args {
		if a.Vals == nil && a.Key != "goodbye" && a.Key != "unusable" && a.Key != "nosettle" && a.Key != "no-round-trip" {
			out = append(out, a.Key)
		}
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

func capsNamed(s string) (authority.Capabilities, bool) {
	for _, n := range capNames {
		if n.name == s {
			return n.caps, true
		}
	}
	return authority.Capabilities{}, false
}
