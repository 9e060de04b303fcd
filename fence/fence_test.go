package fence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/internal/testctx"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
)

// scenario is a hand-laid epoch and the expected outcome of fencing it.
// Rows give each slot's objects per bucket (F flight, P poison, X corrupt,
// M misplaced, C a flight whose body fails its checksum, Y a second
// writer's flight, E empty; see env.put); down lists the buckets that are unreachable; the
// expected cut and the final state of some slots are written down.
type scenario struct {
	name     string
	k, w     int
	rows     []string
	down     []int
	wantCut  uint64
	wantErr  error
	after    map[uint64]string // slot → expected final state
	poisoned int64             // poison objects this fence must create
}

func scenarios() []scenario {
	return []scenario{
		{name: "empty epoch", k: 3, w: 2, wantCut: 0, after: map[uint64]string{0: "P P E"}, poisoned: 2},
		{name: "all committed", k: 3, w: 2, rows: []string{"F F F", "F F F", "F F E", "E F F", "F E F"},
			wantCut: 5, after: map[uint64]string{5: "P P E"}, poisoned: 2},
		{name: "pipelined tail: repair, then cut before a straggler", k: 3, w: 2,
			rows:    []string{"F F F", "F F F", "F E E", "F F E", "E E E", "F E E"},
			wantCut: 4, after: map[uint64]string{2: "F F F", 4: "P P E", 5: "F E E"}, poisoned: 2},
		{name: "flight and poison with the deciding zone down: undecided", k: 3, w: 2,
			rows: []string{"F F F", "F P E"}, down: []int{2}, wantErr: ErrUndecided},
		{name: "one short of quorum: repair, never poison", k: 3, w: 2,
			rows: []string{"F F F", "F E F"}, down: []int{2},
			// slot 1 was acknowledged (a and c); c is down, so the fencer
			// sees one flight and repairs b; slot 2 is then poisoned in a
			// and b, c being down.
			wantCut: 2, after: map[uint64]string{1: "F F F", 2: "P P E"}, poisoned: 2},
		{name: "a crashed fencer's poison is resumed", k: 3, w: 2,
			rows: []string{"F F F", "P E E"}, wantCut: 1, after: map[uint64]string{1: "P P E"}, poisoned: 1},
		{name: "a crashed fencer's poison after a racing flight: repair wins", k: 3, w: 2,
			rows: []string{"F F F", "P F E"}, wantCut: 2, after: map[uint64]string{1: "P F F", 2: "P P E"}, poisoned: 2},
		{name: "dead already", k: 3, w: 2, rows: []string{"F F F", "P P E", "F F F"},
			wantCut: 1, after: map[uint64]string{1: "P P E", 2: "F F F"}, poisoned: 0},
		{name: "K=1 W=1", k: 1, w: 1, rows: []string{"F", "F"}, wantCut: 2, after: map[uint64]string{2: "P"}, poisoned: 1},
		{name: "K=1 W=1 poisoned by a racer", k: 1, w: 1, rows: []string{"F", "P"}, wantCut: 1, poisoned: 0},
		{name: "K=1 W=1 bucket down", k: 1, w: 1, rows: []string{"F"}, down: []int{0}, wantErr: ErrUndecided},
		{name: "K=2 W=2: one poison kills", k: 2, w: 2, rows: []string{"F F", "F E", "E E"},
			wantCut: 2, after: map[uint64]string{1: "F F", 2: "P E"}, poisoned: 1},
		{name: "K=5 W=3", k: 5, w: 3, rows: []string{"F F F E E", "F F E E E", "P P E E E"},
			wantCut: 2, after: map[uint64]string{1: "F F F F F", 2: "P P P E E"}, poisoned: 1},
		{name: "K=5 W=3 two zones down", k: 5, w: 3, rows: []string{"F F F E E", "F E F E E"}, down: []int{3, 4},
			wantCut: 2, after: map[uint64]string{1: "F F F E E", 2: "P P P E E"}, poisoned: 3},
		{name: "foreign object holds the deciding vote", k: 3, w: 2, rows: []string{"F P X"}, wantErr: ErrBlocked},
		{name: "misplaced objects hold every bucket", k: 3, w: 2, rows: []string{"M M M"}, wantErr: ErrBlocked},
		{name: "misplaced object is neither flight nor poison", k: 3, w: 2, rows: []string{"M E E"},
			wantCut: 0, after: map[uint64]string{0: "X P P"}, poisoned: 2},
		// A copy whose header is intact but whose body fails its checksum
		// is foreign: never counted toward W, never copied.
		{name: "a corrupt copy beside two empty zones is decided around", k: 3, w: 2,
			rows:    []string{"F F F", "F F F", "C E E"},
			wantCut: 2, after: map[uint64]string{2: "X P P"}, poisoned: 2},
		{name: "corrupt copies in two zones at the frontier stop the fence", k: 3, w: 2,
			rows: []string{"F F F", "C C E"}, wantErr: ErrBlocked},
		{name: "an intact copy beside a corrupt one is repaired from the intact one", k: 3, w: 2,
			rows:    []string{"F F F", "C F E"},
			wantCut: 2, after: map[uint64]string{1: "X F F", 2: "P P E"}, poisoned: 2},
		// The estimate probes slots 1, 2, 4, 8, 16 and sees flight
		// headers up to 8; trusting them would start the walk at 8−window
		// = 4, above the hole at 3.
		{name: "a corrupt copy past the end does not move the walk's start", k: 3, w: 2,
			rows:    []string{"F F F", "F F F", "F F F", "E E E", "C E E", "E E E", "E E E", "E E E", "C E E"},
			wantCut: 3, after: map[uint64]string{3: "P P E", 8: "X E E"}, poisoned: 2},
		// Two different flights in one slot: two writers wrote the epoch.
		{name: "two different flights with a quorum of one are a conflict", k: 3, w: 2,
			rows: []string{"F F F", "Y F F"}, wantErr: chain.ErrConflictingFlight},
		{name: "two different flights without a quorum are a conflict", k: 3, w: 2,
			rows: []string{"F F F", "Y F E"}, wantErr: chain.ErrConflictingFlight},
	}
}

