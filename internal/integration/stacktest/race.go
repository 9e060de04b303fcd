//go:build race

package stacktest

// Race: the test binary runs with the race detector, so the processes it
// builds get it too (and reuse the race build cache).
const Race = true
