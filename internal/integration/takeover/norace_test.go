//go:build !race

package takeover_test

// raceEnabled: the test binary runs without the race detector.
const raceEnabled = false
