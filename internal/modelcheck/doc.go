// Package modelcheck is an exhaustive model checker of guarantees 1 to 4
// (README, "Guarantees") over the real fence and writer: package chain's
// Writer and package fence's Fencer run unchanged, and a scheduler that
// owns every request they send explores every order in which those
// requests can be answered, failed or cut short by a crash.
//
// # The model
//
// One execution is one epoch, freshly minted on fresh in-memory stores
// (objstore/memblob zones, a metastore/memstore store), and three parties racing
// on it: a writer (chain.NewWriter on the minted record) that submits
// Config.Slots payloads, pipelined within the epoch's window, waits for
// their outcomes and closes; and Config.Fencers fencers (fence.New, then
// FenceReport of the epoch). Each party sees the zones, and a fencer the
// metastore, through wrappers in which every request (Create, Get,
// GetRange of an object; Get and Txn of the epoch record) registers
// itself as pending and blocks until the scheduler decides its fate:
//
//   - deliver: run it on the inner store and return the real answer;
//   - unreachable: do not run it, return an error matching
//     objstore.ErrUnavailable (metastore.ErrUnavailable);
//   - lost answer: run it, then return that error (creates and Txn only);
//   - crash the party: cancel its context; its pending requests and every
//     later one never get an answer (a crashed writer is aborted).
//
// Everything runs in one testing/synctest bubble. The scheduler waits
// until every goroutine of the bubble is durably blocked (synctest.Wait),
// collects the pending requests, takes one decision, and waits again.
// The parties' clock (backoff, undecided ages, record stamps) stands
// still and its timers fire at once: a backoff is just one more pending
// request, which the scheduler may hold as long as it likes, so no
// execution waits on time and every ordering a real delay could produce
// is still explored.
//
// Requests are named canonically (party, operation, zone, key), never by
// arrival, so replaying a prefix of decisions reproduces the same pending
// sets; a replay that does not is reported as a model error.
//
// # The search
//
// The search is depth first over decision sequences, re-running the real
// code from the start for every path (stateless model checking), with a
// visited set of state fingerprints. A fingerprint holds what every zone
// and the record hold, the fault budget spent, the writer's outcomes
// (acknowledged, failed, pending; release point; halt), each fencer's
// result, each party's pending requests, and, for a party still running,
// the answers it has received: per request by default, in arrival order
// with Config.Strict. A party that finished or crashed sends nothing more,
// so its answers are left out. The fencers' poison carries one identity,
// so the fencers are interchangeable and are fingerprinted as a set
// (Config.NoSymmetry fingerprints them one by one).
//
// Pruning at a visited fingerprint is sound when the parties' code is
// deterministic given the answers each party received, which it is up to
// goroutine scheduling inside a party: that is the assumption. With the
// default fingerprint it also assumes that a party's state depends on the
// answers of each of its requests and not on the order in which answers
// to its different requests arrived (the writer counts votes per slot
// and releases in slot order; a fencer fills a table of observations):
// -mc.strict drops that assumption, at the price of a larger search.
//
// Two partial-order reductions keep the search tractable (Config.NoReduce
// turns them off):
//
//   - Faults are decided once per request and per answer its party gets:
//     when a request is sent, and again each time its party gets another
//     answer while it waits (when no fault is left in the budget and the
//     party may no longer crash, there is nothing to decide). Withholding
//     an answer or crashing a party changes nothing another party can
//     see, and does not depend on when it happens between two answers of
//     the party (what the party makes of it does depend on its other
//     answers: a writer retries a create that failed before its slot was
//     decided, not after). A lost answer runs the request, so it stays an
//     option at every step.
//   - A request that is its party's only one, and whose answer cannot
//     change any more (an object that exists: objects are never
//     overwritten and no party of the model deletes; an object or the
//     record that nobody else can still write), is delivered at once,
//     alone. A read that is its party's only request and whose answer can
//     still change is either delivered now or deferred until what it
//     reads changes: a read changes nothing, so delivering it now stands
//     for delivering it at any later time with the same answer. An
//     execution left with a deferred read whose object can no longer
//     change ends there (counted as deferred): the branch that answered
//     the read at once covers it. Nobody creates past slot Config.Slots
//     (the writer writes below it and the walk stops at the first dead
//     slot); an execution in which somebody does is reported, since the
//     reduction relies on it.
//
// Delivering a stable request alone skips the states in which the other
// parties move on while it waits, but each of them is subsumed by a state
// that is explored: the same state with the request delivered. What it
// changes lies where no running party can write or read, so the other
// parties do the same either way; and a check fails on what exists, was
// acknowledged or was returned, so adding an object, a published cut or
// a fencer's result can make a check fail, never pass, except a count of
// copies or of poison, which a stable request only adds to where the
// state before it was checked already.
//
// TestReductionAgrees checks all of this on small models (and on one more
// with a fault and crashes under -mc.full) against the plain search with
// the strict fingerprint: all reach the same final states; without the
// delivery of stable requests alone, the reduced search reaches exactly
// the states the plain one does as the checks see them (the zones, the
// record, the acknowledgements, the writer's halt and the fencers'
// results); with it, every state it skips is subsumed by one it reaches.
//
// States are counted as distinct fingerprints, including the
// intermediate states in which a fault is being decided. The reductions
// pick which request to decide first by name, and two mirror-image states
// (the fencers' roles swapped) share one fingerprint, so the count varies
// by a percent or two with the order in which the search meets them; each
// such search is complete. With Config.NoSymmetry the count is exact:
// TestWorkersAgree checks that one worker and two explore the same states.
//
// Config.Workers runs that many searches at once, each in a synctest
// bubble of its own, sharing the fingerprints explored: a worker that
// records a state explores every decision there or hands the untried ones
// to a worker that waits for work (as paths from the start, which it
// replays), so the others may prune at it.
//
// # The checks
//
// In every new state, reading the inner stores directly:
//
//  1. every slot the writer acknowledged holds its flight, byte for byte
//     and verified, in at least W zones;
//  2. acknowledgements come in slot order, each at its own slot, and none
//     at or past a published cut;
//  3. every fencer that returned a cut returned the published one, a
//     fencer never reports a different cut (epoch.ErrCutMismatch), the
//     published cut holds poison in B = K−W+1 zones, the writer finds no
//     dead slot below it, and once published the record is never written
//     again (checked at every step);
//  4. every slot below a published cut holds W identical verified copies,
//     and the writer's flight in W zones.
//
// A fencer that returns fence.ErrUndecided, or whose metastore request
// went unanswered, returns no cut, which is not a violation; any other
// failure of a fencer or a halt of the writer other than chain.ErrFenced
// is reported as a model error, as is a party that neither finished nor
// waits for an answer, or an execution longer than Config.MaxDepth. The
// search stops at the first violation and reports it with its trace, one
// line per decision with the answer the party got.
//
// # Bounds and the long mode
//
// The state space grows fast with zones, slots, fencers and faults. The
// default run (go test -race ./internal/modelcheck/) explores, each
// exhaustively within its bounds, configurations that fit in about three
// minutes under -race on two busy cores:
//
//	K/W  slots  fencers  faults  crashes per party
//	1/1  3      2        0       0
//	1/1  2      2        0       1
//	1/1  2      1        1       1
//	2/2  1      2        0       0
//	3/2  1      1        1       0
//	3/3  1      1        0       1
//
// (window 2 throughout; faults counts unreachable or lost answers per
// execution, all parties together). Other configurations run with
// -mc.config=K/W/slots/fencers/faults/crashes, on several cores with
// -mc.workers=N, logging the search's size every N executions with
// -mc.progress=N:
//
//	go test -run TestGuarantees -timeout 0 ./internal/modelcheck/ -mc.config=3/2/1/2/1/1 -mc.workers=2
//
// The requirement's full configurations (every K/W in 1/1, 2/2, 3/2, 3/3;
// chains of 4 slots; one writer and two fencers; one unreachable or lost
// answer and one crash of every party per execution) run with -mc.full
// (add -mc.only=3/2 for one of them, -mc.slots=N for chains of N slots
// instead of 4, -mc.strict for the stricter fingerprint). Only 1/1 ends
// in reasonable time (3,240,870 states). With two zones the search grew
// 168-fold from a chain of one slot to a chain of two: 2/2 with two
// fencers and no fault explores 12,351 states at one slot and 2,069,354
// at two (17 minutes). At one slot, a fault and a crash of every party
// multiply it by 50 (623,708 states). What grows is not the number of
// orders of the same steps, which a reduction could merge, but the
// number of different things one fencer can have seen (for each object it
// reads, whether the writer's create came first): with one fencer, 2/2
// explores 195, 3,875, 36,879 and 322,983 states at one to four slots,
// and two fencers multiply what each can see. If each further slot
// multiplied the search alike, four slots would come to some 3·10¹²
// states: a table of their fingerprints alone outgrows any one machine's
// memory, and the search would take years at a few thousand states a
// second.
//
// Planted variants of the fence and the writer (internal/planted) are
// tried by TestPlanted:
//
//	go test -race -tags cutline_planted -run Planted ./internal/modelcheck/
package modelcheck
