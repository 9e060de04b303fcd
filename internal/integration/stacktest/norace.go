//go:build !race

package stacktest

// Race: the test binary runs without the race detector.
const Race = false
