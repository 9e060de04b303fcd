// Package planted keeps deliberately broken variants of the protocol, so
// that a test can show that the checks catch each of them.
//
// Every variant is one small change at the real code site, guarded by
//
//	if planted.On(planted.CutPlainPut) { … }
//
// In a normal build On is a constant false (off.go), so the compiler
// removes the guarded code: nothing planted ships. Built with the
// cutline_planted tag (on.go), a test selects one variant at a time with
// Set and runs the checks that must catch it (TestPlanted in package
// fence hunts the Core variants):
//
//	go test -race -tags cutline_planted -run Planted ./fence/
//
// CUTLINE_PLANTED=<name> plants one variant for a whole run of the
// ordinary tests instead. Each variant names the packages whose tests
// must then fail (Bug.CaughtBy), and scripts/planted.sh requires each of
// those runs, with -failfast, to end in a FAIL within a minute: a test
// that hangs on a variant instead of failing hides what failed.
//
//	CUTLINE_PLANTED=dead-at-b-1 go test -tags cutline_planted -failfast -skip TestPlanted ./fence/
//	scripts/planted.sh dead-at-b-1 token-truncated
package planted

// Bug names one planted variant. The zero Bug is none.
type Bug int

// The planted variants. Each comment says what the variant does instead of
// the real protocol, and where.
const (
	None Bug = iota
	// CutPlainPut: the cut is published by a plain put of the record the
	// fencer read, instead of a compare-and-set of its revision
	// (epoch.Minter.Publish).
	CutPlainPut
	// BarrierOneWindow: a fence chasing a live writer plants its barrier
	// one window ahead of its frontier instead of 2·window+1 (fence walk).
	BarrierOneWindow
	// RepairUnverified: the fence counts and repairs copies by their
	// header, without reading them whole and verifying their checksum, so
	// a corrupt body is copied into every empty zone (fence walk, repair).
	RepairUnverified
	// PoisonNoReobserve: after a poison create the fence does not read
	// the slot again; it counts its create as poison, whatever the bucket
	// answered (fence walk, decideSlot).
	PoisonNoReobserve
	// UnreachableAsEmpty: a bucket that does not answer is read as holding
	// nothing at the slot (wire.ObserveHeader, wire.ObserveObject).
	UnreachableAsEmpty
	// WalkAboveHole: the walk starts at the estimate minus the window
	// trusting the estimate's copy without reading it whole, so a corrupt
	// copy past the end starts it above a hole (fence, FenceReport).
	WalkAboveHole
	// AckOutOfOrder: the writer acknowledges a slot as soon as it is
	// committed, before the slots below it (chain writer, vote).
	AckOutOfOrder
	// AckBelowQuorum: the writer counts a slot committed at W−1 copies
	// (chain writer, vote; W=1 stays at 1).
	AckBelowQuorum
	// LostCreateCounted: a create retried after its answer was lost that
	// finds an object there counts it as the writer's copy without reading
	// it back (chain writer, runBucket).
	LostCreateCounted
	// SettleBelowCut: settlement deletes the garbage from the slot below
	// the cut instead of from the cut (settle, deleteGarbage).
	SettleBelowCut
	// ReleaseShortPoison: a fence at a cleanly closed writer's release
	// point (fence.Fencer.FenceAt) counts the slot dead with poison in
	// B−1 buckets instead of B (fence, poisonRelease).
	ReleaseShortPoison
	// DeadBelowQuorum: the fence counts a slot dead at B−1 poisons
	// instead of B (fence, classify; B=1 stays at 1).
	DeadBelowQuorum
	// DeadSlotNoHalt: the writer, meeting a dead slot, fails that slot
	// alone and goes on acknowledging the slots past it instead of
	// halting (chain writer, onDead and onCommit).
	DeadSlotNoHalt
	// ReadBackSkipped: a create that finds an object there counts it as
	// the writer's copy without reading it back, on every attempt
	// (chain writer, runBucket).
	ReadBackSkipped
	// CutPastDead: the fence publishes the cut one slot past the dead
	// slot it found (fence, FenceReport).
	CutPastDead
	// MarkBeforeFlush: a departure stamps the clean-release mark before
	// the release flush instead of after it (lease, Finish).
	MarkBeforeFlush
	// MarkAnyTenure: a clean-release mark certifies the stream's last
	// writer whatever tenure it names, so a replayed mark is trusted
	// (lease, Mark.certifies).
	MarkAnyTenure
	// TokenTruncated: a producer token passes when it is a prefix of the
	// installed one, instead of equal to it (lease, Token.judge).
	TokenTruncated
	// TokenExtended: a producer token passes when the installed one is a
	// prefix of it, instead of equal to it (lease, Token.judge).
	TokenExtended
)

