package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/roll"
)

// The kinds of event the coverage count tracks; each must be reached by
// the CI seeds.
var requiredKinds = []string{
	"zombie", "undecided", "barrier", "corrupt",
	"crash:append", "crash:open", "crash:finish", "crash:roll", "crash:start", "crash:fence", "crash:settle",
	"gate:" + string(lease.Fresh), "gate:" + string(lease.MarkConsumed), "gate:" + string(lease.SettledInline),
	"gate:" + string(lease.SettledDead), "gate:" + string(lease.AlreadySettled), "gate:deferred",
}

// coverage counts events over runs.
type coverage struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *coverage) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[kind]++
}

func (c *coverage) addN(kind string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[kind] += n
}

func (c *coverage) merge(o *coverage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, v := range o.n {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[k] += v
		c.mu.Unlock()
	}
}

func (c *coverage) get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind]
}

func (c *coverage) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.n))
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", k, c.n[k])
	}
	return b.String()
}

// recorder is the testing.TB a run gets: it records failures instead of
// failing the test, so that a planted variant can be caught (and a normal
// run reports its seed). FailNow ends the calling goroutine, as in a test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, msg)
}

func (r *recorder) Error(a ...any)               { r.fail(fmt.Sprint(a...)) }
func (r *recorder) Errorf(f string, a ...any)    { r.fail(fmt.Sprintf(f, a...)) }
func (r *recorder) Fatal(a ...any)               { r.fail(fmt.Sprint(a...)); runtime.Goexit() }
func (r *recorder) Fatalf(f string, a ...any)    { r.fail(fmt.Sprintf(f, a...)); runtime.Goexit() }
func (r *recorder) Fail()                        { r.fail("failed") }
func (r *recorder) FailNow()                     { r.fail("failed"); runtime.Goexit() }
func (r *recorder) Skip(a ...any)                { r.Fatal(a...) }
func (r *recorder) Skipf(f string, a ...any)     { r.Fatalf(f, a...) }
func (r *recorder) SkipNow()                     { r.FailNow() }
func (r *recorder) Log(a ...any)                 {}
func (r *recorder) Logf(format string, a ...any) {}
func (r *recorder) Helper()                      {}
func (r *recorder) Skipped() bool                { return false }
func (r *recorder) Failures() (bool, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, append([]string(nil), r.msgs...)
}
func (r *recorder) Failed() bool             { f, _ := r.Failures(); return f }
func (r *recorder) Setenv(key, value string) { r.Fatalf("Setenv in a simulation") }
func (r *recorder) Chdir(dir string)         { r.Fatalf("Chdir in a simulation") }
func (r *recorder) Attr(key, value string)   {}
func (r *recorder) ArtifactDir() string      { return r.TB.TempDir() }
func (r *recorder) Output() io.Writer        { return discard{} }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Bounds of one run, on the bubble's virtual clock.
const (
	ttl        = 2 * time.Second
	runBound   = 10 * time.Minute
	opBound    = 20 * time.Second
	finalBound = 2 * time.Minute
)

var streams = []string{"s0", "s1"}
var starNames = []string{"star-a", "star-b", "star-c"}

// node is one star process.
type node struct {
	name    string
	party   *cutlinetest.Party
	sess    metastore.Session
	star    *lease.Star
	crashed bool // aborted (its session may live on: hung)
	expired bool // its session ended
	// lock serialises a star's submissions (Next, then Submit): a
	// channel, not a mutex, so that a wait for it is durable in the
	// bubble.
	lock    chan struct{}
	appends atomic.Int32 // bursts running
}

