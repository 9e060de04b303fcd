package modelcheck

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
)

// Config is one model: the epoch's shape, the parties, the fault budget
// and the fencers' options.
type Config struct {
	// K zones, quorum W, and the epoch's window.
	K, W, Window int
	// Slots is how many payloads the writer submits (the chain's length
	// when nothing fails), at most MaxSlots.
	Slots int
	// Fencers race the writer (default 2).
	Fencers int
	// Faults bounds the answers withheld (unreachable) or lost (the
	// request ran, the answer never came) in one execution, all parties
	// together.
	Faults int
	// Crashes bounds the crashes of each party in one execution (0 or 1).
	Crashes int
	// Span, Fanout and MaxParallel are the fencers' options (see
	// fence.Options); 0 means 1, which keeps the pending sets small.
	Span, Fanout, MaxParallel int
	// Strict fingerprints each party by the order in which its answers
	// arrived (and the writer also by its counters), instead of by the
	// answers of each of its requests. It prunes less and assumes less.
	Strict bool
	// MaxExecutions stops the search once a worker has run that many
	// executions (0: no bound); a search stopped so is reported
	// incomplete.
	MaxExecutions int
	// NoSymmetry fingerprints the fencers one by one instead of as a set
	// (see the package doc): the search is larger, and its size no longer
	// depends on the order in which it meets mirror-image states.
	NoSymmetry bool
	// NoReduce turns the partial-order reduction off (see stable
	// requests in the package doc): every pending request is tried at
	// every state.
	NoReduce bool
	// Workers is how many searches run at once, sharing the states
	// explored (default 1). The verdict does not depend on it, nor does
	// States except through the fencers' symmetry (see NoSymmetry).
	Workers int
	// MaxDepth bounds the decisions of one execution (default 1000): an
	// execution that gets there is a violation (a party that never ends).
	MaxDepth int

	// Progress, when not nil, is called every ProgressEvery executions
	// with the states and executions counted so far (the other counts
	// are not kept across workers until the search ends).
	Progress      func(Result)
	ProgressEvery int

	// finals, when not nil, collects the outcome of every final state
	// (see exec.outcome): a test compares the searches' outcomes.
	finals map[string]bool
	// observed, when not nil, collects every state as the checks see it
	// (see observation), by key.
	observed map[string]observation
	// noStable turns off the delivery of stable requests alone (see
	// stableLocked), which skips states that the checks see differently
	// but that those after it subsume.
	noStable bool
}

// Bounds of Config.
const (
	// MaxSlots bounds Config.Slots.
	MaxSlots = 8
	// MaxWorkers bounds Config.Workers.
	MaxWorkers = 64
)

// Name is the configuration's short name, K/W and slots.
func (c Config) Name() string {
	return fmt.Sprintf("%d/%d slots=%d", c.K, c.W, c.Slots)
}

func (c Config) validate() (Config, error) {
	if c.Fencers == 0 {
		c.Fencers = 2
	}
	for _, f := range []*int{&c.Span, &c.Fanout, &c.MaxParallel} {
		if *f == 0 {
			*f = 1
		}
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = 1000
	}
	switch {
	case c.K < 1 || c.W < 1 || c.W > c.K:
		return c, &cutline.ConfigError{Field: "W", Value: c.W, Reason: fmt.Sprintf("must satisfy 1 ≤ W ≤ K (K=%d)", c.K)}
	case c.Window < 1:
		return c, &cutline.ConfigError{Field: "Window", Value: c.Window, Reason: "must be at least 1"}
	case c.Slots < 0 || c.Slots > MaxSlots:
		return c, &cutline.ConfigError{Field: "Slots", Value: c.Slots, Reason: fmt.Sprintf("must satisfy 0 ≤ Slots ≤ %d", MaxSlots)}
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return c, &cutline.ConfigError{Field: "Workers", Value: c.Workers, Reason: fmt.Sprintf("must satisfy 1 ≤ Workers ≤ %d", MaxWorkers)}
	case c.Faults < 0 || c.Crashes < 0 || c.Fencers < 0:
		return c, &cutline.ConfigError{Field: "Faults", Value: c.Faults, Reason: "budgets must not be negative"}
	}
	return c, nil
}

// Result is what one search found.
type Result struct {
	Config Config
	// States counts the distinct states explored (fingerprints), and
	// Executions the runs from the start that explored them.
	States, Executions int
	// WorkerExecutions is Executions per worker.
	WorkerExecutions []int
	// Pruned counts the executions cut at a state already explored, and
	// Terminal those that ran until every party was done.
	Pruned, Terminal int
	// Deferred counts the executions that ended with only deferred reads
	// left (see the reduction in the package doc).
	Deferred int
	// MaxDepth is the longest execution, in decisions.
	MaxDepth int
	// Complete: every state within the bounds was explored.
	Complete bool
	// Violation is the first violation found (the search stops there).
	Violation *Violation
	// Took is the search's wall-clock time.
	Took time.Duration
}