// TestScenarios fences hand-laid epochs on in-memory zones.
func TestScenarios(t *testing.T) {
	for _, c := range scenarios() {
		t.Run(c.name, func(t *testing.T) { runScenario(t, newEnv(t, c.k, c.w, 4), c) })
	}
}

// runScenario lays out c in e (a fresh epoch with c.k zones and quorum
// c.w), fences it and checks the outcome.
func runScenario(t testing.TB, e *env, c scenario) {
	e.layout(c.rows...)
	for _, d := range c.down {
		e.zones[d].SetDown(true)
	}
	// An undecided fence blocks, retrying on its clock, until its context
	// ends: it runs on a fake clock and is ended once it waits. The others
	// must finish well within the generous bound.
	fc := clockFake()
	opts := Options{Identity: "test-fencer", Backoff: clock.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}}
	if errors.Is(c.wantErr, ErrUndecided) {
		opts.Clock = fc
	}
	f := e.fencer(opts)
	var rep Report
	var err error
	if errors.Is(c.wantErr, ErrUndecided) {
		rep, err = e.fenceUntilBlocked(f, fc)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	} else {
		ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
		defer cancel()
		rep, err = f.FenceReport(ctx, star, e.rec.Epoch)
	}
	if c.wantErr != nil {
		require.ErrorIs(t, err, c.wantErr)
		require.Equal(t, epoch.StateOpen, e.record().State, "nothing published")
		return
	}
	require.NoError(t, err)
	require.Equal(t, c.wantCut, rep.Cut)
	require.Equal(t, c.poisoned, rep.Poisoned, "poison objects created")
	rec := e.record()
	require.Equal(t, epoch.StateFenced, rec.State)
	require.Equal(t, c.wantCut, rec.Cut)
	for s, want := range c.after {
		require.Equal(t, want, e.state(s), "slot %d", s)
	}
	// invariant: [0, cut) committed
	for s := uint64(0); s < rep.Cut; s++ {
		require.GreaterOrEqual(t, countOf(e.state(s), 'F'), c.w, "slot %d below the cut is committed", s)
	}
	// the cut is dead
	require.GreaterOrEqual(t, countOf(e.state(rep.Cut), 'P'), c.k-c.w+1)
	// a later fence is a read, with the same cut
	rep2, err := f.FenceReport(bounded(t), star, e.rec.Epoch)
	require.NoError(t, err)
	require.True(t, rep2.AlreadyFenced)
	require.Equal(t, rep.Cut, rep2.Cut)
}

