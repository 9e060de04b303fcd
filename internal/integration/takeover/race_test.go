//go:build race

package takeover_test

// raceEnabled: the test binary runs with the race detector, so the
// demonstration is built with it too (and reuses the race build cache).
const raceEnabled = true
