// Package takeover holds the tests that run cutline's takeover and roll
// paths on real processes: an embedded etcd server (etcdtest) for the
// metastore and one versitygw S3 server process per zone
// (testservers.StartVersityGW) for the buckets. The faults are real too: a
// zone's server process is killed and restarted mid-append, and the etcd
// member is stopped and restarted while appends, rolls and fences run.
//
// After the faults, the tests check the guarantees stated once, in the
// README ("Guarantees"): each fenced epoch with cutlinetest's
// Env.VerifyEpoch, which reads every zone's server directly, and, where a
// test records what its producers saw in a History, the whole run with
// cutlinetest.Check.
//
// The tests:
//
//   - TestTakeoverEtcdS3: star A appends through a pipelined chain.Writer
//     (K=3, W=2) while its host covers acknowledged flights and advances the
//     checkpoint; a zone is killed mid-run and appends keep being
//     acknowledged; A dies mid-flight; star B fences and settles A's epoch
//     (once with the zone restarted first, once with the fence left
//     undecided until the zone comes back), then appends the producer's
//     unacknowledged records in its own epoch. A zombie incarnation of A
//     holding its stale record cannot build a writer on it (the minted
//     record's claim is taken, a record read back is refused), and the PUTs
//     it lands late past the cut are never served.
//   - TestTakeoverAcrossCompaction: etcd is compacted between the pages of
//     the successor's lists (epoch records, refs) while it settles and
//     reads; every list restarts at the current revision and the takeover
//     keeps every guarantee.
//   - TestRollEtcdS3: a roll.Roller makes planned rolls (W and window
//     changes) and rolls after halts caused by poison placed ahead of it; the
//     producer sees only acknowledgements, and the chain holds every record
//     once, in submission order, at the expected positions.
//   - TestEtcdRestartDuringAppends: the etcd member is stopped by a fence at
//     the moment it publishes its cut, while a Roller appends; metastore
//     calls answer metastore.ErrUnavailable (never "not found"), appends keep
//     being acknowledged, a roll requested during the outage completes after
//     the restart, and the fence retried afterwards publishes the same cut.
//   - TestDemoOnEtcdAndS3: the takeover demonstration (examples/broker/demo,
//     the broker module's second command), built and run as a separate process
//     against the embedded etcd and three versitygw zones.
//
// When the servers cannot be started the tests are skipped, except with
// CI=true, where they fail.
package takeover