func TestUndecidedReportsWaitingAndAge(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F P E")
	e.zones[2].SetDown(true)
	fc := clockFake()
	f := e.fencer(Options{Clock: fc})
	_, err := e.fenceUntilBlocked(f, fc)
	var ue *UndecidedError
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, uint64(0), ue.Slot)
	require.Equal(t, []string{"c"}, ue.Waiting)
	require.False(t, ue.Since.IsZero())
	u := f.Undecided()
	require.Len(t, u, 1)
	require.Equal(t, ue.Since, u[0].Since)

	// The zone comes back holding nothing: the slot is repaired into c.
	e.zones[2].SetDown(false)
	cut, err := f.Fence(bounded(t), star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cut)
	require.Equal(t, "F P F", e.state(0))
	require.Empty(t, f.Undecided())
}

func TestUndecidedUsesInjectedClock(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F P E")
	e.zones[2].SetDown(true)
	fc := clockFake()
	f := e.fencer(Options{Clock: fc, Backoff: clock.Backoff{Min: time.Second, Max: time.Second}})
	done := make(chan error, 1)
	go func() {
		_, err := f.Fence(bounded(t), star, e.rec.Epoch)
		done <- err
	}()
	// Each retry waits on the fake clock; bring the zone back while the
	// fencer waits for the fourth time.
	for i := range 4 {
		failfast.Timers(t, fc, 1, fmt.Sprintf("the fence's retry %d on the clock", i))
		require.Len(t, f.Undecided(), 1)
		if i == 3 {
			e.zones[2].SetDown(false)
		}
		fc.Advance(time.Second)
	}
	require.NoError(t, failfast.Recv(t, done, "the fence to decide once the zone is back"))
	require.Equal(t, "F P F", e.state(0))
}

func TestCutMismatchIsNeverRetried(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F F F", "F F F")
	_, err := e.minter.Publish(bounded(t), star, e.rec.Epoch, 1) // a bogus publication
	require.NoError(t, err)
	// A fresh fencer reads the published cut: a later fence is a read.
	cut, err := e.fencer(Options{}).Fence(bounded(t), star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cut)
	// Publishing a different cut is refused.
	_, err = e.minter.Publish(bounded(t), star, e.rec.Epoch, 2)
	require.ErrorIs(t, err, epoch.ErrCutMismatch)
}

func TestNoRecord(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	_, err := e.fencer(Options{}).Fence(bounded(t), star, 99)
	require.ErrorIs(t, err, epoch.ErrNoRecord)
}

