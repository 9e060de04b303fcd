//go:build cutline_planted

package planted

import (
	"os"
	"sync/atomic"
)

// Enabled reports whether this build can plant variants: built with the
// cutline_planted tag, it can.
const Enabled = true

var active atomic.Int64

func init() {
	// CUTLINE_PLANTED=<name> plants one variant for a whole test run, to
	// see how the ordinary tests fail under it.
	if b, ok := Parse(os.Getenv("CUTLINE_PLANTED")); ok {
		active.Store(int64(b))
	}
}

// On reports whether variant b is planted now.
func On(b Bug) bool { return Bug(active.Load()) == b }

// Active returns the variant planted now (None when none is).
func Active() Bug { return Bug(active.Load()) }

// Set plants b (None plants nothing) until restore is called. One variant
// is planted at a time, for the whole process: tests that plant run one
// after another, never in parallel.
func Set(b Bug) (restore func()) {
	old := active.Swap(int64(b))
	return func() { active.Store(old) }
}