// frame is one state on the search path: the decisions possible there and
// the one being explored.
type frame struct {
	opts []decision
	idx  int
}

// shared is what the workers of one search share: the fingerprints of the
// states explored, the paths handed out to idle workers, and whether the
// search is over.
type shared struct {
	mu      sync.Mutex
	wake    *sync.Cond
	workers int
	visited map[fingerprint]struct{}
	// queue holds paths from the start (one decision per step) whose last
	// decision nobody has explored yet; idle counts the workers waiting
	// for one.
	queue [][]decision
	idle  int
	stop  bool
	// executions across workers, for Config.Progress.
	executions atomic.Int64
}

func newShared(workers int) *shared {
	sh := &shared{workers: workers, visited: map[fingerprint]struct{}{}}
	sh.wake = sync.NewCond(&sh.mu)
	return sh
}

// visit records fp and reports whether it is new. The worker that records
// a state explores every decision there, or hands some to the queue, so
// the others may prune at it.
func (s *shared) visit(fp fingerprint) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.visited[fp]; seen {
		return false
	}
	s.visited[fp] = struct{}{}
	return true
}

func (s *shared) states() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.visited)
}

// next waits for a path to explore. It reports false once the search is
// over: stopped, or every worker idle with nothing queued.
func (s *shared) next() ([]decision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle++
	for len(s.queue) == 0 && !s.stop && s.idle < s.workers {
		s.wake.Wait()
	}
	if s.stop || len(s.queue) == 0 {
		s.wake.Broadcast()
		return nil, false
	}
	s.idle--
	p := s.queue[len(s.queue)-1]
	s.queue = s.queue[:len(s.queue)-1]
	return p, true
}

// share hands the untried decisions of the lowest frame that has any to
// the queue, when a worker waits for work; they leave the stack.
func (s *shared) share(stack, prefix []frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle == 0 || len(s.queue) > 0 {
		return
	}
	for i := range stack {
		f := &stack[i]
		if f.idx+1 >= len(f.opts) {
			continue
		}
		for _, d := range f.opts[f.idx+1:] {
			p := make([]decision, 0, len(prefix)+i+1)
			for _, g := range append(prefix[:len(prefix):len(prefix)], stack[:i]...) {
				p = append(p, g.opts[g.idx])
			}
			s.queue = append(s.queue, append(p, d))
		}
		f.opts = f.opts[:f.idx+1]
		s.wake.Broadcast()
		return
	}
}

func (s *shared) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop = true
	s.wake.Broadcast()
}

func (s *shared) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop
}

// path turns a queued path into a stack to replay.
func path(p []decision) []frame {
	stack := make([]frame, len(p))
	for i, d := range p {
		stack[i] = frame{opts: []decision{d}}
	}
	return stack
}

// Explore searches every interleaving of the configuration's parties
// within its bounds, depth first, by running the real writer and fencers
// again from the start for every path (stateless model checking), and
// prunes a path at a state whose fingerprint it has explored before. It
// stops at the first violation. With Config.Workers above 1, that many
// searches run at once, each in its own synctest bubble (as parallel
// subtests of t), sharing the explored states. t is only the host of the
// bubbles; Explore does not fail it, except that a bubble that deadlocks
// fails it.
func Explore(t *testing.T, c Config) (Result, error) {
	c, err := c.validate()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	sh := newShared(c.Workers)
	results := make([]Result, c.Workers)
	errs := make([]error, c.Workers)
	if c.Workers == 1 {
		errs[0] = work(t, c, sh, 0, &results[0])
	} else {
		t.Run("search", func(t *testing.T) {
			for i := range c.Workers {
				t.Run(fmt.Sprintf("worker-%d", i), func(t *testing.T) {
					t.Parallel()
					errs[i] = work(t, c, sh, i, &results[i])
				})
			}
		})
	}
	res := Result{Config: c, Complete: true, Took: time.Since(start), States: sh.states()}
	for _, r := range results {
		res.Executions += r.Executions
		res.WorkerExecutions = append(res.WorkerExecutions, r.Executions)
		res.Pruned += r.Pruned
		res.Terminal += r.Terminal
		res.Deferred += r.Deferred
		res.MaxDepth = max(res.MaxDepth, r.MaxDepth)
		res.Complete = res.Complete && r.Complete
		if res.Violation == nil {
			res.Violation = r.Violation
		}
	}
	return res, errors.Join(errs...)
}

