// Package crashpoint crashes the protocol at every mutating storage
// request its steps make, and checks that a host recovers with every
// guarantee intact.
//
// # Sites, enumerated from the code
//
// Enumerate type-checks the non-test files of the production packages
// (Packages: epoch, chain, fence, settle, roll, lease) and lists every
// call site of a mutating storage request: objstore.Bucket's Create and Delete,
// metastore.Store's Txn and NewSession, metastore.Session's Close, a
// mutating method of a type of the module that implements one of those
// interfaces (a wrapper), and a call of an exported shorthand of package
// objstore or metastore that makes one (metastore.Put, PutBound, Delete).
// A site is named by its enclosing declared function and the call, with
// an ordinal from the second call of the same kind in one function:
//
//	fence.(*walk).poison → Bucket.Create
//	lease.(*Star).acquire → metastore.PutBound #2
//
// Names carry no line numbers, so edits elsewhere in a file do not churn
// them. A call inside a function literal belongs to the function that
// declares the literal; a function reached from several steps is one site
// (epoch.(*Minter).update, behind the cut's publication, the settled mark
// and every cursor move).
// A call in a branch guarded by planted.On is Planted: compiled out of a
// normal build, listed but not required. Lease/authority is not
// enumerated: its writes (the controller's election, grants) decide who
// holds a domain of streams, not what a chain holds, and every write it
// makes to a chain's records goes through the enumerated packages.
//
// # Crashing a request
//
// A Switch is one process's crash switch. Its Bucket and Store wrappers
// attribute every mutating request to its site (Table.Caller: the
// innermost frame of the stack inside an enumerated package is the
// site's function, the frame it called names the call, and the line
// tells apart two calls of one kind in one function) and to the step
// that reached it (Via: the outermost frame in an enumerated package,
// such as settle.(*Settler).Trim or lease.(*Star).Open, or the
// goroutine that made the request on the step's behalf). It counts each
// site-and-step Path and at the Target (a path, its Nth request, a Mode)
// crashes the process: Before, the request never arrives; After, it is
// carried out and its answer is lost. From
// then on every request of the process fails as unavailable and the
// contexts it Bound are cancelled. A request from no enumerated site is
// recorded in Unattributed: the enumeration missed a call path.
//
// # The test
//
// TestCrashPoints runs each scenario once without a crash (a dry run that
// must complete, and tells which paths it reaches and how often), then
// again for each path it reached, at every request when there are at
// most five, else at the first two, the middle and the last two, in both
// modes. Pipelined appends make some counts vary from run to run (how
// many flights a halted writer had in flight): a target a run does not
// reach is logged and counted, not failed. After each
// crash a host recovers as it would in production (a successor fences
// and settles, a new incarnation opens its Roller, another star takes the
// streams over through the open gate, the step runs again) and the run is
// checked: cutlinetest.Check over the run's History (guarantees 1–6), or
// Env.CheckEpoch where trimming removed records on purpose, and a read
// back of every acknowledged record. The test fails unless every live
// enumerated site was crashed in both modes, naming each one that was
// not, and logs "crash points: covered X of Y enumerated (Z runs)". Every
// run lives in a testing/synctest bubble: no real time passes.
//
// # Adding a crash case for a new step
//
// A new mutating call in a production package is a new site: the test
// fails, naming it, until a scenario reaches it. To cover it:
//
//  1. Find a scenario in scenario_test.go whose flow can take the new
//     step (write, takeover, trim, roll, lease), or add one to scenarios.
//  2. Make the step's party the process: build it with newProcess over
//     the Switch (its store and zones pass through the switch) and run
//     the step with a context from Switch.Bind. A step that fails is
//     allowed only when the process crashed (crashed).
//  3. After the process ran or crashed, recover as a host would, with
//     parties that do not crash, and check: cutlinetest.Check with the
//     run's History, or Env.CheckEpoch and a read back.
//  4. Run go test -race -run TestCrashPoints ./internal/crashpoint/: the
//     dry run must reach the site, and every crash of it must recover.
//
// When a new step makes its request through a function of a package
// outside the enumerated ones, add that package to the enumeration (or
// call the storage from the step itself): the dry run reports such a
// request as unattributed.
package crashpoint