// Core lists the variants of the core protocol (epoch, chain, fence,
// settle): fence's TestPlanted hunts each of them with its checks.
var Core = []Bug{CutPlainPut, BarrierOneWindow, RepairUnverified, PoisonNoReobserve, UnreachableAsEmpty,
	WalkAboveHole, AckOutOfOrder, AckBelowQuorum, LostCreateCounted, SettleBelowCut, ReleaseShortPoison,
	DeadBelowQuorum, DeadSlotNoHalt, ReadBackSkipped, CutPastDead}

// Tenure lists the variants of stream tenure (lease).
var Tenure = []Bug{MarkBeforeFlush, MarkAnyTenure, TokenTruncated, TokenExtended}

// All lists every planted variant, None excluded.
var All = append(append([]Bug(nil), Core...), Tenure...)

var names = map[Bug]string{
	None:               "none",
	CutPlainPut:        "cut-plain-put",
	BarrierOneWindow:   "barrier-one-window",
	RepairUnverified:   "repair-unverified",
	PoisonNoReobserve:  "poison-no-reobserve",
	UnreachableAsEmpty: "unreachable-as-empty",
	WalkAboveHole:      "walk-above-hole",
	AckOutOfOrder:      "ack-out-of-order",
	AckBelowQuorum:     "ack-at-w-1",
	LostCreateCounted:  "lost-create-counted",
	SettleBelowCut:     "settle-below-cut",
	ReleaseShortPoison: "release-short-poison",
	DeadBelowQuorum:    "dead-at-b-1",
	DeadSlotNoHalt:     "dead-slot-no-halt",
	ReadBackSkipped:    "read-back-skipped",
	CutPastDead:        "cut-past-dead",
	MarkBeforeFlush:    "mark-before-flush",
	MarkAnyTenure:      "mark-any-tenure",
	TokenTruncated:     "token-truncated",
	TokenExtended:      "token-extended",
}

// caughtBy names, for each variant, the packages whose own tests fail
// when it is planted for a whole run (CUTLINE_PLANTED), each run with
// -failfast ending in a FAIL within a minute: scripts/planted.sh requires
// it. A package is a directory under the module root, built in the
// module of the nearest go.mod above it; "dir=Pattern" runs only the
// tests Pattern matches there (the broker's other tests are long).
var caughtBy = map[Bug][]string{
	CutPlainPut:        {"fence"},
	BarrierOneWindow:   {"fence"},
	RepairUnverified:   {"fence"},
	PoisonNoReobserve:  {"fence"},
	UnreachableAsEmpty: {"chain", "fence"},
	WalkAboveHole:      {"fence"},
	AckOutOfOrder:      {"chain", "cutlinetest"},
	AckBelowQuorum:     {"chain", "cutlinetest"},
	LostCreateCounted:  {"chain", "fence", "cutlinetest"},
	SettleBelowCut:     {"settle", "lease", "cutlinetest"},
	ReleaseShortPoison: {"lease", "cutlinetest"},
	DeadBelowQuorum:    {"fence", "lease", "cutlinetest"},
	DeadSlotNoHalt:     {"chain", "cutlinetest"},
	ReadBackSkipped:    {"chain", "cutlinetest"},
	CutPastDead:        {"fence", "lease", "cutlinetest"},
	MarkBeforeFlush:    {"lease"},
	MarkAnyTenure:      {"lease"},
	TokenTruncated:     {"lease", "examples/broker/node=TestProducerTokenForms"},
	TokenExtended:      {"lease", "examples/broker/node=TestProducerTokenForms"},
}

// CaughtBy returns the packages whose own tests catch b (see caughtBy).
func (b Bug) CaughtBy() []string { return caughtBy[b] }

func (b Bug) String() string {
	if n, ok := names[b]; ok {
		return n
	}
	return "unknown"
}

// Parse returns the Bug named name (as String gives it).
func Parse(name string) (Bug, bool) {
	for b, n := range names {
		if n == name {
			return b, true
		}
	}
	return None, false
}