// world is one run.
type world struct {
	t     *recorder
	seed  uint64
	r     *rand.Rand
	ctx   context.Context
	env   *cutlinetest.Env
	store *memstore.Store // the knobs: Partition, Expire
	meta  *slowStore      // what every party talks to
	hist  *cutlinetest.History
	cov   *coverage
	w     int // quorum
	nodes map[string]*node
	wg    sync.WaitGroup
	ids   atomic.Int64
	seq   int // parties made

	downMu sync.Mutex
	down   []int

	partMu sync.Mutex
	parts  int

	corrupted map[string]bool // slots given a corrupt copy
	planted   []plantedCopy   // the corrupt copies, for the operator

	descr []string // what the driver did, for a failing seed
}

func (w *world) note(f string, a ...any) {
	w.descr = append(w.descr, fmt.Sprintf(f, a...))
}

// zoneDown takes zone i down for d (outages overlap by counting).
func (w *world) zoneDown(i int, d time.Duration) {
	w.downMu.Lock()
	w.down[i]++
	w.env.Zones[i].SetDown(true)
	w.downMu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		time.Sleep(d)
		w.downMu.Lock()
		w.down[i]--
		w.env.Zones[i].SetDown(w.down[i] > 0)
		w.downMu.Unlock()
	}()
}

// partition cuts the metastore off for d.
func (w *world) partition(d time.Duration) {
	w.partMu.Lock()
	if w.parts == 0 {
		w.store.Partition()
	}
	w.parts++
	w.partMu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		time.Sleep(d)
		w.partMu.Lock()
		w.parts--
		if w.parts == 0 {
			w.store.Heal()
		}
		w.partMu.Unlock()
	}()
}

func (w *world) party(role string) *cutlinetest.Party {
	w.seq++
	return w.env.Party(fmt.Sprintf("%s-%d", role, w.seq))
}

func (w *world) delay(max time.Duration) time.Duration {
	return time.Duration(w.r.Int64N(int64(max) + 1))
}

// constants are the epoch constants of a star's epochs.
func (w *world) constants() epoch.Constants {
	return w.env.Constants(w.w, []int{1, 2, 4}[w.r.IntN(3)])
}

// start starts (or restarts) star name on a new session; crash cancels
// the start after a delay.
func (w *world) start(name string, crash bool) {
	if n := w.nodes[name]; n != nil {
		if !n.crashed {
			return
		}
		if !n.expired {
			w.store.Expire(n.sess)
			n.expired = true
		}
	}
	sess, err := w.store.NewSession(w.ctx, ttl)
	if err != nil {
		w.note("session for %s: %v", name, err)
		return
	}
	p := w.party(name)
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	defer cancel()
	var crashed atomic.Bool
	if crash {
		d := w.delay(30 * time.Millisecond)
		stop := time.AfterFunc(d, func() { crashed.Store(true); cancel() })
		defer stop.Stop()
	}
	st, err := lease.Start(ctx, lease.Config{
		Star: name, Store: w.meta, Session: sess,
		Minter: p.Minter, Settler: p.Settler, Index: p.Refs, Constants: w.constants(),
	}, lease.Options{
		AbsorbEvery: 1 + w.r.IntN(4),
		Backoff:     clock.Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Roller:      rollerOptions(),
	})
	if err != nil {
		if crashed.Load() {
			w.cov.add("crash:start")
		}
		w.note("start %s: %v", name, err)
		w.store.Expire(sess)
		_ = sess.Close(context.Background())
		return
	}
	w.note("start %s epoch %d", name, st.Epoch().Epoch)
	n := &node{name: name, party: p, sess: sess, star: st, lock: make(chan struct{}, 1)}
	w.nodes[name] = n
}

// live returns the running stars, in name order.
func (w *world) live() []*node {
	var out []*node
	for _, name := range starNames {
		n := w.nodes[name]
		if n == nil || n.crashed {
			continue
		}
		select {
		case <-n.star.Lost():
			// The session ended (expiry, a long partition): the star
			// evicted its streams; the process starts anew later.
			w.note("%s lost its session", n.name)
			n.star.Abort()
			n.crashed, n.expired = true, true
			continue
		default:
		}
		out = append(out, n)
	}
	return out
}

