// Package latency wraps an objstore.Bucket so that every call takes time:
// a fixed delay or one drawn from a seeded distribution, per operation. It
// turns an in-memory bucket into a model of a remote zone, for tests of
// pipelining, timeouts and racing writers, and for benchmarks that compare
// the library's throughput with the raw bucket's under the same latency.
//
// Every delay waits on an injected clock.Clock: with a clock.Fake a test
// moves time by hand (clock.Fake.BlockUntil tells it that a call is
// waiting), and under testing/synctest the real clock is virtual. Nothing
// sleeps for real in tests.
//
// The delay comes before the call reaches the inner bucket: a call whose
// context ends during the wait returns the context's error at once and has
// no effect. (A request that lands although its caller gave up is a fault;
// see objstore/fault, LostAnswer and Straggler.) Invalid keys are refused
// without delay, as every backend refuses them locally.
//
// Distributions: Fixed, Uniform, Normal (cut off at zero) and LogNormal
// (long-tailed, given its p50 and p99), or any type with a Sample method.
// Options.Default applies to operations without their own. With no
// distributions at all the wrapper adds nothing and passes the conformance
// suite (objstore/objstoretest) like its inner bucket.
//
//	zone := latency.Wrap(memblob.New("zone-a"), latency.Options{
//		Clock:   fake,
//		Seed:    7,
//		Create:  latency.Normal(8*time.Millisecond, 2*time.Millisecond),
//		Default: latency.Uniform(2*time.Millisecond, 4*time.Millisecond),
//	})
package latency
