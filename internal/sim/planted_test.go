//go:build cutline_planted

package sim

import (
	"testing"
	"time"

	"github.com/cutline/cutline/internal/planted"
)

// plantedSeeds bounds the seeds tried against each planted variant.
const plantedSeeds = 300

// TestSimPlanted shows that the simulator can fail: under each planted
// variant it must find a failing seed among the first plantedSeeds.
func TestSimPlanted(t *testing.T) {
	if planted.Active() != planted.None {
		t.Fatalf("variant %v is planted for the whole run (CUTLINE_PLANTED)", planted.Active())
	}
	// must are the variants the simulator must catch; the others are
	// tried and reported, not required (the fence's and writer's own
	// planted checks catch them).
	must := []planted.Bug{planted.AckBelowQuorum, planted.SettleBelowCut}
	bugs := append(must, planted.AckOutOfOrder, planted.CutPlainPut)
	caught := 0
	for i, b := range bugs {
		restore := planted.Set(b)
		start := time.Now()
		var by uint64
		var msg string
		for seed := uint64(1); seed <= plantedSeeds && by == 0; seed++ {
			var cov coverage
			if res := simulate(t, seed, &cov); res.failed {
				by, msg = seed, res.msgs[0]
			}
		}
		restore()
		if by == 0 {
			if i < len(must) {
				t.Errorf("planted %v: not caught by seeds 1..%d", b, plantedSeeds)
			} else {
				t.Logf("planted %v: not caught by seeds 1..%d (not required)", b, plantedSeeds)
			}
			continue
		}
		caught++
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		t.Logf("planted %v: caught by seed %d (%.1fs): %s", b, by, time.Since(start).Seconds(), msg)
	}
	t.Logf("caught %d of %d planted", caught, len(bugs))
}