func (w *world) pick(ns []*node) *node {
	if len(ns) == 0 {
		return nil
	}
	return ns[w.r.IntN(len(ns))]
}

func held(n *node) []string {
	var out []string
	for _, t := range n.star.Streams() {
		out = append(out, t.Stream)
	}
	return out
}

// burst appends count records to stream through n, pipelined, recording
// every step in the history.
func (w *world) burst(n *node, stream string, count int) {
	type sub struct {
		f  *lease.Future
		ev int
	}
	n.appends.Add(1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer n.appends.Add(-1)
		var subs []sub
		for range count {
			id := fmt.Sprintf("r%d", w.ids.Add(1))
			n.lock <- struct{}{}
			next, err := n.star.Next(stream)
			if err != nil {
				<-n.lock
				break
			}
			p := cutlinetest.Record(stream, next, id)
			ctx, cancel := context.WithTimeout(w.ctx, opBound)
			f, err := n.star.Submit(ctx, p)
			cancel()
			if err != nil {
				w.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Refused, Host: n.name, Star: n.name, ID: id, Payload: p, Err: err})
				<-n.lock
				break
			}
			ev := w.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: n.name, Star: n.name, ID: id, Payload: p})
			<-n.lock
			subs = append(subs, sub{f, ev})
		}
		for _, s := range subs {
			ctx, cancel := context.WithTimeout(w.ctx, opBound)
			pos, err := s.f.Wait(ctx)
			cancel()
			if err != nil {
				w.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Failed, Host: n.name, Star: n.name, Of: s.ev, Err: err})
				continue
			}
			w.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: n.name, Star: n.name, Of: s.ev, Pos: pos})
		}
	}()
}

// crash aborts n; with expire its session ends too (else it hangs on,
// alive in the registry).
func (w *world) crash(n *node, expire bool) {
	if n.appends.Load() > 0 {
		w.cov.add("crash:append")
	}
	n.star.Abort()
	n.crashed = true
	if expire {
		w.store.Expire(n.sess)
		n.expired = true
	}
	w.note("crash %s expire=%v", n.name, expire)
}

// during runs op in the background and crashes n after a random delay if
// op has not returned by then (counting a crash of kind).
func (w *world) during(n *node, kind string, max time.Duration, op func(ctx context.Context) error) {
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	defer cancel()
	go func() { done <- op(ctx) }()
	select {
	case err := <-done:
		w.note("%s %s: %v", kind, n.name, err)
		return
	case <-time.After(w.delay(max)):
	}
	w.cov.add("crash:" + kind)
	w.crash(n, w.r.IntN(2) == 0)
	err := <-done
	w.note("%s %s crashed: %v", kind, n.name, err)
}

func (w *world) open(n *node, stream string) {
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	defer cancel()
	ten, err := n.star.Open(ctx, stream, lease.OpenOptions{})
	w.gate(ten, err)
	w.note("open %s by %s: %q %v", stream, n.name, ten.Decision, err)
}

