package fence

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
)

// The simulator runs simSeedsDefault seeds by default; -fence.seeds=N (or
// CUTLINE_SIM_SEEDS=N) runs N, and -fence.seed=S runs seed S alone.
var (
	flagSimSeeds = flag.Int("fence.seeds", 0, "number of fence simulation seeds (default $CUTLINE_SIM_SEEDS or 400)")
	flagSimSeed  = flag.Uint64("fence.seed", 0, "run only this fence simulation seed")
)

const (
	simSeedsDefault = 400
	// simBound bounds one seed's run (a seed takes well under a second);
	// reaching it is a failure (a hang) with a message, nothing is timed.
	simBound = 30 * time.Second
)

func simSeeds(t *testing.T) []uint64 {
	if *flagSimSeed != 0 {
		return []uint64{*flagSimSeed}
	}
	n := *flagSimSeeds
	if n == 0 {
		if v := os.Getenv("CUTLINE_SIM_SEEDS"); v != "" {
			var err error
			n, err = strconv.Atoi(v)
			require.NoError(t, err, "CUTLINE_SIM_SEEDS")
		}
	}
	if n <= 0 {
		n = simSeedsDefault
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

// simFencer is one fencer's part in a run.
type simFencer struct {
	Live     bool  // started while the writer appends (at submission Mark)
	Mark     int   // submission that starts a live fencer
	CrashAt  int64 // cancel its context at this request of its own (0: never)
	Deadline bool  // runs with a short deadline while a zone is down
	Fanout   int
	Span     int
}

// simConfig is everything a seed decides.
type simConfig struct {
	Seed                uint64
	K, W, Window        int
	Appends             int     // the producer's budget
	CreateFail, LostAns float64 // per create
	Straggle            float64 // per create
	ReadFail            float64 // per read (get and ranged get)
	OutageZone          int     // -1: none
	OutageAt, OutageLen int64   // in requests, counted over every party
	Abort               bool    // abort the writer (else close it)
	Fencers             []simFencer
	DeadlineZone        int // the zone taken down for a deadline fencer
}

func (c simConfig) String() string {
	var fs []string
	for _, f := range c.Fencers {
		fs = append(fs, fmt.Sprintf("%+v", f))
	}
	return fmt.Sprintf("K=%d W=%d window=%d appends=%d createFail=%.2f lost=%.2f straggle=%.2f readFail=%.2f outage=zone %d at %d for %d abort=%v fencers=[%s]",
		c.K, c.W, c.Window, c.Appends, c.CreateFail, c.LostAns, c.Straggle, c.ReadFail, c.OutageZone, c.OutageAt, c.OutageLen, c.Abort, strings.Join(fs, " "))
}

func pickConfig(seed uint64) simConfig {
	r := rand.New(rand.NewPCG(seed, 0x51ed))
	c := simConfig{Seed: seed, OutageZone: -1}
	c.K = []int{1, 2, 3, 3, 3, 5}[r.IntN(6)]
	c.W = c.K/2 + 1
	if r.IntN(4) == 0 {
		c.W = 1 + r.IntN(c.K)
	}
	c.Window = []int{1, 2, 4, 8, 16, 64}[r.IntN(6)]
	c.Appends = r.IntN(120)
	prob := func(max float64) float64 {
		if r.IntN(3) == 0 {
			return 0
		}
		return max * r.Float64()
	}
	c.CreateFail, c.LostAns, c.Straggle, c.ReadFail = prob(0.15), prob(0.1), prob(0.05), prob(0.1)
	if r.IntN(2) == 0 {
		c.OutageZone = r.IntN(c.K)
		c.OutageAt = r.Int64N(int64(c.Appends*c.K) + 50)
		c.OutageLen = 20 + r.Int64N(400)
	}
	c.Abort = r.IntN(3) > 0
	n := 1 + r.IntN(3)
	for i := range n {
		f := simFencer{Fanout: 1 + r.IntN(8), Span: []int{1, 3, 16, 64}[r.IntN(4)]}
		switch {
		case i == 0 && r.IntN(2) == 0, i > 0 && r.IntN(3) == 0:
			f.Live = true
			f.Mark = r.IntN(c.Appends + 1)
		}
		if r.IntN(4) == 0 {
			f.CrashAt = 1 + r.Int64N(int64(10*c.K)+30)
		} else if !f.Live && r.IntN(5) == 0 {
			f.Deadline = true
		}
		c.Fencers = append(c.Fencers, f)
	}
	c.DeadlineZone = r.IntN(c.K)
	return c
}

// simStats counts what the runs exercised.
type simStats struct {
	runs, halted, undecided, crashed, lostRaces, stragglers, holes atomic.Int64
}

// TestSimulation runs seeded random schedules of a pipelined writer over
// fault-injecting zones (failed, lost and straggling creates, failed reads,
// a zone outage) and 1-3 racing fencers (live, after an abort, crashing
// mid-walk, giving up on a deadline while a zone is down), then checks the
// invariants of the cut.
func TestSimulation(t *testing.T) {
	seeds := simSeeds(t)
	var st simStats
	configs := map[string]int{}
	for _, seed := range seeds {
		cfg := pickConfig(seed)
		configs[fmt.Sprint("K=", cfg.K)]++
		configs[fmt.Sprint("W=K:", cfg.W == cfg.K)]++
		configs[fmt.Sprint("outage:", cfg.OutageZone >= 0)]++
		configs[fmt.Sprint("abort:", cfg.Abort)]++
		for _, f := range cfg.Fencers {
			configs[fmt.Sprint("live:", f.Live)]++
			configs[fmt.Sprint("crash:", f.CrashAt > 0)]++
			configs[fmt.Sprint("deadline:", f.Deadline)]++
		}
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("config: %v", cfg)
					t.Logf("reproduce: go test ./fence -race -run TestSimulation -fence.seed=%d", seed)
				}
			})
			runSim(t, cfg, &st)
		})
	}
	t.Logf("%d runs: %d writers halted by a fence, %d deadline fences undecided, %d fencers crashed, %d slots below a cut won by the writer after poison, %d runs with a slot below the cut short of K copies, %d stragglers landed after the fence; configs %v",
		st.runs.Load(), st.halted.Load(), st.undecided.Load(), st.crashed.Load(), st.lostRaces.Load(), st.holes.Load(), st.stragglers.Load(), configs)
	if len(seeds) >= 100 {
		// The default seeds must keep exercising every kind of schedule.
		for _, k := range []string{"K=1", "K=2", "K=3", "K=5", "W=K:true", "outage:true", "abort:false", "live:true", "crash:true", "deadline:true"} {
			require.Positive(t, configs[k], "no run with %s", k)
		}
	}
}

