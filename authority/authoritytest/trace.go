package authoritytest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cutline/cutline/authority"
)

// tracer writes what moves in a cluster as lines of text, in a form that
// is the same on every run and every backend: times relative to the
// start, no metastore revisions. A nil tracer writes nothing.
type tracer struct {
	now   func() time.Time
	lines []string
}

func (tr *tracer) add(format string, args ...any) {
	if tr != nil {
		tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
	}
}

// take returns the lines written since the last take.
func (tr *tracer) take() []string {
	l := tr.lines
	tr.lines = nil
	return l
}

// delivery is a controller message and what became of it.
type delivery struct {
	m    authority.Msg
	fate string
	err  error
}

func (tr *tracer) persist(st authority.StateRecord) {
	tr.add("persist %s", showState(st))
}

// msgs writes a Ready's messages, one line for consecutive messages that
// differ only in their recipient.
func (tr *tracer) msgs(ds []delivery) {
	if tr == nil {
		return
	}
	for i := 0; i < len(ds); {
		body, to := showMsg(ds[i].m), []string{ds[i].m.Recipient()}
		f := ds[i].fate
		if f == "" {
			f = fate(ds[i].err)
		}
		j := i + 1
		for ; j < len(ds) && showMsg(ds[j].m) == body && ds[j].fate == ds[i].fate && fate(ds[j].err) == fate(ds[i].err); j++ {
			to = append(to, ds[j].m.Recipient())
		}
		who := to[0]
		if len(to) > 1 {
			who = "(" + strings.Join(to, ",") + ")"
		}
		tr.add("ctl → %s: %s%s", who, body, suffix(f))
		i = j
	}
}

func (tr *tracer) event(ev authority.Event, f string) {
	if tr == nil {
		return
	}
	if _, ok := ev.(authority.Tick); ok {
		return
	}
	node, body := showEvent(ev)
	tr.add("%s → ctl: %s%s", node, body, suffix(f))
}

// ready writes what a runtime's Ready asks of its host: an admission
// state that changed (a renewal's new deadline shows in the grant
// message), a recovery, a release.
func (tr *tracer) ready(name string, nd *node, rd authority.RuntimeReady) {
	if tr == nil {
		return
	}
	if rd.State != nil {
		st := rd.State
		s := "no grant"
		if g := st.Grant; g.Token != 0 {
			s = fmt.Sprintf("holds token %d", g.Token)
		}
		if st.Draining {
			s += ", draining"
		}
		if st.Fenced {
			s += ", fenced"
		}
		if nd.shown == "" {
			nd.shown = "no grant"
		}
		if s != nd.shown {
			nd.shown = s
			tr.add("%s: %s", name, s)
		}
	}
	if rd.Recover != nil {
		tr.add("%s: recover %s to %v", name, rd.Recover.Required.Star, rd.Recover.Required.Pos)
	}
	if rd.Release {
		tr.add("%s: drain and release", name)
	}
}

func fate(err error) string {
	var r *authority.RefusedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &r):
		return "refused: " + r.Reason
	}
	return "error: " + err.Error()
}

func suffix(f string) string {
	if f == "" {
		return ""
	}
	return " (" + f + ")"
}

func showState(st authority.StateRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s term=%d token=%d", st.Phase, st.Term, st.Token)
	if st.Holder != "" {
		fmt.Fprintf(&b, " holder=%s", st.Holder)
	}
	if st.Candidate != "" {
		fmt.Fprintf(&b, " candidate=%s", st.Candidate)
	}
	if st.Target != "" {
		fmt.Fprintf(&b, " target=%s", st.Target)
	}
	if st.Required.Star != "" {
		fmt.Fprintf(&b, " required=%s@%v", st.Required.Star, st.Required.Pos)
	}
	if st.Phase == authority.Vacant && st.Ended != "" {
		fmt.Fprintf(&b, " ended=%q", st.Ended)
	}
	return b.String()
}