// openMany opens in bulk every stream n does not hold (a takeover of
// several at once), maybe crashing n half-way.
func (w *world) openMany(n *node, crash bool) {
	var todo []string
	for _, s := range streams {
		if !slices.Contains(held(n), s) {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 {
		return
	}
	run := func(ctx context.Context) error {
		tens, errs := n.star.OpenMany(ctx, todo, lease.OpenOptions{})
		for i := range todo {
			w.gate(tens[i], errs[i])
			if errs[i] == nil {
				w.cov.add("open many")
			}
		}
		return errors.Join(errs...)
	}
	if crash {
		w.during(n, "open many", 20*time.Millisecond, run)
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	defer cancel()
	err := run(ctx)
	w.note("open many %v by %s: %v", todo, n.name, err)
}

func (w *world) gate(ten lease.Tenure, err error) {
	var de *lease.DeferredError
	switch {
	case err == nil:
		w.cov.add("gate:" + string(ten.Decision))
	case errors.As(err, &de):
		w.cov.add("gate:deferred")
		w.cov.add("deferred:" + string(de.Reason))
	}
}

// target is an epoch of some star: a running one's current epoch or a
// crashed one's last.
func (w *world) target() (string, *epoch.Record) {
	var cands []*node
	for _, name := range starNames {
		if n := w.nodes[name]; n != nil {
			cands = append(cands, n)
		}
	}
	n := w.pick(cands)
	if n == nil {
		return "", nil
	}
	return n.name, n.star.Epoch()
}

func (w *world) isLive(star string) bool {
	n := w.nodes[star]
	return n != nil && !n.crashed
}

// fence runs a racing fencer on an epoch in the background: it may crash
// (its context cancelled mid-walk) or run with a deadline while zones are
// down (undecided).
func (w *world) fence(star string, rec *epoch.Record) {
	p := w.party("fencer")
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	var crashAt time.Duration
	switch w.r.IntN(4) {
	case 0:
		crashAt = 1 + w.delay(20*time.Millisecond)
	case 1:
		// Undecided: some zones down for longer than the fencer waits.
		k := len(w.env.Zones)
		for _, i := range w.r.Perm(k)[:1+w.r.IntN(k)] {
			w.zoneDown(i, 500*time.Millisecond+w.delay(500*time.Millisecond))
		}
		cancel()
		ctx, cancel = context.WithTimeout(w.ctx, 100*time.Millisecond+w.delay(200*time.Millisecond))
	}
	zombie := w.isLive(star) && rec.State == epoch.StateOpen
	fencer := p.Fencer
	if zombie && w.r.IntN(2) == 0 {
		// A walk one slot at a time, which a writer that keeps appending
		// outpaces: the fence must plant a barrier ahead of it. The writer
		// gets a burst long enough to be chased past 3·window slots.
		f, err := fence.New(p.Minter, p.Zones, fence.Options{Identity: p.Name, Span: 1, Fanout: 2})
		if err == nil {
			fencer = f
		}
		if n := w.nodes[star]; n != nil && !n.crashed {
			if hs := held(n); len(hs) > 0 {
				w.burst(n, hs[w.r.IntN(len(hs))], 4*rec.Constants.Window+8)
			}
		}
	}
	w.note("fence %s/%d crashAt=%v", star, rec.Epoch, crashAt)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer cancel()
		var crashed atomic.Bool
		if crashAt > 0 {
			stop := time.AfterFunc(crashAt, func() { crashed.Store(true); cancel() })
			defer stop.Stop()
		}
		rep, err := fencer.FenceReport(ctx, star, rec.Epoch)
		switch {
		case err == nil:
			if rep.Barriers > 0 {
				w.cov.add("barrier")
			}
			if zombie && !rep.AlreadyFenced && !rep.Late {
				w.cov.add("zombie")
			}
		case errors.Is(err, fence.ErrUndecided):
			w.cov.add("undecided")
		case crashed.Load():
			w.cov.add("crash:fence")
		}
	}()
}

// settle runs a settler on an epoch in the background, crashing it
// (cancelling its context) after a delay sometimes.
func (w *world) settle(star string, rec *epoch.Record) {
	p := w.party("settler")
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	var crashAt time.Duration
	if w.r.IntN(2) == 0 {
		crashAt = 1 + w.delay(30*time.Millisecond)
	}
	zombie := w.isLive(star) && rec.State == epoch.StateOpen
	w.note("settle %s/%d crashAt=%v", star, rec.Epoch, crashAt)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer cancel()
		var crashed atomic.Bool
		if crashAt > 0 {
			stop := time.AfterFunc(crashAt, func() { crashed.Store(true); cancel() })
			defer stop.Stop()
		}
		rep, err := p.Settler.Settle(ctx, star, rec.Epoch)
		switch {
		case err == nil:
			if rep.Fence != nil && rep.Fence.Barriers > 0 {
				w.cov.add("barrier")
			}
			if zombie && rep.Fence != nil && !rep.Fence.AlreadyFenced && !rep.Fence.Late {
				w.cov.add("zombie")
			}
		case crashed.Load():
			w.cov.add("crash:settle")
		}
	}()
}

// corrupt places a copy with a corrupt body behind every party's back:
// either a copy of a flight the epoch holds, into a zone where the slot is
// empty, or a corrupt flight just past the epoch's end. At most one per
// slot, and only where the slot stays decidable with one zone occupied by
// it (2 ≤ W ≤ K−1: W copies or K−W+1 poisons fit in the other zones);
// otherwise the fence rightly stops, blocked, for an operator.
func (w *world) corrupt(rec *epoch.Record) {
	k := len(w.env.Raw)
	if rec.Constants.W < 2 || rec.Constants.W > k-1 {
		return
	}
	keys := wire.KeysOf(rec)
	ctx := w.ctx
	top := int64(-1)
	var src []byte
	var srcSlot uint64
	for i := range k {
		for in, err := range objstore.All(ctx, w.env.Raw[i], keys.Epoch(rec.Star, rec.Epoch)+"/") {
			if err != nil {
				break
			}
			s, ok := keys.ParseSlot(rec.Star, rec.Epoch, in.Key)
			if !ok {
				continue
			}
			if int64(s) > top {
				top = int64(s)
			}
			if b, err := w.env.Raw[i].Get(ctx, in.Key); err == nil && w.r.IntN(3) == 0 {
				if obj, err := wire.Decode(b); err == nil && obj.Kind == wire.KindFlight {
					src, srcSlot = b, s
				}
			}
		}
	}
	var data []byte
	var slot uint64
	if src != nil && w.r.IntN(2) == 0 {
		data, slot = append([]byte(nil), src...), srcSlot
	} else {
		slot = uint64(top + 1 + w.r.Int64N(3))
		data = wire.EncodeFlight(rec.Star, rec.Epoch, slot, cutlinetest.PutPayload(slot))
	}
	data[len(data)-1] ^= 0xff
	at := fmt.Sprintf("%s/%d/%d", rec.Star, rec.Epoch, slot)
	if w.corrupted[at] {
		return
	}
	w.corrupted[at] = true
	i := w.r.IntN(k)
	key := keys.Slot(rec.Star, rec.Epoch, slot)
	for j := range k {
		// Beside a flight and a poison in the other zones, a foreign copy
		// leaves the slot neither committable nor killable: the fence
		// rightly stops, blocked, for an operator. Not here.
		if b, err := w.env.Raw[j].Get(ctx, key); j != i && err == nil {
			if obj, err := wire.Decode(b); err == nil && obj.Kind == wire.KindPoison {
				return
			}
		}
	}
	if err := w.env.Raw[i].Create(ctx, key, data); err == nil {
		w.planted = append(w.planted, plantedCopy{zone: i, key: key})
		w.cov.add("corrupt")
		w.note("corrupt copy at %s/%d/%d zone %d", rec.Star, rec.Epoch, slot, i)
	}
}

// plantedCopy is a corrupt copy the run placed.
type plantedCopy struct {
	zone int
	key  string
}

// operator does what the fence's ErrBlocked asks of one: a corrupt copy
// beside a flight in one zone and poison in another leaves its slot
// neither committable nor killable (the writer and the fence raced while
// it stood there), so the fence stops rather than guess. The operator
// removes the copy; the next fence decides the slot.
func (w *world) operator() {
	ctx := w.ctx
	for _, pc := range w.planted {
		var flight, poison bool
		for j, z := range w.env.Raw {
			if j == pc.zone {
				continue
			}
			b, err := z.Get(ctx, pc.key)
			if err != nil {
				continue
			}
			if obj, err := wire.Decode(b); err == nil {
				flight = flight || obj.Kind == wire.KindFlight
				poison = poison || obj.Kind == wire.KindPoison
			}
		}
		if flight && poison {
			if err := w.env.Raw[pc.zone].Delete(ctx, pc.key); err == nil {
				w.note("operator removes the corrupt copy %s in zone %d (the slot is blocked)", pc.key, pc.zone)
			}
		}
	}
}

// rollerOptions are the stars' roller options: short retries, on the
// bubble's clock.
func rollerOptions() roll.Options {
	return roll.Options{
		Writer:  chain.WriterOptions{Backoff: clock.Backoff{Min: 2 * time.Millisecond, Max: 50 * time.Millisecond}},
		Backoff: clock.Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond},
	}
}