// hookBucket calls before ahead of every request.
type hookBucket struct {
	objstore.Bucket
	before func()
}

func (b *hookBucket) Create(ctx context.Context, key string, data []byte) error {
	b.before()
	return b.Bucket.Create(ctx, key, data)
}

func (b *hookBucket) Get(ctx context.Context, key string) ([]byte, error) {
	b.before()
	return b.Bucket.Get(ctx, key)
}

func (b *hookBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.before()
	return b.Bucket.GetRange(ctx, key, off, n)
}

func (b *hookBucket) Delete(ctx context.Context, key string) error {
	b.before()
	return b.Bucket.Delete(ctx, key)
}

func (b *hookBucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	b.before()
	return b.Bucket.List(ctx, prefix, after, limit)
}

// fenceResult is what one fencer returned.
type fenceResult struct {
	i   int
	cut uint64
	err error
	// down: the deadline fencer's zone was down for its whole run.
	deadline bool
}

func runSim(t testing.TB, cfg simConfig, st *simStats) {
	st.runs.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), simBound)
	defer cancel()
	e := newEnv(t, cfg.K, cfg.W, cfg.Window)
	for i, z := range e.zones {
		z.ClearRules()
		rules := []fault.Rule{
			{Op: fault.OpCreate, Kind: fault.Fail, Probability: cfg.CreateFail},
			{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: cfg.LostAns},
			{Op: fault.OpCreate, Kind: fault.Straggler, Probability: cfg.Straggle},
			{Op: fault.OpGet, Kind: fault.Fail, Probability: cfg.ReadFail},
			{Op: fault.OpGetRange, Kind: fault.Fail, Probability: cfg.ReadFail},
		}
		for _, r := range rules {
			if r.Probability > 0 {
				require.NoError(t, z.AddRule(r), "zone %d", i)
			}
		}
	}

	// The outage follows the requests of every party: the zone goes down
	// at request OutageAt and comes back OutageLen requests later. Someone
	// blocked on the zone keeps retrying, so it always comes back.
	var ops atomic.Int64
	var scheduleOff atomic.Bool
	var phaseMu sync.Mutex
	phase := 0 // 0 before the outage, 1 during, 2 after: only moves forward
	tick := func() {
		n := ops.Add(1)
		if cfg.OutageZone < 0 || scheduleOff.Load() {
			return
		}
		want := 0
		switch {
		case n >= cfg.OutageAt+cfg.OutageLen:
			want = 2
		case n >= cfg.OutageAt:
			want = 1
		}
		phaseMu.Lock()
		defer phaseMu.Unlock()
		if want > phase && !scheduleOff.Load() {
			phase = want
			e.zones[cfg.OutageZone].SetDown(phase == 1)
		}
	}
	stopSchedule := func() { // no outage change happens after it returns
		phaseMu.Lock()
		defer phaseMu.Unlock()
		scheduleOff.Store(true)
	}
	view := func(before func()) []objstore.Bucket {
		return e.view(func(i int, b objstore.Bucket) objstore.Bucket {
			return &hookBucket{Bucket: b, before: func() { tick(); before() }}
		})
	}
	fast := func(o *Options) { o.Backoff = clock.Backoff{Min: 50 * time.Microsecond, Max: 2 * time.Millisecond} }

	w := e.writer(view(func() {}), chain.WriterOptions{Backoff: clock.Backoff{Min: 50 * time.Microsecond, Max: 2 * time.Millisecond}})
	var marks []uint64
	for _, f := range cfg.Fencers {
		if f.Live {
			marks = append(marks, uint64(f.Mark))
		}
	}
	p := startProducer(ctx, w, producerPlan{limit: uint64(cfg.Appends), marks: marks})

	results := make(chan fenceResult, len(cfg.Fencers)+1)
	var wg sync.WaitGroup
	runFencer := func(i int, sf simFencer) {
		fctx, fcancel := context.WithCancel(ctx)
		defer fcancel()
		var mine atomic.Int64
		before := func() {
			if n := mine.Add(1); sf.CrashAt > 0 && n == sf.CrashAt {
				fcancel() // the fencer crashes: its requests from now on fail
			}
		}
		if sf.Deadline {
			var dcancel context.CancelFunc
			fctx, dcancel = context.WithTimeout(fctx, 20*time.Millisecond)
			defer dcancel()
		}
		opts := Options{Identity: fmt.Sprint("fencer-", i), Fanout: sf.Fanout, Span: sf.Span}
		fast(&opts)
		f := e.fencerOn(chain.MustZones(view(before)...), opts)
		cut, err := f.Fence(fctx, star, e.rec.Epoch)
		results <- fenceResult{i: i, cut: cut, err: err, deadline: sf.Deadline}
	}
	for i, sf := range cfg.Fencers {
		if !sf.Live {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.reached(ctx, uint64(sf.Mark))
			runFencer(i, sf)
		}()
	}

	futures, refusal := p.outcomes()
	if refusal != nil {
		require.ErrorIs(t, refusal, chain.ErrFenced, "the producer stops only when fenced")
		st.halted.Add(1)
	}
	if cfg.Abort {
		w.Abort()
	} else {
		require.NoError(t, w.Close(ctx), "the writer drains")
	}

	// Fencers after the writer stopped. A deadline fencer runs with one zone
	// down and no transient read faults, so that its only reason to be
	// undecided is the outage; the zone comes back once it returned.
	deadline := -1
	for i, sf := range cfg.Fencers {
		if sf.Deadline {
			deadline = i
		}
	}
	if deadline >= 0 {
		stopSchedule()
		for _, z := range e.zones {
			z.SetDown(false)
			z.ClearRules()
		}
		e.zones[cfg.DeadlineZone].SetDown(true)
	}
	for i, sf := range cfg.Fencers {
		if sf.Live || i == deadline {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runFencer(i, sf)
		}()
	}
	if deadline >= 0 {
		runFencer(deadline, cfg.Fencers[deadline])
		e.zones[cfg.DeadlineZone].SetDown(false)
	}
	wg.Wait()
	close(results)

	// Judge every fencer. Those that returned without error agree.
	var cut uint64
	var agreed bool
	for r := range results {
		sf := cfg.Fencers[r.i]
		switch {
		case r.err == nil:
			if agreed {
				require.Equal(t, cut, r.cut, "fencer %d's cut", r.i)
			}
			cut, agreed = r.cut, true
		case sf.CrashAt > 0 && errors.Is(r.err, context.Canceled):
			st.crashed.Add(1) // crashed mid-walk
		case r.deadline && errors.Is(r.err, context.DeadlineExceeded):
			var ue *UndecidedError
			if errors.As(r.err, &ue) {
				st.undecided.Add(1)
				require.Equal(t, []string{e.zones[cfg.DeadlineZone].Name()}, ue.Waiting, "undecided only on the zone that was down")
			}
		default:
			e.dump(len(futures))
			t.Fatalf("fencer %d (%+v): %v", r.i, sf, r.err)
		}
	}
	stopSchedule()
	for _, z := range e.zones {
		z.SetDown(false)
	}
	if !agreed {
		// Nobody finished: another fencer finishes the walk of the crashed
		// ones.
		opts := Options{Identity: "fencer-final"}
		fast(&opts)
		var err error
		cut, err = e.fencer(opts).Fence(ctx, star, e.rec.Epoch)
		require.NoError(t, err, "the final fence")
	}

	// Invariants.
	checkOutcomes(t, futures, e.rec.Epoch, cut, cfg.Abort)
	if !cfg.Abort {
		acked := uint64(0)
		for _, f := range futures {
			if _, err := f.Result(); err == nil {
				acked++
			}
		}
		require.Equal(t, cut, acked, "a writer that was not aborted had every slot below the cut acknowledged")
	}
	if err := w.Err(); err != nil {
		var fe *chain.FencedError
		require.ErrorAs(t, err, &fe)
		// The writer halts at the first dead slot it meets: the cut, or a
		// barrier past it when it ran into one and was aborted before
		// learning of the cut (checkGarbage checks what lies past the cut).
		require.GreaterOrEqual(t, fe.Slot, cut, "the writer halted at or past the cut")
	}
	require.LessOrEqual(t, w.Released(), cut)
	e.checkCut(cut)
	e.checkReadable(cut)
	e.checkGarbage(cut)
	holes := false
	for s := range cut + 1 {
		row := e.state(s)
		if s < cut && countOf(row, 'P') > 0 {
			st.lostRaces.Add(1)
		}
		holes = holes || countOf(row, 'F') < cfg.K && s < cut
	}
	if holes {
		st.holes.Add(1)
	}

	// Writes still on their way land now: the cut stays dead, the prefix
	// committed, and garbage stays within the window past the cut.
	landed := 0
	for _, z := range e.zones {
		landed += z.ReleaseStragglers(context.Background())
	}
	st.stragglers.Add(int64(landed))
	e.checkCut(cut)
	e.checkGarbage(cut)
	t.Logf("cut %d of %d submitted, %d stragglers landed after the fence", cut, len(futures), landed)
}