// TestRacingFencers: several fencers with different views (random outages
// that come and go) converge on one cut, and write no more poison than B.
func TestRacingFencers(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			k := 3 + 2*rng.IntN(2) // 3 or 5
			w := k/2 + 1
			window := 1 + rng.IntN(6)
			e := newEnv(t, k, w, window)
			// A writer that died: n committed slots, then a ragged tail
			// within the window.
			n := rng.IntN(20)
			for s := range n {
				for b := range k {
					if b < w || rng.IntN(2) == 0 {
						e.put(uint64(s), b, 'F')
					}
				}
			}
			for s := n; s < n+window; s++ {
				for b := range k {
					if rng.IntN(3) == 0 {
						e.put(uint64(s), b, 'F')
					}
				}
			}
			fencers := 2 + rng.IntN(2)
			cuts := make([]uint64, fencers)
			errs := make([]error, fencers)
			spans := make([]int, fencers)
			for i := range spans {
				spans[i] = 1 + rng.IntN(8)
			}
			var wg sync.WaitGroup
			for i := range fencers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					f := e.fencer(Options{Identity: fmt.Sprint("fencer-", i), Span: spans[i], Fanout: 1 + i})
					cuts[i], errs[i] = f.Fence(bounded(t), star, e.rec.Epoch)
				}()
			}
			wg.Wait()
			for i := range fencers {
				require.NoError(t, errs[i])
				require.Equal(t, cuts[0], cuts[i], "fencer %d", i)
			}
			cut := cuts[0]
			require.GreaterOrEqual(t, cut, uint64(n), "the committed prefix survives")
			for s := uint64(0); s < cut; s++ {
				require.GreaterOrEqual(t, countOf(e.state(s), 'F'), w, "slot %d", s)
				require.Zero(t, countOf(e.state(s), 'P'), "no poison below the cut at slot %d when nobody raced a writer", s)
			}
			require.Equal(t, k-w+1, countOf(e.state(cut), 'P'), "exactly B poison at the cut")
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	// Out-of-range values are refused, one field per error, never quietly
	// corrected.
	for _, c := range []struct {
		opts  Options
		field string
	}{
		{Options{Fanout: -1}, "Fanout"},
		{Options{Fanout: MaxFanout + 1}, "Fanout"},
		{Options{Span: -1}, "Span"},
		{Options{Span: MaxSpan + 1}, "Span"},
		{Options{MaxParallel: -1}, "MaxParallel"},
		{Options{MaxParallel: MaxParallelLimit + 1}, "MaxParallel"},
		{Options{Backoff: clock.Backoff{Min: -time.Millisecond}}, "Backoff.Min"},
		{Options{Backoff: clock.Backoff{Max: -time.Millisecond}}, "Backoff.Max"},
		{Options{Backoff: clock.Backoff{Min: time.Second, Max: time.Millisecond}}, "Backoff.Max"},
		{Options{Identity: strings.Repeat("x", MaxIdentity+1)}, "Identity"},
	} {
		_, err := New(e.minter, e.buckets(), c.opts)
		require.ErrorIs(t, err, cutline.ErrInvalid, "%+v", c.opts)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, c.field, ce.Field)
	}
	_, err := New(e.minter, e.buckets(), Options{Identity: strings.Repeat("x", MaxIdentity)})
	require.NoError(t, err, "an identity of MaxIdentity bytes fits with the barrier suffix")
	_, err = New(nil, e.buckets(), Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	// a record naming a zone the fencer does not know
	_, err = e.fencer(Options{}).Fence(bounded(t), star, e.rec.Epoch)
	require.NoError(t, err)
	f, err := New(e.minter, chain.Zones{}, Options{})
	require.NoError(t, err)
	rec, err := e.minter.Mint(bounded(t), star, e.rec.Constants)
	require.NoError(t, err)
	_, err = f.Fence(bounded(t), star, rec.Epoch)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	require.False(t, errors.Is(err, ErrUndecided))
}

