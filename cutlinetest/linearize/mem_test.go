package linearize_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest/linearize"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
)

// The number of histories and the first seed come from the environment:
// CI runs the default, a long mode sets more.
const (
	historiesEnv = "CUTLINE_LINEARIZE_HISTORIES" // default 10
	seedEnv      = "CUTLINE_LINEARIZE_SEED"      // the first seed, default 1
	appendsEnv   = "CUTLINE_LINEARIZE_APPENDS"   // acknowledged appends per history, default 120
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// plan draws the steps of one history from its seed: four takeovers or
// rolls among the kinds, and one zone taken down for a while.
func plan(rng *rand.Rand, appends int, zones []*fault.Bucket) (steps []linearize.Step, stop func()) {
	kinds := []linearize.StepKind{linearize.Crash, linearize.Restart, linearize.Handoff, linearize.SessionLost, linearize.Roll, linearize.Roll}
	gap := appends / 6
	for i := range 4 {
		steps = append(steps, linearize.Step{After: gap * (i + 1), Kind: kinds[rng.IntN(len(kinds))]})
	}
	// A zone goes down between two steps and comes back two steps later,
	// or after 300ms if that is sooner (an epoch with W=3 stops
	// acknowledging while it is down).
	z := zones[rng.IntN(len(zones))]
	down := gap*(1+rng.IntN(2)) + gap/2
	var up *time.Timer
	steps = append(steps,
		linearize.Step{After: down, Kind: linearize.Hook, Name: z.Name() + " down", Do: func(context.Context) error {
			z.SetDown(true)
			up = time.AfterFunc(300*time.Millisecond, func() { z.SetDown(false) })
			return nil
		}},
		linearize.Step{After: down + 2*gap, Kind: linearize.Hook, Name: z.Name() + " up", Do: func(context.Context) error {
			up.Stop()
			z.SetDown(false)
			return nil
		}})
	slices.SortStableFunc(steps, func(a, b linearize.Step) int { return a.After - b.After })
	return steps, func() {
		if up != nil {
			up.Stop()
		}
	}
}

// faults are every zone's rules: requests lost on the way, creates that
// landed with their answer lost, creates that land late (stragglers), a
// few percent each.
func faults() []fault.Rule {
	return []fault.Rule{
		{Op: fault.OpCreate, Kind: fault.Fail, Probability: 0.03},
		{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: 0.03},
		{Op: fault.OpCreate, Kind: fault.Straggler, Probability: 0.02},
		{Op: fault.OpGet, Kind: fault.Fail, Probability: 0.02},
		{Op: fault.OpGet, Kind: fault.LostAnswer, Probability: 0.01},
		{Op: fault.OpList, Kind: fault.Fail, Probability: 0.02},
		{Op: fault.OpDelete, Kind: fault.LostAnswer, Probability: 0.02},
	}
}

// TestLinearizableMem records histories of appends and reads on one
// stream from three appending and two reading clients, on an in-memory
// metastore and three in-memory zones (K=3, W=2) with fault injection
// (lost requests, lost answers, stragglers, a zone down for a while),
// through crashes, restarts, clean handoffs, lost sessions and rolls of
// the serving star, while a maintenance process compacts every epoch,
// trims, keeps the stream's last half and collects, every 5 ms; the
// readers read from flights and segments, below the retention point and
// from it. Each history is checked with porcupine. A failing history
// prints the command that runs it again.
func TestLinearizableMem(t *testing.T) {
	n := envInt(t, historiesEnv, 10)
	first := envInt(t, seedEnv, 1)
	appends := envInt(t, appendsEnv, 120)
	var mu sync.Mutex
	var ops []int
	var trimmed, fromSegments int
	start := time.Now()
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := memHistory(t, uint64(seed), appends)
			mu.Lock()
			ops = append(ops, r.Ops)
			trimmed += r.Trimmed
			fromSegments += r.fromSegments
			mu.Unlock()
			if t.Failed() {
				t.Logf("run it again: (cd cutlinetest/linearize && %s=%d %s=1 %s=%d go test -race -run 'TestLinearizableMem' .)",
					seedEnv, seed, historiesEnv, appendsEnv, appends)
			}
		})
	}
	if len(ops) > 0 {
		slices.Sort(ops)
		sum := 0
		for _, o := range ops {
			sum += o
		}
		t.Logf("%d histories checked in %v: operations per history min %d, mean %d, max %d; %d reads answered trimmed, %d chunks read from segments",
			len(ops), time.Since(start).Round(time.Millisecond), ops[0], sum/len(ops), ops[len(ops)-1], trimmed, fromSegments)
		// The histories covered what maintenance brings: reads below the
		// retention point, and reads served from segments.
		if !t.Failed() && (trimmed == 0 || fromSegments == 0) {
			t.Fatalf("%d reads answered trimmed, %d chunks read from segments: the histories did not cover retention and compaction", trimmed, fromSegments)
		}
	}
}

