//go:build cutline_planted

package modelcheck

import (
	"testing"

	"github.com/cutline/cutline/internal/planted"
)

// plantedCase is one planted variant of the fence or the writer and the
// model that should expose it. claimed says the checker must find a
// violation of a guarantee under it; the others are tried and reported,
// and said to be out of the model's reach.
type plantedCase struct {
	bug     planted.Bug
	cfg     Config
	claimed bool
	why     string // for an unclaimed variant: why the model cannot reach it
}

func plantedCases() []plantedCase {
	one := Config{K: 1, W: 1, Window: 2, Slots: 2, Fencers: 1}
	withFault := one
	withFault.Slots, withFault.Faults = 1, 1
	race := Config{K: 1, W: 1, Window: 1, Slots: 1, Fencers: 2}
	quorum := Config{K: 3, W: 2, Window: 1, Slots: 1, Fencers: 1}
	return []plantedCase{
		{bug: planted.CutPlainPut, cfg: race, claimed: true},
		{bug: planted.PoisonNoReobserve, cfg: one, claimed: true},
		{bug: planted.AckOutOfOrder, cfg: one, claimed: true},
		{bug: planted.AckBelowQuorum, cfg: quorum, claimed: true},
		{bug: planted.LostCreateCounted, cfg: withFault, claimed: true},
		{bug: planted.UnreachableAsEmpty, cfg: withFault,
			why: "an unreadable copy read as empty only leads the fence to create there, which the copy refuses: nothing wrong is decided without a corrupt or vanished object"},
		{bug: planted.RepairUnverified, cfg: quorum,
			why: "needs a copy with a corrupt body; the model's stores hold only what its parties wrote"},
		{bug: planted.WalkAboveHole, cfg: quorum,
			why: "needs a copy with a corrupt body past the end; the model's stores hold only what its parties wrote"},
		{bug: planted.BarrierOneWindow, cfg: one,
			why: "a walk plants barriers only past 3·window+2 slots from its start, beyond the model's chains"},
	}
}

// TestPlanted runs the checker with nothing planted on every model it
// uses (each must pass), then with each planted variant of the fence and
// the writer in turn, and requires a violation of a guarantee for every
// variant it claims. It logs caught out of tried.
func TestPlanted(t *testing.T) {
	if planted.Active() != planted.None {
		t.Fatalf("variant %v is planted for the whole run (CUTLINE_PLANTED)", planted.Active())
	}
	cases := plantedCases()
	for _, pc := range cases {
		res, err := Explore(t, pc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil || !res.Complete {
			t.Fatalf("nothing planted, %s: violation %v, complete %v", pc.cfg.Name(), res.Violation, res.Complete)
		}
	}
	caught, claimed := 0, 0
	for _, pc := range cases {
		restore := planted.Set(pc.bug)
		c := pc.cfg
		c.MaxExecutions = 50000
		res, err := Explore(t, c)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		v := res.Violation
		found := v != nil && v.Guarantee != "model"
		if pc.claimed {
			claimed++
		}
		switch {
		case found:
			caught++
			t.Logf("planted %v: caught (%s, %d executions): guarantee %s: %s; %d steps:\n%s",
				pc.bug, c.Name(), res.Executions, v.Guarantee, v.Msg, len(v.Trace), joinLines(v.Trace))
		case pc.claimed:
			t.Errorf("planted %v: not caught (%s, %d executions, complete %v, violation %v)", pc.bug, c.Name(), res.Executions, res.Complete, v)
		case v != nil:
			t.Logf("planted %v: out of reach (%s), but the execution went wrong: %s", pc.bug, pc.why, v.Msg)
		default:
			t.Logf("planted %v: not caught, out of the model's reach: %s (%d executions)", pc.bug, pc.why, res.Executions)
		}
	}
	t.Logf("caught %d of %d planted variants tried (%d claimed)", caught, len(cases), claimed)

	// The parallel search must find them too, and stop every worker.
	for _, pc := range cases {
		if !pc.claimed {
			continue
		}
		restore := planted.Set(pc.bug)
		c := pc.cfg
		c.MaxExecutions, c.Workers = 50000, 2
		res, err := Explore(t, c)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		if v := res.Violation; v == nil || v.Guarantee == "model" {
			t.Errorf("planted %v, 2 workers: not caught (%d executions, violation %v)", pc.bug, res.Executions, v)
		}
	}
}

func joinLines(lines []string) string {
	s := ""
	for _, l := range lines {
		s += "    " + l + "\n"
	}
	return s
}