// TestWriteRefusingZone: one zone answers reads but refuses every create
// (its outcome unknown). K=3, W=2 tolerates one zone failing, so the fence
// must poison the other two instead of retrying the refusing one forever.
func TestWriteRefusingZone(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F F F")
	require.NoError(t, e.zones[0].AddRule(fault.Rule{Op: fault.OpCreate}))
	f := e.fencer(Options{Backoff: clock.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
	defer cancel()
	rep, err := f.FenceReport(ctx, star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(1), rep.Cut)
	require.Equal(t, "E P P", e.state(1))
	require.Equal(t, int64(2), rep.Poisoned)
	require.Equal(t, 1, e.zones[0].Stats().Injected[fault.OpCreate], "the refusing zone was asked once, then passed over")
}

// TestFailingCreatesBackOff: while every create fails, the fence waits on
// its clock between attempts instead of spinning.
func TestFailingCreatesBackOff(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	for _, z := range e.zones {
		// Bounded, so that a fence that spins instead of waiting ends
		// and fails the test rather than hanging it.
		require.NoError(t, z.AddRule(fault.Rule{Op: fault.OpCreate, Count: 1000}))
	}
	fc := clockFake()
	f := e.fencer(Options{Clock: fc, Backoff: clock.Backoff{Min: time.Second, Max: time.Second}})
	done := make(chan error, 1)
	go func() {
		_, err := f.Fence(bounded(t), star, e.rec.Epoch)
		done <- err
	}()
	waiting := make(chan struct{})
	go func() { fc.BlockUntil(1); close(waiting) }()
	select {
	case <-waiting:
	case err := <-done:
		fc.NewTimer(time.Hour) // release the waiter
		<-waiting
		t.Fatalf("the fence returned (%v) without waiting", err)
	case <-bounded(t).Done():
		fc.NewTimer(time.Hour)
		<-waiting
		t.Fatalf("the fence neither backed off on the clock nor returned within %v", failfast.Bound)
	}
	creates := 0
	for _, z := range e.zones {
		creates += z.Stats().Calls[fault.OpCreate]
	}
	require.Equal(t, 1, creates, "one create, then a backoff")
	for _, z := range e.zones {
		z.ClearRules()
	}
	fc.Advance(time.Second) // the backoff ends; nothing fails any more
	require.NoError(t, failfast.Recv(t, done, "the fence to end after its backoff"))
	e.checkCut(0)
}

// TestCancelledFenceIsNotUndecided: a fence whose context ends while it
// reads healthy buckets stopped; it was not blocked by a zone, so it must
// not report ErrUndecided nor leave an entry in Undecided.
func TestCancelledFenceIsNotUndecided(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F F F", "F F F", "F F F", "F F F", "F F F")
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	// Cancel at the walk's read of slot 3 (the estimate does not read it).
	trip := func(i int, b objstore.Bucket) objstore.Bucket {
		return &tripBucket{Bucket: b, key: e.slot(3).Key(), cancel: cancel}
	}
	f := e.fencerOn(chain.MustZones(e.view(trip)...), Options{})
	_, err := f.Fence(ctx, star, e.rec.Epoch)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrUndecided)
	require.Empty(t, f.Undecided())
	require.Equal(t, epoch.StateOpen, e.record().State)
}

// tripBucket cancels a context when key is read.
type tripBucket struct {
	objstore.Bucket
	key    string
	cancel context.CancelFunc
}

func (b *tripBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if key == b.key {
		b.cancel()
		return nil, &objstore.OpError{Op: "getrange", Bucket: b.Name(), Key: key, Err: objstore.Unavailable(ctx.Err())}
	}
	return b.Bucket.GetRange(ctx, key, off, n)
}

func (b *tripBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if key == b.key {
		b.cancel()
		return nil, &objstore.OpError{Op: "get", Bucket: b.Name(), Key: key, Err: objstore.Unavailable(ctx.Err())}
	}
	return b.Bucket.Get(ctx, key)
}

// TestUndecidedClearedWhenAnotherFencerPublishes: a fencer that gave up on
// an undecided slot stops reporting it once another fencer published the
// cut, so an alert on Undecided ages does not fire forever.
func TestUndecidedClearedWhenAnotherFencerPublishes(t *testing.T) {
	e := newEnv(t, 3, 2, 4)
	e.layout("F P E")
	e.zones[2].SetDown(true)
	fc := clockFake()
	f := e.fencer(Options{Clock: fc})
	_, err := e.fenceUntilBlocked(f, fc)
	require.ErrorIs(t, err, ErrUndecided)
	require.Len(t, f.Undecided(), 1, "the age survives a failed attempt, for retries")

	e.zones[2].SetDown(false)
	cut, err := e.fencer(Options{}).Fence(bounded(t), star, e.rec.Epoch)
	require.NoError(t, err)
	cut2, err := f.Fence(bounded(t), star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, cut, cut2)
	require.Empty(t, f.Undecided())
}

// TestUndecidedWhenDeadlineMeetsRetry: the context ends just as a retry of
// an undecided slot is due. Whichever the fence sees first, it was blocked,
// so it reports ErrUndecided with the bucket it waited for.
func TestUndecidedWhenDeadlineMeetsRetry(t *testing.T) {
	for range 20 {
		e := newEnv(t, 3, 2, 4)
		e.layout("F P E")
		e.zones[2].SetDown(true)
		ctx := testctx.NewExpiring()
		f := e.fencer(Options{Clock: dueAndExpired{Fake: clockFake(), ctx: ctx}})
		_, err := f.Fence(ctx, star, e.rec.Epoch)
		var ue *UndecidedError
		require.ErrorAs(t, err, &ue)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, []string{"c"}, ue.Waiting)
	}
}

