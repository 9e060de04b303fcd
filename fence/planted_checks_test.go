//go:build cutline_planted

package fence

import (
	"fmt"
	"testing"

	"github.com/cutline/cutline/internal/planted"
)

// PlantedChecks are this package's checks, as TestPlanted (package
// fence_test) runs them against every planted variant: the scenario
// tables, the racing publication, the barrier's lead, writer races and
// seeds of the simulator. Each fails t as the test it comes from does.
func PlantedChecks(seeds int) []planted.Check {
	return []planted.Check{
		{Name: "fence scenario tables", Run: func(t testing.TB) {
			for _, c := range scenarios() {
				planted.Step(t, "scenario %q", c.name)
				runScenario(t, newEnv(t, c.k, c.w, 4), c)
			}
			planted.Step(t, "late fencer adopts the published cut")
			lateFencerAdopts(t, newEnv(t, 3, 2, 4))
		}},
		{Name: "racing publication", Run: racingPublication},
		{Name: "barrier lead", Run: barrierLead},
		{Name: "retried create meets poison", Run: retriedCreateMeetsPoison},
		{Name: "writer races", Run: func(t testing.TB) {
			for _, c := range []struct {
				k, w, window int
				after        uint64
			}{{3, 2, 4, 0}, {3, 2, 17, 51}, {1, 1, 4, 2}, {5, 3, 8, 4}} {
				planted.Step(t, "writer race K=%d W=%d window=%d after=%d", c.k, c.w, c.window, c.after)
				e := newEnv(t, c.k, c.w, c.window)
				raceWriter(t, e, e.view(nil), e.view(nil), c.after)
			}
		}},
		{Name: fmt.Sprintf("fence simulator (%d seeds)", seeds), Run: func(t testing.TB) {
			var st simStats
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				planted.Step(t, "seed %d (go test -tags cutline_planted -run TestSimulation -fence.seed=%d)", seed, seed)
				runSim(t, pickConfig(seed), &st)
				if t.Failed() {
					return
				}
			}
		}},
	}
}