// config is what a seed fixes before the driver starts.
type config struct {
	K, W                                    int
	CreateFail, LostAns, Straggle, ReadFail float64
	Steps                                   int
}

func pickConfig(r *rand.Rand) config {
	c := config{}
	c.K = []int{1, 2, 3, 3, 3}[r.IntN(5)]
	c.W = c.K/2 + 1
	if r.IntN(3) == 0 {
		c.W = 1 + r.IntN(c.K)
	}
	prob := func(max float64) float64 {
		if r.IntN(3) == 0 {
			return 0
		}
		return max * r.Float64()
	}
	c.CreateFail, c.LostAns, c.Straggle, c.ReadFail = prob(0.1), prob(0.1), prob(0.05), prob(0.05)
	c.Steps = 6 + r.IntN(10)
	return c
}

// runSeed is one run, inside a synctest bubble: t records its failures.
func runSeed(t *recorder, seed uint64, cov *coverage) {
	r := rand.New(rand.NewPCG(seed, 0xc0de))
	cfg := pickConfig(r)
	ctx, cancel := context.WithTimeout(t.Context(), runBound)
	defer cancel()
	store := memstore.New(memstore.Options{})
	buckets := make([]objstore.Bucket, cfg.K)
	for i := range buckets {
		buckets[i] = memblob.New(fmt.Sprintf("zone-%c", 'a'+i))
	}
	meta := newSlowStore(store, seed)
	env := cutlinetest.New(t, meta, buckets, cutlinetest.Options{
		Fault: fault.Options{Seed: seed, StragglerDelay: 20 * time.Millisecond},
		Wrap: func(i int, z objstore.Bucket) objstore.Bucket {
			return latency.Wrap(z, latency.Options{Seed: seed + uint64(i), Default: latency.Uniform(200*time.Microsecond, 3*time.Millisecond)})
		},
	})
	for _, z := range env.Zones {
		for _, rule := range []fault.Rule{
			{Op: fault.OpCreate, Kind: fault.Fail, Probability: cfg.CreateFail},
			{Op: fault.OpCreate, Kind: fault.LostAnswer, Probability: cfg.LostAns},
			{Op: fault.OpCreate, Kind: fault.Straggler, Probability: cfg.Straggle},
			{Op: fault.OpGet, Kind: fault.Fail, Probability: cfg.ReadFail},
			{Op: fault.OpGetRange, Kind: fault.Fail, Probability: cfg.ReadFail},
		} {
			if rule.Probability > 0 {
				if err := z.AddRule(rule); err != nil {
					t.Fatalf("rule: %v", err)
				}
			}
		}
	}
	w := &world{t: t, seed: seed, r: r, ctx: ctx, env: env, store: store, meta: meta, hist: &cutlinetest.History{},
		cov: cov, w: cfg.W, nodes: map[string]*node{}, corrupted: map[string]bool{}, down: make([]int, cfg.K)}
	w.note("config %+v", cfg)
	defer func() {
		if t.Failed() {
			t.fail("run: " + strings.Join(w.descr, "; "))
		}
	}()

	w.start("star-a", false)
	if r.IntN(2) == 0 {
		w.start("star-b", false)
	}
	for step := 0; step < cfg.Steps; step++ {
		w.step()
		time.Sleep(w.delay(30 * time.Millisecond))
	}
	w.finish()
}

