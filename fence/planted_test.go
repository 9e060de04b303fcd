//go:build cutline_planted

package fence_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/objstore/fault"
)

var (
	flagPlantedSeeds = flag.Int("planted.seeds", 60, "fence simulator seeds per planted variant")
	flagPlantedRuns  = flag.Int("planted.runs", 8, "cutlinetest takeover runs per planted variant")
)

// plantedBound bounds one check under one variant: a check that runs
// longer hangs, which is a failure of its own (checks must fail fast).
const plantedBound = 90 * time.Second

// TestPlanted plants each variant of the core protocol (planted.Core) in
// turn and runs the checks that must catch it: this package's (the
// scenario tables, the racing publication, the barrier's lead, writer
// races, simulator seeds),
// FenceAt against stragglers of a cleanly closed writer (checked with
// cutlinetest's CheckEpoch) and cutlinetest.Check over takeover runs,
// which drive the writer, racing fencers and settlers and the reader
// together. Every variant must be caught, and with nothing planted every
// check must pass. It logs which checks caught each variant and "caught N
// of M planted".
func TestPlanted(t *testing.T) {
	checks := append(fence.PlantedChecks(*flagPlantedSeeds), planted.Check{
		Name: fmt.Sprintf("FenceAt against stragglers (%d seeds)", *flagPlantedRuns*3),
		Run: func(t testing.TB) {
			for seed := range uint64(*flagPlantedRuns * 3) {
				planted.Step(t, "FenceAt run %d", seed)
				if _, ok := plannedRollRun(t, seed); !ok {
					return
				}
			}
		},
	}, planted.Check{
		Name: fmt.Sprintf("cutlinetest.Check over takeover runs (%d)", *flagPlantedRuns),
		Run: func(t testing.TB) {
			for seed := range uint64(*flagPlantedRuns) {
				planted.Step(t, "takeover run %d", seed)
				takeoverRun(t, seed)
				if t.Failed() {
					return
				}
			}
		},
	})
	planted.Hunt(t, planted.Core, checks, plantedBound)
}

// takeoverRun: host A appends with faults on every zone (failed and lost
// creates, failed reads); while it appends, B and C fence and settle its
// epoch at once; A halts, B's host serves the stream on and the producer
// retries what A did not acknowledge. Then cutlinetest.Check checks the
// six guarantees over the history, the store and the zones.
func takeoverRun(t testing.TB, seed uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := cutlinetest.NewMem(t, 3)
	for i, z := range e.Zones {
		for _, r := range []fault.Rule{
			{Op: fault.OpCreate, Kind: fault.Fail, Probability: 0.05},
			{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: 0.05},
			{Op: fault.OpGet, Kind: fault.Fail, Probability: 0.03},
		} {
			if err := z.AddRule(r); err != nil {
				t.Fatalf("zone %d: %v", i, err)
			}
		}
	}
	hist := &cutlinetest.History{}
	fast := chain.WriterOptions{Backoff: clock.Backoff{Min: 50 * time.Microsecond, Max: time.Millisecond}}
	a := e.Party("star-a")
	recA := a.Mint("star-a", e.Constants(2, 4+int(seed%3)*6))
	ha := cutlinetest.StartHost(a, a.Writer(recA, fast), cutlinetest.HostOptions{Name: "host-a", History: hist, AbsorbEvery: 3})
	n := 30 + int(seed%4)*10
	results := make(chan error, 2)
	for i := range n {
		if i == n/2 {
			// Two successors take over at once while A appends.
			for _, name := range []string{"star-b", "star-c"} {
				p := e.Party(name)
				go func() {
					_, err := p.Settler.SettleAll(ctx, "star-a")
					results <- err
				}()
			}
		}
		if err := ha.Submit(ctx, fmt.Sprintf("r%d", i)); err != nil {
			break // halted by the fence
		}
	}
	_ = ha.Close(ctx) // A halts at the cut, or drains first
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("a successor's settlement: %v", err)
		}
	}
	b := e.Party("star-b")
	hb := cutlinetest.StartHost(b, b.Writer(b.Mint("star-b", e.Constants(2, 8)), fast), cutlinetest.HostOptions{Name: "host-b", History: hist})
	for _, id := range ha.Failed() {
		if err := hb.Submit(ctx, id); err != nil {
			t.Fatalf("host B refused %s: %v", id, err)
		}
	}
	if err := hb.Close(ctx); err != nil {
		t.Fatalf("host B: %v", err)
	}
	cutlinetest.Require(t, e.Check(hist))
}
