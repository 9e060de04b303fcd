//go:build !cutline_planted

package planted

// Enabled reports whether this build can plant variants: false, so every
// planted branch is dead code and compiled out.
const Enabled = false

// On reports whether variant b is planted: never, in a normal build.
func On(Bug) bool { return false }