func memHistory(t *testing.T, seed uint64, appends int) memResult {
	rng := rand.New(rand.NewPCG(seed, 0x11ea))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	store := memstore.New(memstore.Options{})
	var zones []*fault.Bucket
	var buckets []objstore.Bucket
	for i := range 3 {
		z := fault.Wrap(memblob.New(fmt.Sprintf("zone-%c", 'a'+i)), fault.Options{
			Seed: seed*16 + uint64(i), Rules: faults(), StragglerDelay: 3 * time.Millisecond})
		zones = append(zones, z)
		buckets = append(buckets, z)
	}
	defer func() {
		for _, z := range zones {
			z.SetDown(false)
			z.ReleaseStragglers(context.Background())
		}
	}()
	c := epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 8, Prefix: "chains"}
	c2, c3 := c, c
	c2.Window = 4
	c3.W, c3.Window = 3, 16 // a zone down holds this epoch's appends until it is back
	steps, stop := plan(rng, appends, zones)
	defer stop()
	hist, rep, err := linearize.Run(ctx, linearize.Config{Store: store, Zones: buckets, Constants: c}, linearize.Options{
		Rolls: []epoch.Constants{c2, c3, c}, Appends: appends, Steps: steps,
		EndSession:  func(_ context.Context, s metastore.Session) error { store.Expire(s); return nil },
		Maintenance: linearize.Maintenance{Every: 5 * time.Millisecond, Keep: uint64(appends / 2), PassSlots: 16},
		Logf:        t.Logf,
	})
	t.Logf("%d stars; %s", rep.Stars, strings.Join(rep.Steps, "; "))
	t.Logf("maintenance: %+v", rep.Maintenance)
	if err != nil {
		t.Errorf("the history: %v", err)
	}
	r := linearize.Require(t, hist, time.Minute)
	if r.Acked < appends || r.Reads < 2 || r.Retains == 0 || r.Start == 0 {
		t.Fatalf("the history is too thin to judge: %v", r)
	}
	res := memResult{Result: r, fromSegments: rep.Maintenance.ChunksFromSegments}

	// Planted on the real history, each on a copy: one more read, after
	// everything, that misses the first value it reads; a second append
	// acknowledged at offset 0; a read answered trimmed at the retention
	// point; a read from offset 0 admitted past the retention check. None
	// has a linearization.
	for _, z := range zones {
		z.ClearRules()
	}
	start, last, err := finalLog(ctx, store, buckets)
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if start != r.Start {
		t.Fatalf("the stream starts at %d, the history's last retain moved it to %d", start, r.Start)
	}
	for _, pl := range []struct {
		what  string
		plant func(h *linearize.History)
	}{
		{"a read missing the first value it reads", func(h *linearize.History) { h.ReadFrom(99, start).Done(last[1:]) }},
		{"a second append acknowledged at offset 0", func(h *linearize.History) { h.Append(99, "planted", 0).Acked() }},
		{"a read answered trimmed at the retention point", func(h *linearize.History) { h.ReadFrom(99, start).Trimmed(start) }},
		{"a read from 0 admitted past the retention point", func(h *linearize.History) {
			rd := h.ReadFrom(99, 0)
			rd.Admitted()
			rd.Failed(errors.New("planted"))
		}},
	} {
		h := hist.Clone()
		pl.plant(h)
		if v := linearize.Check(h, time.Minute).Verdict; v != porcupine.Illegal {
			t.Fatalf("planted: %s (the stream starts at %d, %d values): verdict %s, want Illegal", pl.what, start, len(last), v)
		}
	}
	return res
}

// memResult is a checked history and the chunks its readers were served
// from segments.
type memResult struct {
	linearize.Result
	fromSegments int
}

var clockBackoff = clock.Backoff{Min: 2 * time.Millisecond, Max: 50 * time.Millisecond}

// finalLog reads the stream "s" as a fresh consumer, from its retention
// point, and returns the point and the ids.
func finalLog(ctx context.Context, store metastore.Store, buckets []objstore.Bucket) (uint64, []string, error) {
	p, err := linearize.NewParts("planter", store, "", chain.MustZones(buckets...), clockBackoff, nil)
	if err != nil {
		return 0, nil, err
	}
	start, err := p.Refs.Start(ctx, "s")
	if err != nil {
		return 0, nil, err
	}
	ids, err := linearize.ReadFrom(ctx, p.Stream, "s", start)
	return start, ids, err
}
