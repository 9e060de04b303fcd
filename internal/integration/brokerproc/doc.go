// Package brokerproc holds the test that runs the examples/broker command
// as real processes: the test builds the broker, starts an embedded etcd
// member (etcdtest) for the metastore and one versitygw S3 server process
// per zone (testservers.StartVersityGW), makes a CA and the certificates
// of every process (each broker's names its node with the URI SAN
// cutline://node/<name> and serves 127.0.0.1), and starts a controller
// process and three broker processes on free loopback ports. The brokers
// vote and run direct health links with each other (-peers), with 20 ms
// of latency injected before every zone request (-latency).
//
// TestBrokerFailover drives load from producers in the test (producer ids
// and sequences, two streams, each record retried with its sequence until
// acknowledged, at the holder a 503 names) and makes the holder fail
// twice:
//
//   - kill -9: a successor is granted, the producers continue there, and
//     the time from the kill to the successor's first acknowledged append
//     is logged with its split (grant ended, successor granted, first
//     acknowledgement); the killed broker is then started again;
//   - SIGSTOP, with an append of the test in flight: the stopped holder (a
//     zombie whose control channel stays open) loses its grant through
//     the fast fence, a successor is granted and acknowledges, and the
//     zombie, continued with SIGCONT, acknowledges no produce, neither one
//     queued while it was stopped nor one sent after. The controller's
//     lease is 20 s, so that the zombie still believes its grant valid
//     when it continues.
//
// TestBrokerFaults runs the same cluster through the faults of a real
// deployment, one after the other, with the producers appending
// throughout: zone c's S3 process is killed mid-append (appends go on at
// W=2); the holder is killed with zone c down (the successor's fence, and
// a fence of the test's own, decide a cut at or above every
// acknowledgement or report fence.ErrUndecided, never a guess); zone c's
// process is started again; the embedded etcd member is stopped and
// started again; and a holder is stopped (SIGSTOP) during its takeover
// and continued afterwards, acknowledging nothing more. Then every stream
// is read back, every acknowledged record exactly once and in order,
// cutlinetest.Check runs over the zones' and etcd's raw contents with a
// History built from the producers' acknowledgements (guarantees 1–6),
// and every fenced epoch of the three brokers is checked on its own
// (Env.CheckEpoch).
//
// At the end of TestBrokerFailover every stream is read back through the
// holder and through the zombie: every acknowledged record is there exactly once, at the
// offset its acknowledgement gave, and nothing else is; the holder's
// metrics moved across its takeover (append latency, gate decisions,
// grant changes, the fence and settlement of the zombie's epoch), and no
// process reported a data race. No wall-clock bound is asserted: the
// failover times are logged.
//
// Each process's output goes to a file, printed when the test fails, or
// always with BROKERPROC_LOGS=1. When the servers cannot be started the
// test is skipped, except with CI=true, where it fails; a broker process
// that does not start fails it.
package brokerproc
