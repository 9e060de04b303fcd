package sim

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestSim runs simSeedsDefault seeds by default; -sim.seeds=N (or
// CUTLINE_SIM_SEEDS=N) runs seeds 1..N, -sim.seed=S runs seed S alone.
var (
	flagSeeds = flag.Int("sim.seeds", 0, "number of whole-system simulation seeds (default $CUTLINE_SIM_SEEDS or 2000)")
	flagSeed  = flag.Uint64("sim.seed", 0, "run only this whole-system simulation seed")
)

const (
	simSeedsDefault = 2000
	// watchdog bounds one seed in real time (a seed takes well under a
	// second, even with -race on a loaded machine).
	watchdog = 2 * time.Minute
)

func seeds(t *testing.T) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	n := *flagSeeds
	if n == 0 {
		if v := os.Getenv("CUTLINE_SIM_SEEDS"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil {
				t.Fatalf("CUTLINE_SIM_SEEDS: %v", err)
			}
		}
	}
	if n <= 0 {
		n = simSeedsDefault
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// result is what one seed's run found.
type result struct {
	failed bool
	msgs   []string
}

// simulate runs seed in a bubble of its own and returns what it found.
func simulate(t *testing.T, seed uint64, cov *coverage) result {
	var res result
	// A bubble that stops moving (a goroutine blocked on a mutex forever
	// is not durably blocked, so its clock stands still) ends the process
	// with the seed, instead of a silent timeout.
	dog := time.AfterFunc(watchdog, func() {
		panic(fmt.Sprintf("seed %d did not end within %v of real time; reproduce: %s", seed, watchdog, reproduce(seed)))
	})
	defer dog.Stop()
	synctest.Test(t, func(bt *testing.T) {
		rec := &recorder{TB: bt}
		done := make(chan struct{})
		go func() {
			defer close(done)
			runSeed(rec, seed, cov)
		}()
		<-done
		res.failed, res.msgs = rec.Failures()
	})
	return res
}

func reproduce(seed uint64) string {
	return fmt.Sprintf("go test -race -run TestSim ./internal/sim/ -sim.seed=%d", seed)
}

// TestSim runs the whole-system simulator over the seeds, checking every
// guarantee after each run, and reports the coverage of event kinds and
// the seeds per second.
func TestSim(t *testing.T) {
	ss := seeds(t)
	var cov coverage
	start := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range ss {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				var local coverage
				res := simulate(t, seed, &local)
				cov.merge(&local)
				if res.failed {
					t.Errorf("seed %d failed: %s\nreproduce: %s", seed, strings.Join(res.msgs, "\n"), reproduce(seed))
				}
			})
		}
	})
	took := time.Since(start)
	t.Logf("%d seeds in %.1fs: %.1f seeds/s", len(ss), took.Seconds(), float64(len(ss))/took.Seconds())
	t.Logf("coverage: %v", &cov)
	if len(ss) >= simSeedsDefault {
		for _, k := range append(requiredKinds, lifecycleKinds...) {
			if cov.get(k) == 0 {
				t.Errorf("no run reached %s", k)
			}
		}
	}
}
