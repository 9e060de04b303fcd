// Package benchfix holds the fixtures that the benchmarks of several
// packages and the bench command (cmd/cutline-bench) share, so that a
// figure in the command and the micro-benchmark it mirrors measure the
// same thing:
//
//   - Discard, a bucket that accepts every create and keeps nothing, for
//     measuring a writer's memory rather than the storage's;
//   - Zones, Count and Reset: in-memory zones behind request counters and
//     an optional fixed latency, and the requests they answered by kind;
//   - LayRaggedEpoch: a dead writer's epoch, committed slots followed by a
//     ragged pipelined tail, covered and checkpointed up to a lag, which a
//     successor's takeover (fence and settle) then finishes.
//
// It is for benchmarks and the bench command only; nothing in the library
// depends on it.
package benchfix