// dump logs the zones and the last slots of an epoch of n submissions.
func (e *env) dump(n int) {
	for i, z := range e.zones {
		e.t.Logf("zone %s: down %v, stragglers pending %d, stats %+v", z.Name(), z.Down(), len(z.PendingStragglers()), z.Stats())
		_ = i
	}
	for s := max(0, n-4); s <= n+1; s++ {
		e.t.Logf("slot %d: %s", s, e.state(uint64(s)))
	}
}

// checkGarbage lists every bucket: flights exist only below cut+window
// (assignment never runs more than the window past release, and release ≤
// cut), poison only at or below the cut (fencers poison only their walk's
// frontier, and no walk passes the dead cut) or ahead of a live writer as a
// barrier.
func (e *env) checkGarbage(cut uint64) {
	e.t.Helper()
	window := uint64(e.rec.Constants.Window)
	for i, b := range e.raw {
		for info, err := range objstore.All(context.Background(), b, e.keys.Epoch(star, e.rec.Epoch)) {
			require.NoError(e.t, err)
			s, ok := e.keys.ParseSlot(star, e.rec.Epoch, info.Key)
			require.True(e.t, ok, "key %s", info.Key)
			o := wire.ObserveObject(context.Background(), b, e.slot(s))
			switch o.State {
			case wire.SlotFlight:
				require.Less(e.t, s, cut+window, "bucket %d: flight at %d, cut %d, window %d", i, s, cut, window)
			case wire.SlotPoison:
				// Above the cut only a barrier, planted ahead of a writer
				// that was still appending.
				if s > cut {
					obj, err := wire.Decode(o.Data)
					require.NoError(e.t, err)
					require.True(e.t, strings.HasSuffix(string(obj.Body), BarrierSuffix), "bucket %d: poison above the cut %d at %d is not a barrier: %q", i, cut, s, obj.Body)
				}
			default:
				e.t.Fatalf("bucket %d: slot %d holds %v", i, s, o.State)
			}
		}
	}
}
