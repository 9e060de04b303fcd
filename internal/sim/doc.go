// Package sim holds the whole-system simulator, in its tests: one seeded
// run drives stars (lease.Star) appending to streams, racing fencers,
// settlers, rolls, takeovers through the open gate, Finish, and crashes of
// any of them, over fault-injecting zones (objstore/fault: failed requests,
// lost answers of writes that landed, stragglers that land after a fence,
// zone outages, corrupt copies, latency) and the in-memory metastore
// (partitions, session expiry), all on the virtual clock of a
// testing/synctest bubble. After every run it checks every guarantee
// (cutlinetest.Check over the run's History) and reads every stream back:
// every acknowledged record exactly once.
//
//	go test -race -run TestSim ./internal/sim/                   # the CI seeds
//	go test -race -run TestSim ./internal/sim/ -sim.seeds=20000  # a long run
//	go test -race -run TestSim ./internal/sim/ -sim.seed=N       # one seed
//	go test -race -tags cutline_planted -run TestSimPlanted ./internal/sim/
//
// A failing seed prints the one-line command that reruns it.
package sim
