package fence

import (
	"strings"
	"testing"

	"github.com/cutline/cutline/chain/wire"
)

// obsOf turns "F P E U X" (flight, poison, empty, unreachable, foreign) into
// observations, one letter per bucket.
func obsOf(s string) []wire.Observation {
	var out []wire.Observation
	for _, c := range strings.Fields(s) {
		st := map[string]wire.SlotState{"F": wire.SlotFlight, "P": wire.SlotPoison, "E": wire.SlotEmpty, "U": wire.SlotUnreachable, "X": wire.SlotForeign}[c]
		out = append(out, wire.Observation{State: st})
	}
	return out
}

func TestClassify(t *testing.T) {
	cases := []struct {
		w    int
		obs  string
		want verdict
	}{
		// K=1, W=1, B=1
		{1, "F", committed},
		{1, "P", dead},
		{1, "E", poison},
		{1, "U", undecided},
		{1, "X", blocked},
		// K=2, W=2, B=1: one poison kills
		{2, "F F", committed},
		{2, "F E", repair},
		{2, "E F", repair},
		{2, "F P", dead},
		{2, "P E", dead},
		{2, "E E", poison},
		{2, "F U", undecided},
		{2, "E U", poison},
		{2, "U U", undecided},
		{2, "F X", blocked},
		{2, "X E", poison},
		// K=3, W=2, B=2
		{2, "F F E", committed},
		{2, "F F P", committed},
		{2, "F F U", committed},
		{2, "F E E", repair},
		{2, "F P E", repair},
		{2, "E P F", repair},
		{2, "F P U", undecided}, // the frontier case: the third zone decides
		{2, "F U U", undecided},
		{2, "F U E", repair}, // one short of quorum: repair, never poison
		{2, "P E E", poison},
		{2, "P U E", poison},
		{2, "E E E", poison},
		{2, "P P E", dead},
		{2, "P P F", dead},
		{2, "P P U", dead},
		{2, "P U U", undecided},
		{2, "U U U", undecided},
		{2, "F P X", blocked},
		{2, "P X X", blocked},
		{2, "X E E", poison},
		{2, "F X E", repair},
		// K=5, W=3, B=3
		{3, "F F F E E", committed},
		{3, "F F E E E", repair},
		{3, "F P P E E", repair},
		{3, "P P P E E", dead},
		{3, "P P P F F", dead},
		{3, "P P E E E", poison},
		{3, "F F P P U", undecided},
		{3, "F F P P X", blocked},
		{3, "P P U U E", poison},
		{3, "P P U U U", undecided},
		{3, "E E E E E", poison},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.obs, " ", "")+"_W"+string(rune('0'+c.w)), func(t *testing.T) {
			if got := classify(obsOf(c.obs), c.w); got != c.want {
				t.Fatalf("K=%d W=%d %q: got %v, want %v", len(obsOf(c.obs)), c.w, c.obs, got, c.want)
			}
		})
	}
}
