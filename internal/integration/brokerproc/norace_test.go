//go:build !race

package brokerproc_test

// raceEnabled: the test binary runs without the race detector.
const raceEnabled = false