// step is one of the driver's moves, chosen by the seed.
func (w *world) step() {
	live := w.live()
	switch a := w.r.IntN(110); {
	case a < 28: // append a burst
		n := w.pick(live)
		if n == nil {
			w.start(starNames[w.r.IntN(len(starNames))], false)
			return
		}
		hs := held(n)
		if len(hs) == 0 {
			w.open(n, streams[w.r.IntN(len(streams))])
			return
		}
		w.burst(n, hs[w.r.IntN(len(hs))], 1+w.r.IntN(4))
	case a < 40: // open a stream (a takeover when another star held it)
		if n := w.pick(live); n != nil {
			if w.r.IntN(3) == 0 {
				w.openMany(n, w.r.IntN(3) == 0)
				return
			}
			s := streams[w.r.IntN(len(streams))]
			if slices.Contains(held(n), s) {
				// Not again while held: Open reads the held tenure's
				// departing flag after unlocking the star (lease/gate.go),
				// a data race with an eviction that -race reports.
				return
			}
			if w.r.IntN(4) == 0 {
				w.during(n, "open", 0, func(ctx context.Context) error {
					ten, err := n.star.Open(ctx, s, lease.OpenOptions{})
					w.gate(ten, err)
					return err
				})
				return
			}
			w.open(n, s)
		}
	case a < 48: // Finish a stream (handoff), maybe crashing mid-way
		n := w.pick(live)
		if n == nil {
			return
		}
		hs := held(n)
		if len(hs) == 0 {
			return
		}
		s := hs[w.r.IntN(len(hs))]
		if w.r.IntN(3) == 0 {
			w.during(n, "finish", 20*time.Millisecond, func(ctx context.Context) error { return n.star.Finish(ctx, s, lease.ReasonHandoff) })
			return
		}
		ctx, cancel := context.WithTimeout(w.ctx, opBound)
		err := n.star.Finish(ctx, s, lease.ReasonHandoff)
		cancel()
		w.note("finish %s by %s: %v", s, n.name, err)
	case a < 56: // roll, maybe crashing mid-way
		n := w.pick(live)
		if n == nil {
			return
		}
		c := w.constants()
		if w.r.IntN(2) == 0 {
			w.during(n, "roll", 40*time.Millisecond, func(ctx context.Context) error { return n.star.Roll(ctx, c) })
			return
		}
		ctx, cancel := context.WithTimeout(w.ctx, opBound)
		err := n.star.Roll(ctx, c)
		cancel()
		w.note("roll %s: %v", n.name, err)
	case a < 64: // crash a star
		if n := w.pick(live); n != nil {
			w.crash(n, w.r.IntN(3) > 0)
		}
	case a < 68: // a hung star's session expires
		for _, name := range starNames {
			if n := w.nodes[name]; n != nil && n.crashed && !n.expired {
				w.store.Expire(n.sess)
				n.expired = true
				w.note("expire %s", name)
				break
			}
		}
	case a < 74: // start or restart a star, maybe crashing mid-start
		w.start(starNames[w.r.IntN(len(starNames))], w.r.IntN(3) == 0)
	case a < 82: // racing fencers
		if star, rec := w.target(); rec != nil {
			for range 1 + w.r.IntN(2) {
				w.fence(star, rec)
			}
		}
	case a < 87: // a settler
		if star, rec := w.target(); rec != nil {
			w.settle(star, rec)
		}
	case a < 91: // zone outage
		w.zoneDown(w.r.IntN(len(w.env.Zones)), w.delay(300*time.Millisecond))
		w.note("zone outage")
	case a < 95: // metastore partition (longer than a TTL ends sessions)
		d := w.delay(3 * time.Second)
		w.partition(d)
		w.note("partition for %v", d)
	case a >= 104: // a compactor: Compact, Collect, TrimRewritten
		w.compact()
	case a >= 100: // retention
		w.retain()
	default: // a corrupt copy
		if _, rec := w.target(); rec != nil {
			w.corrupt(rec)
		}
	}
}