func showTopo(v uint64) string { return fmt.Sprintf("%d.%d", v>>32, v&(1<<32-1)) }

func showTime(t time.Time) string { return "+" + t.Sub(t0).String() }

func showMsg(m authority.Msg) string {
	switch m := m.(type) {
	case authority.GrantMsg:
		return fmt.Sprintf("grant token=%d topology=%s holder=%s deadline=%s", m.Token, showTopo(m.Topology), m.Grant.Holder, showTime(m.Grant.Deadline))
	case authority.RevokeMsg:
		return fmt.Sprintf("revoke token=%d", m.Token)
	case authority.RequiredMsg:
		return fmt.Sprintf("required token=%d required=%s@%v", m.Token, m.Required.Star, m.Required.Pos)
	case authority.RecoverMsg:
		return fmt.Sprintf("recover token=%d required=%s@%v", m.Token, m.Required.Star, m.Required.Pos)
	case authority.ReleaseMsg:
		return fmt.Sprintf("release token=%d", m.Token)
	case authority.TopologyMsg:
		s := fmt.Sprintf("topology %s voters=(%s) holder=%s token=%d", showTopo(m.Topology), strings.Join(m.Voters, ","), m.Holder, m.Token)
		if m.Ended {
			s += " ended"
		}
		return s
	case authority.HeartbeatNowMsg:
		return fmt.Sprintf("heartbeat-now token=%d topology=%s", m.Token, showTopo(m.Topology))
	case authority.ConcernAnswerMsg:
		return fmt.Sprintf("concern-answer token=%d topology=%s retry-after=%v window=%v", m.Token, showTopo(m.Topology), m.RetryAfter, m.Window)
	}
	return fmt.Sprintf("%T %+v", m, m)
}

func showEvent(ev authority.Event) (node, body string) {
	switch e := ev.(type) {
	case authority.Connect:
		return e.Node, fmt.Sprintf("connect token=%d caps=%s", e.Token, showCaps(e.Caps))
	case authority.Disconnect:
		if e.Unexpected {
			return e.Node, "disconnect unexpected"
		}
		return e.Node, "disconnect goodbye"
	case authority.Heartbeat:
		return e.Node, fmt.Sprintf("heartbeat token=%d progress=%v", e.Token, e.Progress)
	case authority.Offer:
		s := fmt.Sprintf("offer token=%d star=%s frontier=%v recoverable=%v", e.Token, e.Star, e.Frontier, e.Recoverable)
		if !e.Usable {
			s += " unusable"
		}
		return e.Node, s
	case authority.Recovered:
		return e.Node, fmt.Sprintf("recovered token=%d star=%s frontier=%v", e.Token, e.Star, e.Frontier)
	case authority.HandoffRequest:
		return "operator", "handoff target=" + e.Target
	case authority.Released:
		return e.Node, fmt.Sprintf("released token=%d progress=%v", e.Token, e.Progress)
	case authority.Concern:
		s := fmt.Sprintf("concern token=%d topology=%s", e.Token, showTopo(e.Topology))
		if !e.RoundTrip {
			s += " no-round-trip"
		}
		return e.Node, s
	case authority.ConcernCleared:
		return e.Node, fmt.Sprintf("concern-cleared token=%d", e.Token)
	case authority.Advisory:
		return e.Node, fmt.Sprintf("advisory token=%d", e.Token)
	case authority.Challenge:
		return e.Node, fmt.Sprintf("challenge token=%d topology=%s", e.Token, showTopo(e.Topology))
	}
	return "?", fmt.Sprintf("%T %+v", ev, ev)
}

var capNames = []struct {
	name string
	caps authority.Capabilities
}{
	{"promotable", promotable},
	{"voter", voter},
	{"storage", authority.Capabilities{Storage: true}},
	{"none", authority.Capabilities{}},
}

func showCaps(c authority.Capabilities) string {
	for _, n := range capNames {
		if n.caps == c {
			return n.name
		}
	}
	return fmt.Sprintf("%+v", c)
}
