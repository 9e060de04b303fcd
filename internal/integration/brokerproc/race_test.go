//go:build race

package brokerproc_test

// raceEnabled: the test binary runs with the race detector, so the broker
// is built with it too (and reuses the race build cache).
const raceEnabled = true