// finish ends the run: faults stop, every background step ends, the
// stars close (or their sessions end), a janitor star opens every stream
// (settling whatever was abandoned) and closes; then every guarantee is
// checked and every stream read back.
func (w *world) finish() {
	t := w.t
	w.wg.Wait()
	for _, z := range w.env.Zones {
		z.ClearRules()
	}
	time.Sleep(time.Second) // stragglers land
	for _, name := range starNames {
		n := w.nodes[name]
		if n == nil {
			continue
		}
		if !n.crashed {
			ctx, cancel := context.WithTimeout(w.ctx, finalBound)
			err := n.star.Close(ctx)
			cancel()
			if err != nil {
				w.note("close %s: %v", name, err)
				n.star.Abort()
			}
			n.crashed = true
		}
		if !n.expired {
			w.store.Expire(n.sess)
			n.expired = true
		}
		_ = n.sess.Close(context.Background())
	}
	w.operator()
	sess, err := w.store.NewSession(w.ctx, ttl)
	if err != nil {
		t.Fatalf("janitor session: %v", err)
	}
	defer func() { _ = sess.Close(context.Background()) }()
	p := w.party("janitor")
	ctx, cancel := context.WithTimeout(w.ctx, finalBound)
	defer cancel()
	jan, err := lease.Start(ctx, lease.Config{
		Star: "janitor", Store: w.meta, Session: sess,
		Minter: p.Minter, Settler: p.Settler, Index: p.Refs, Constants: w.env.Constants(w.w, 4),
	}, lease.Options{Roller: rollerOptions()})
	if err != nil {
		t.Fatalf("janitor start: %v", err)
	}
	// In bulk first, then each stream left deferred until it opens.
	tens, errs := jan.OpenMany(ctx, streams, lease.OpenOptions{})
	for i, s := range streams {
		if errs[i] == nil {
			w.gate(tens[i], nil)
			continue
		}
		ten, err := jan.OpenWait(ctx, s, lease.OpenOptions{}, 100*time.Millisecond)
		if err != nil {
			jan.Abort()
			t.Fatalf("janitor open %s: %v", s, err)
		}
		w.gate(ten, nil)
	}
	if err := jan.Close(ctx); err != nil {
		jan.Abort()
		t.Fatalf("janitor close: %v", err)
	}

	if w.r.IntN(2) == 0 {
		w.compactAll()
	}
	cutlinetest.Require(t, w.env.Check(w.hist))
	acked := map[string]bool{}
	evs := w.hist.Events()
	for _, ev := range evs {
		if ev.Op == cutlinetest.Acked {
			acked[evs[ev.Of].ID] = true
		}
	}
	seen := map[string]int{}
	rp := w.party("verify")
	starts := map[string]uint64{}
	for _, s := range streams {
		for _, id := range rp.StreamIDs(s) {
			seen[id]++
		}
		if starts[s], err = rp.Refs.Start(w.ctx, s); err != nil {
			t.Fatalf("retention point of %s: %v", s, err)
		}
	}
	// A record below its stream's retention point is gone on purpose.
	retained := map[string]bool{}
	for _, ev := range evs {
		if ev.Op != cutlinetest.Submitted {
			continue
		}
		if s, off, id, err := cutlinetest.ParseRecord(ev.Payload); err == nil && off < starts[s] {
			retained[id] = true
		}
	}
	for id := range acked {
		if retained[id] && seen[id] == 0 {
			w.cov.add("acked retained")
			continue
		}
		if seen[id] != 1 {
			t.Errorf("acknowledged record %s read back %d times", id, seen[id])
		}
	}
	for id, c := range seen {
		if c > 1 {
			t.Errorf("record %s read back %d times", id, c)
		}
	}
	w.cov.addN("acked", len(acked))
	for _, z := range w.env.Zones {
		st := z.Stats()
		if st.StragglersLanded > 0 {
			w.cov.add("straggler landed")
		}
	}
}
