// Package fault wraps an objstore.Bucket to inject the failures that object
// storage produces in production, deterministically, for tests of code
// that must stay correct through them (and for simulators that replay a
// failing seed).
//
// A wrapped bucket with no rules and not down behaves exactly like the
// inner bucket and passes the conformance suite (objstore/objstoretest).
// Calls with a done context or an invalid key are answered locally first,
// as every backend does; faults apply to the rest.
//
// # Faults
//
//   - Down: SetDown(true) takes the whole bucket (a zone) down. Every call
//     fails with an error matching objstore.ErrUnavailable and ErrDown, and
//     nothing reaches the inner bucket, until SetDown(false).
//   - Fail: a Rule that fires answers its error (objstore.ErrUnavailable by
//     default) without calling the inner bucket: the request was lost on
//     the way.
//   - LostAnswer: the call is carried out by the inner bucket, then its
//     answer is replaced by the error: a Create that landed although the
//     caller saw a timeout, a Delete that deleted.
//   - Straggler: a Create answers the error at once but keeps the write
//     back; it lands later, when the test calls ReleaseStragglers, or on its
//     own after Options.StragglerDelay on Options.Clock (a clock.Fake or
//     testing/synctest keeps that deterministic). A straggler lands through
//     the inner Create, so it never overwrites: if a fencer took the key in
//     the meantime, the straggler fails, and Stats counts it.
//     DropStragglers discards the queued ones instead.
//
// A Rule matches by operation (Op, "" for all), key prefix (Prefix) and
// path.Match pattern (Glob); for List the prefix argument is matched. It
// fires on every matching call, or with Probability, drawn from a
// generator seeded with Options.Seed, and at most Count times. Rules are
// tried in order; the first that fires decides. Every injected error is an
// *objstore.OpError that also matches ErrInjected.
//
// # Counting requests
//
// Stats reports, per operation, the calls received, the calls forwarded to
// the inner bucket and the calls answered with a fault, plus the fate of
// stragglers. Request counts do not depend on the machine, so tests and
// benchmarks can assert them ("a fence of an idle epoch reads 3 objects per
// bucket").
//
// # Use
//
//	zones := make([]*fault.Bucket, 3)
//	for i := range zones {
//		zones[i] = fault.Wrap(memblob.New(fmt.Sprintf("zone-%d", i)), fault.Options{Seed: seed})
//	}
//	zones[2].SetDown(true)
//	_ = zones[0].AddRule(fault.Rule{Op: fault.OpCreate, Kind: fault.Straggler, Count: 1})
//	... run the writer and the fencer ...
//	zones[0].ReleaseStragglers(ctx)
//
// Wrap panics on an invalid rule (rules are written by tests); AddRule
// returns the error instead.
package fault
