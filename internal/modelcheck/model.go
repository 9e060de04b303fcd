package modelcheck

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/config"
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
	// MaxExecutions stops the search after that many executions (0: no
	// bound); a search stopped so is reported incomplete.
	MaxExecutions int
	// NoReduce turns the partial-order reduction off (see stable
	// requests in the package doc): every pending request is tried at
	// every state.
	NoReduce bool
	// MaxDepth bounds the decisions of one execution (default 1000): an
	// execution that gets there is a violation (a party that never ends).
	MaxDepth int

	// finals, when not nil, collects the outcome of every final state
	// (see exec.outcome): a test compares the searches' outcomes.
	finals map[string]bool
}

// MaxSlots bounds Config.Slots.
const MaxSlots = 8

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
	if c.MaxDepth == 0 {
		c.MaxDepth = 1000
	}
	switch {
	case c.K < 1 || c.W < 1 || c.W > c.K:
		return c, &config.Error{Field: "W", Value: c.W, Reason: fmt.Sprintf("must satisfy 1 ≤ W ≤ K (K=%d)", c.K)}
	case c.Window < 1:
		return c, &config.Error{Field: "Window", Value: c.Window, Reason: "must be at least 1"}
	case c.Slots < 0 || c.Slots > MaxSlots:
		return c, &config.Error{Field: "Slots", Value: c.Slots, Reason: fmt.Sprintf("must satisfy 0 ≤ Slots ≤ %d", MaxSlots)}
	case c.Faults < 0 || c.Crashes < 0 || c.Fencers < 0:
		return c, &config.Error{Field: "Faults", Value: c.Faults, Reason: "budgets must not be negative"}
	}
	return c, nil
}

// Result is what one search found.
type Result struct {
	Config Config
	// States counts the distinct states explored (fingerprints), and
	// Executions the runs from the start that explored them.
	States, Executions int
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

// Explore searches every interleaving of the configuration's parties
// within its bounds, depth first, by running the real writer and fencers
// again from the start for every path (stateless model checking), and
// prunes a path at a state whose fingerprint it has explored before. It
// stops at the first violation. t is only the host of the synctest bubble
// that every execution runs in; Explore does not fail it, except that a
// bubble that deadlocks fails it.
func Explore(t *testing.T, c Config) (Result, error) {
	c, err := c.validate()
	if err != nil {
		return Result{}, err
	}
	res := Result{Config: c}
	start := time.Now()
	synctest.Test(t, func(*testing.T) {
		err = search(c, &res)
	})
	res.Took = time.Since(start)
	return res, err
}

func search(c Config, res *Result) error {
	visited := map[fingerprint]struct{}{}
	cache := &caches{seen: map[string]wire.Observation{}, recs: map[string]*epoch.Record{}}
	var stack []frame
	for {
		if c.MaxExecutions > 0 && res.Executions >= c.MaxExecutions {
			return nil
		}
		res.Executions++
		v, err := runOnce(c, &stack, visited, cache, res)
		if err != nil {
			return err
		}
		if v != nil {
			res.Violation = v
			return nil
		}
		for len(stack) > 0 && stack[len(stack)-1].idx+1 >= len(stack[len(stack)-1].opts) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			res.States = len(visited)
			res.Complete = true
			return nil
		}
		stack[len(stack)-1].idx++
	}
}

// runOnce runs one execution: it replays the decisions of the stack, then
// takes the first decision at every new state, pushing a frame for each,
// until the execution ends, reaches a state explored before, or breaks a
// guarantee.
func runOnce(c Config, stack *[]frame, visited map[fingerprint]struct{}, cache *caches, res *Result) (*Violation, error) {
	x, err := newExec(c, cache)
	if err != nil {
		return nil, err
	}
	defer x.teardown()
	defer func() { res.States = len(visited) }()
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
		if _, seen := visited[fp]; seen {
			res.Pruned++
			return nil, nil
		}
		visited[fp] = struct{}{}
		if v := x.check(); v != nil {
			return v, nil
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
				c.finals[x.outcome()] = true
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