// work is one worker: it explores from the start (worker 0) or from the
// paths that busy workers hand out, each in a synctest bubble of its own,
// until the search is over. It waits for a path outside any bubble: a
// bubble whose goroutines all wait on another bubble is deadlocked.
func work(t *testing.T, c Config, sh *shared, worker int, res *Result) error {
	cache := &caches{seen: map[string]wire.Observation{}, recs: map[string]*epoch.Record{}}
	var p []decision
	for first := worker == 0; ; first = false {
		if !first {
			var ok bool
			if p, ok = sh.next(); !ok {
				res.Complete = !sh.stopped()
				return nil
			}
		}
		var err error
		synctest.Test(t, func(*testing.T) { err = search(c, sh, path(p), cache, res) })
		if err != nil || res.Violation != nil {
			return err
		}
	}
}

// search explores depth first from the end of stack (replayed first)
// until every decision below it is explored, handing untried decisions to
// idle workers on the way.
func search(c Config, sh *shared, stack []frame, cache *caches, res *Result) error {
	base := len(stack)
	for {
		if sh.stopped() {
			return nil
		}
		if c.MaxExecutions > 0 && res.Executions >= c.MaxExecutions {
			sh.halt()
			return nil
		}
		res.Executions++
		if n := sh.executions.Add(1); c.Progress != nil && c.ProgressEvery > 0 && n%int64(c.ProgressEvery) == 0 {
			c.Progress(Result{Config: c, States: sh.states(), Executions: int(n)})
		}
		v, err := runOnce(c, &stack, sh, cache, res)
		if err != nil || v != nil {
			res.Violation = v
			sh.halt()
			return err
		}
		for len(stack) > 0 && stack[len(stack)-1].idx+1 >= len(stack[len(stack)-1].opts) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) <= base {
			return nil
		}
		stack[len(stack)-1].idx++
		sh.share(stack[base:], stack[:base])
	}
}

// runOnce runs one execution: it replays the decisions of the stack, then
// takes the first decision at every new state, pushing a frame for each,
// until the execution ends, reaches a state explored before, or breaks a
// guarantee.
func runOnce(c Config, stack *[]frame, sh *shared, cache *caches, res *Result) (*Violation, error) {
	x, err := newExec(c, cache)
	if err != nil {
		return nil, err
	}
	defer x.teardown()
	for depth := 0; ; depth++ {
		synctest.Wait()
		if depth > res.MaxDepth {
			res.MaxDepth = depth
		}
		x.undefer()
		if v := x.checkTransition(); v != nil {
			return v, nil
		}
		if depth < len(*stack) {
			f := (*stack)[depth]
			d := f.opts[f.idx]
			if !x.valid(d) {
				return x.violation("model", "replay diverged: %s is not possible at step %d (the execution is not deterministic given its decisions)", describe(d), depth), nil
			}
			x.apply(d)
			continue
		}
		fp := x.fingerprint()
		if !sh.visit(fp) {
			res.Pruned++
			return nil, nil
		}
		if v := x.check(); v != nil {
			return v, nil
		}
		if c.observed != nil {
			o := x.observe()
			sh.mu.Lock()
			c.observed[o.key()] = o
			sh.mu.Unlock()
		}
		if x.hopeless() {
			// A read put off until a change that can no longer come: the
			// branch that answered it at once covers the rest.
			res.Deferred++
			return nil, nil
		}
		opts := x.options(!c.NoReduce)
		if len(opts) == 0 && x.deferredOnly() {
			// Every party left waits on a read put off until a change
			// that can no longer come: the branch that answered it
			// earlier covers the rest.
			res.Deferred++
			return nil, nil
		}
		if len(opts) == 0 {
			if stuck := x.running(); stuck != "" {
				return x.violation("model", "%s neither finished nor waits for an answer", stuck), nil
			}
			res.Terminal++
			if c.finals != nil {
				o := x.outcome()
				sh.mu.Lock()
				c.finals[o] = true
				sh.mu.Unlock()
			}
			return nil, nil
		}
		if depth >= c.MaxDepth {
			return x.violation("model", "execution longer than %d decisions", c.MaxDepth), nil
		}
		*stack = append(*stack, frame{opts: opts})
		x.apply(opts[0])
	}
}

// running names the parties not done, or returns "".
func (x *exec) running() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := ""
	for _, p := range x.parties {
		if !p.done {
			s += p.name + " "
		}
	}
	return s
}
