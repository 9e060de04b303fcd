package modelcheck

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/cutline/cutline"
)

var (
	flagFull    = flag.Bool("mc.full", false, "explore the full configurations: 4 slots, two fencers, one fault and one crash per party (long: see the package doc)")
	flagStrict  = flag.Bool("mc.strict", false, "fingerprint parties by the order of their answers (prunes less, assumes less)")
	flagOnly    = flag.String("mc.only", "", "explore only the configurations whose K/W is this (e.g. 3/2)")
	flagSlots   = flag.Int("mc.slots", 0, "with -mc.full, chains of this many slots (1 to 4) instead of 4")
	flagConfig  = flag.String("mc.config", "", "explore this one configuration instead: K/W/slots/fencers/faults/crashes[/window] (e.g. 3/2/4/2/1/1; window 2 by default)")
	flagEvery   = flag.Int("mc.progress", 0, "log the search's size every this many executions (0: never)")
	flagWorkers = flag.Int("mc.workers", 1, "searches at once, sharing the states explored (the verdict does not depend on it)")
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// defaultConfigs fit the CI budget (under four minutes with -race on two
// busy cores); fullConfigs are the requirement's: every K/W, chains of 4
// slots, one writer and two fencers, an unreachable or lost answer and a
// crash of every party.
func defaultConfigs() []Config {
	return []Config{
		{K: 1, W: 1, Window: 2, Slots: 3, Fencers: 2, Faults: 0, Crashes: 0},
		{K: 1, W: 1, Window: 2, Slots: 2, Fencers: 2, Faults: 0, Crashes: 1},
		{K: 1, W: 1, Window: 2, Slots: 2, Fencers: 1, Faults: 1, Crashes: 1},
		{K: 2, W: 2, Window: 2, Slots: 1, Fencers: 2, Faults: 0, Crashes: 0},
		{K: 3, W: 2, Window: 2, Slots: 1, Fencers: 1, Faults: 1, Crashes: 0},
		{K: 3, W: 3, Window: 2, Slots: 1, Fencers: 1, Faults: 0, Crashes: 1},
	}
}

func fullConfigs() []Config {
	var out []Config
	for _, kw := range [][2]int{{1, 1}, {2, 2}, {3, 2}, {3, 3}} {
		out = append(out, Config{K: kw[0], W: kw[1], Window: 2, Slots: 4, Fencers: 2, Faults: 1, Crashes: 1})
	}
	return out
}

// TestGuarantees explores every configuration exhaustively within its
// bounds and requires guarantees 1 to 4 in every state reached, and every
// search complete. It logs a table of the search sizes.
func TestGuarantees(t *testing.T) {
	cfgs := defaultConfigs()
	if *flagConfig != "" {
		c := Config{Window: 2}
		n, err := fmt.Sscanf(*flagConfig, "%d/%d/%d/%d/%d/%d/%d", &c.K, &c.W, &c.Slots, &c.Fencers, &c.Faults, &c.Crashes, &c.Window)
		if n < 6 || (err != nil && n != 6) {
			t.Fatalf("-mc.config=%q: want K/W/slots/fencers/faults/crashes[/window]: %v", *flagConfig, err)
		}
		cfgs = []Config{c}
	} else if *flagFull {
		cfgs = fullConfigs()
		if n := *flagSlots; n != 0 {
			if n < 1 || n > 4 {
				t.Fatalf("-mc.slots=%d: the full configurations have 1 to 4 slots", n)
			}
			for i := range cfgs {
				cfgs[i].Slots = n
			}
		}
	}
	var rows []Result
	for _, c := range cfgs {
		if *flagOnly != "" && *flagOnly != fmt.Sprintf("%d/%d", c.K, c.W) {
			continue
		}
		c.Strict = *flagStrict
		c.Workers = *flagWorkers
		if n := *flagEvery; n > 0 {
			c.Progress = func(r Result) {
				t.Logf("%s: %d states, %d executions so far", c.Name(), r.States, r.Executions)
			}
			c.ProgressEvery = n
		}
		res, err := Explore(t, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		rows = append(rows, res)
		if res.Violation != nil {
			t.Errorf("%s: %v", c.Name(), res.Violation)
			continue
		}
		if !res.Complete {
			t.Errorf("%s: the search did not finish (%d executions)", c.Name(), res.Executions)
		}
		if res.States == 0 || res.Terminal == 0 {
			t.Errorf("%s: explored %d states and %d complete executions: nothing was checked", c.Name(), res.States, res.Terminal)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no configuration matches -mc.only=%q", *flagOnly)
	}
	t.Log("\n" + table(rows))
}

// table formats search results, one row per configuration.
func table(rows []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-4s %5s %6s %7s %6s %7s %10s %10s %9s %9s %8s %6s %9s\n",
		"K/W", "slots", "window", "fencers", "faults", "crashes", "states", "executions", "pruned", "terminal", "deferred", "depth", "time")
	for _, r := range rows {
		c := r.Config
		fmt.Fprintf(&b, "%-4s %5d %6d %7d %6d %7d %10d %10d %9d %9d %8d %6d %8.1fs\n",
			fmt.Sprintf("%d/%d", c.K, c.W), c.Slots, c.Window, c.Fencers, c.Faults, c.Crashes,
			r.States, r.Executions, r.Pruned, r.Terminal, r.Deferred, r.MaxDepth, r.Took.Seconds())
	}
	return b.String()
}

// TestReductionAgrees checks the partial-order reductions and the
// per-request fingerprint against the plain search (no reduction, strict
// fingerprint) on configurations small enough for it. Every search must
// pass, and all must reach exactly the same outcomes (final states of the
// zones, the record and the parties' results). Without the delivery of
// stable requests alone, the reduced search must also reach exactly the
// states the plain one does, as the checks see them (see observation);
// with it, every state it skips must be subsumed by one it reaches: every
// check that fails in the first fails in the second.
func TestReductionAgrees(t *testing.T) {
	cfgs := []Config{
		{K: 1, W: 1, Window: 1, Slots: 1, Fencers: 2, Faults: 0, Crashes: 1},
		{K: 1, W: 1, Window: 1, Slots: 2, Fencers: 1, Faults: 0, Crashes: 1},
		// Without crashes, states in the middle of an execution differ
		// from every final one (with them, crashing every party at any
		// point makes it final).
		{K: 1, W: 1, Window: 2, Slots: 2, Fencers: 2},
		{K: 2, W: 1, Window: 1, Slots: 1, Fencers: 1, Faults: 1},
	}
	if *flagFull {
		// A fault decided too early (before the writer's slot is decided
		// by another zone instead of after) shows here: about a minute
		// under -race, too long for the default run.
		cfgs = append(cfgs, Config{K: 2, W: 1, Window: 1, Slots: 1, Fencers: 1, Faults: 1, Crashes: 1})
	}
	for _, c := range cfgs {
		plain, unstable := c, c
		plain.NoReduce, plain.Strict = true, true
		unstable.noStable = true
		names := []string{"reduced", "reduced without stable delivery", "plain"}
		var finals [3]map[string]bool
		var observed [3]map[string]observation
		for i, cfg := range []Config{c, unstable, plain} {
			cfg.finals, cfg.observed = map[string]bool{}, map[string]observation{}
			res, err := Explore(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Violation != nil || !res.Complete {
				t.Fatalf("%s, %s: violation %v, complete %v", c.Name(), names[i], res.Violation, res.Complete)
			}
			finals[i], observed[i] = cfg.finals, cfg.observed
			t.Logf("%s, %s: %d states, %d executions, %d distinct outcomes, %d states as the checks see them",
				c.Name(), names[i], res.States, res.Executions, len(cfg.finals), len(cfg.observed))
		}
		for i := range 2 {
			for f := range finals[2] {
				if !finals[i][f] {
					t.Errorf("%s: the plain search reaches an outcome the %s one misses:\n%s", c.Name(), names[i], f)
				}
			}
			for f := range finals[i] {
				if !finals[2][f] {
					t.Errorf("%s: the %s search reaches an outcome the plain one does not:\n%s", c.Name(), names[i], f)
				}
			}
			for k := range observed[i] {
				if _, ok := observed[2][k]; !ok {
					t.Errorf("%s: the %s search reaches a state the plain one does not, as the checks see it:\n%s", c.Name(), names[i], k)
				}
			}
		}
		skipped, subsumed := 0, 0
		for k, m := range observed[2] {
			if _, ok := observed[1][k]; !ok {
				t.Errorf("%s: the plain search reaches a state the %s one misses, as the checks see it:\n%s", c.Name(), names[1], k)
			}
			if _, ok := observed[0][k]; ok {
				continue
			}
			skipped++
			found := false
			for _, o := range observed[0] {
				if o.subsumes(m) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: the reduced search skips a state that none of its states subsumes:\n%s", c.Name(), k)
				continue
			}
			subsumed++
		}
		t.Logf("%s: the reduced search skips %d states as the checks see them, %d of them subsumed", c.Name(), skipped, subsumed)
	}
}

// TestWorkersAgree checks the parallel search against the sequential one:
// without the fencers' symmetry (which makes the search's size depend on
// the order in which it meets mirror-image states), both must explore
// exactly the same states, end in the same terminal and deferred states,
// and every worker must have taken part.
func TestWorkersAgree(t *testing.T) {
	c := Config{K: 1, W: 1, Window: 1, Slots: 1, Fencers: 2, Crashes: 1, NoSymmetry: true}
	var res [2]Result
	for i, n := range []int{1, 2} {
		c.Workers = n
		r, err := Explore(t, c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation != nil || !r.Complete {
			t.Fatalf("%d workers: violation %v, complete %v", n, r.Violation, r.Complete)
		}
		if len(r.WorkerExecutions) != n {
			t.Fatalf("%d workers: executions per worker %v", n, r.WorkerExecutions)
		}
		for w, e := range r.WorkerExecutions {
			if e == 0 {
				t.Errorf("%d workers: worker %d ran no execution", n, w)
			}
		}
		res[i] = r
		t.Logf("%d workers: %d states, executions %v", n, r.States, r.WorkerExecutions)
	}
	if a, b := res[0], res[1]; a.States != b.States || a.Terminal != b.Terminal || a.Deferred != b.Deferred {
		t.Errorf("1 worker: %d states, %d terminal, %d deferred; 2 workers: %d, %d, %d", a.States, a.Terminal, a.Deferred, b.States, b.Terminal, b.Deferred)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, c := range []Config{
		{K: 2, W: 3, Window: 1, Slots: 1},
		{K: 1, W: 1, Window: 0, Slots: 1},
		{K: 1, W: 1, Window: 1, Slots: MaxSlots + 1},
		{K: 1, W: 1, Window: 1, Slots: 1, Faults: -1},
		{K: 1, W: 1, Window: 1, Slots: 1, Workers: -1},
		{K: 1, W: 1, Window: 1, Slots: 1, Workers: MaxWorkers + 1},
	} {
		_, err := Explore(t, c)
		var ce *cutline.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, cutline.ErrInvalid) {
			t.Errorf("%+v: got %v, want a *cutline.ConfigError", c, err)
		}
	}
}