// dueAndExpired is a clock whose timers are due at once, and which expires
// ctx whenever one is made: a wait sees both its timer and its context done.
type dueAndExpired struct {
	*clock.Fake
	ctx *testctx.Expiring
}

func (c dueAndExpired) NewTimer(d time.Duration) clock.Timer {
	c.ctx.Expire()
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return dueTimer(ch)
}

type dueTimer chan time.Time

func (t dueTimer) C() <-chan time.Time { return t }
func (t dueTimer) Stop() bool          { return false }

// gateBucket holds every read of the walk (whole, or bounded past a
// header probe) until open is closed, after telling held once, so that a
// test can run another party while a fencer waits.
type gateBucket struct {
	objstore.Bucket
	held chan<- struct{}
	open <-chan struct{}
	once *sync.Once
}

func (b *gateBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := b.wait(ctx, "get", key); err != nil {
		return nil, err
	}
	return b.Bucket.Get(ctx, key)
}

func (b *gateBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if n > wire.HeaderProbeLen {
		if err := b.wait(ctx, "getrange", key); err != nil {
			return nil, err
		}
	}
	return b.Bucket.GetRange(ctx, key, off, n)
}

func (b *gateBucket) wait(ctx context.Context, op, key string) error {
	b.once.Do(func() { close(b.held) })
	select {
	case <-b.open:
		return nil
	case <-ctx.Done():
		return &objstore.OpError{Op: op, Bucket: b.Name(), Key: key, Err: objstore.Unavailable(ctx.Err())}
	}
}

// TestLateFencerAdoptsThePublishedCut: a fencer held while another fenced,
// settled and trimmed the epoch finds the trimmed slots empty. It must not
// poison them into a lower cut and fail with ErrCutMismatch: the record is
// fenced by someone else, so it returns the published cut and writes
// nothing. TestFSLateFencerAdoptsThePublishedCut and
// TestS3LateFencerAdoptsThePublishedCut run it on fs and versitygw.
func TestLateFencerAdoptsThePublishedCut(t *testing.T) {
	lateFencerAdopts(t, newEnv(t, 3, 2, 4))
}

// lateFencerAdopts runs TestLateFencerAdoptsThePublishedCut on e, a fresh
// epoch with K=3, W=2 and window 4.
func lateFencerAdopts(t testing.TB, e *env) {
	ctx := bounded(t)
	e.layout(repeatRow("F F F", 6)...)
	held, open := make(chan struct{}), make(chan struct{})
	var once sync.Once
	late := e.fencerOn(chain.MustZones(e.view(func(_ int, b objstore.Bucket) objstore.Bucket {
		return &gateBucket{Bucket: b, held: held, open: open, once: &once}
	})...), Options{Identity: "late"})
	type result struct {
		rep Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := late.FenceReport(ctx, star, e.rec.Epoch)
		done <- result{rep, err}
	}()
	failfast.Recv(t, held, "the late fencer's first read")
	// Meanwhile: another fencer fences, the epoch is settled and trimmed
	// up to its cut (settlement's steps, by hand).
	cut, err := e.fencer(Options{Identity: "first"}).Fence(ctx, star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(6), cut)
	_, err = e.minter.MarkSettled(ctx, star, e.rec.Epoch)
	require.NoError(t, err)
	_, err = e.minter.Advance(ctx, star, e.rec.Epoch, epoch.Cursors{Checkpoint: 6, Trimmed: 6})
	require.NoError(t, err)
	for s := range uint64(6) {
		for _, b := range e.raw {
			require.NoError(t, b.Delete(ctx, e.slot(s).Key()))
		}
	}
	close(open)
	r := failfast.Recv(t, done, "the late fencer to end")
	require.NoError(t, r.err, "a late fencer is not a disagreement")
	require.Equal(t, uint64(6), r.rep.Cut)
	require.True(t, r.rep.Late)
	require.True(t, r.rep.AlreadyFenced)
	require.Zero(t, r.rep.Creates, "the late fencer wrote nothing")
	for s := range uint64(6) {
		require.Equal(t, "E E E", e.state(s), "trimmed slot %d stays empty", s)
	}
}

