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
// fence; the writer's and settlement's own in chain and settle):
//
//	go test -race -tags cutline_planted -run Planted ./fence/ ./chain/ ./settle/
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
)

// All lists every planted variant, None excluded.
var All = []Bug{CutPlainPut, BarrierOneWindow, RepairUnverified, PoisonNoReobserve, UnreachableAsEmpty,
	WalkAboveHole, AckOutOfOrder, AckBelowQuorum, LostCreateCounted, SettleBelowCut, ReleaseShortPoison}

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
}

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