// TestLateCut tells a late fencer's lower cut (below the trimmed cursor of
// the published record) from a real disagreement.
func TestLateCut(t *testing.T) {
	ctx := bounded(t)
	e := newEnv(t, 3, 2, 4)
	f := e.fencer(Options{})
	_, err := e.minter.Publish(ctx, star, e.rec.Epoch, 6)
	require.NoError(t, err)
	mismatch := &epoch.CutMismatchError{Star: star, Epoch: e.rec.Epoch, Published: 6, Offered: 2}
	_, ok := f.lateCut(ctx, star, e.rec.Epoch, 2, mismatch)
	require.False(t, ok, "nothing trimmed: a lower cut is a real disagreement")
	_, err = e.minter.MarkSettled(ctx, star, e.rec.Epoch)
	require.NoError(t, err)
	_, err = e.minter.Advance(ctx, star, e.rec.Epoch, epoch.Cursors{Checkpoint: 6, Trimmed: 4})
	require.NoError(t, err)
	rec, ok := f.lateCut(ctx, star, e.rec.Epoch, 2, mismatch)
	require.True(t, ok, "a cut below the trimmed cursor is a late fencer's")
	require.Equal(t, uint64(6), rec.Cut)
	_, ok = f.lateCut(ctx, star, e.rec.Epoch, 5, mismatch)
	require.False(t, ok, "a cut at or above the trimmed cursor is a real disagreement")
	_, ok = f.lateCut(ctx, star, e.rec.Epoch, 7, mismatch)
	require.False(t, ok)
	_, ok = f.lateCut(ctx, star, e.rec.Epoch, 2, errors.New("other"))
	require.False(t, ok)
}

func repeatRow(row string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = row
	}
	return out
}

// TestDecideWithoutRereading: a repair whose creates all succeed and the
// poison create that makes B decide their slot without reading it again,
// a repair takes the copy the walk read, without reading it twice, and
// the slots of a read that need a repair, up to the first hole, are
// repaired in one round trip. A dead writer's ragged tail (K=3, W=2) is
// decided in four round trips: the repairs, and two poison creates with
// one read between them. Round trips and requests are counted, not timed.
func TestDecideWithoutRereading(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     []string
		repaired int64
		// reads: 8 probes, then the narrowing's, in each zone; slots 0 to
		// x+3 read whole once; the one read between the two poisons; none
		// for the repairs, and none after them.
		reads int64
	}{
		{"one repair", []string{"F F F", "F F E", "F E E", "E E E", "E F E"}, 2, 3*8 + 3*3 + 3*8 + 3},
		{"three repairs", []string{"F E E", "F F E", "E F E", "E E F", "E E E", "E F E"}, 6, 3*8 + 3*1 + 3*7 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 3, 2, 8)
			e.layout(tc.rows...)
			cut := uint64(len(tc.rows) - 2)
			rep, err := e.fencer(Options{}).FenceReport(bounded(t), star, e.rec.Epoch)
			require.NoError(t, err)
			require.Equal(t, cut, rep.Cut)
			e.checkCut(cut)
			for s := range cut {
				if countOf(tc.rows[s], 'F') < 2 {
					require.Equal(t, "F F F", e.state(s), "slot %d repaired into every empty zone", s)
				}
			}
			require.Equal(t, tc.repaired, rep.Repaired)
			require.Equal(t, int64(2), rep.Poisoned)
			// The estimate probes the checkpoint with the first
			// distances (one round) and narrows once; then one round
			// reads [0, x) and the estimate's neighbourhood whole.
			walk := rep.Rounds - 3
			require.Equal(t, 4, walk, "the walk: repairs 1, poison 1, read 1, poison 1; report %+v", rep)
			require.Equal(t, tc.reads, rep.Reads, "report %+v", rep)
		})
	}
}
