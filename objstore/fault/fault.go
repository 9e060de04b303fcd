package fault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/objstore"
)

// Method names a Bucket operation, as in objstore.OpError.Op.
type Method string

// The operations of objstore.Bucket (Name is never faulted).
const (
	OpCreate   Method = "create"
	OpGet      Method = "get"
	OpGetRange Method = "getrange"
	OpDelete   Method = "delete"
	OpList     Method = "list"
)

var ops = []Method{OpCreate, OpGet, OpGetRange, OpDelete, OpList}

// Effect is what a rule does to a call it fires on.
type Effect int

const (
	// Fail answers the error without calling the inner bucket: the request
	// never arrived.
	Fail Effect = iota
	// LostAnswer calls the inner bucket and then answers the error instead
	// of its result: the request was carried out (a Create landed, a Delete
	// deleted) but the caller cannot know.
	LostAnswer
	// Straggler (Create only) answers the error at once and keeps the write
	// back: it lands in the inner bucket later, when the test calls
	// ReleaseStragglers or, with Options.StragglerDelay, when that much time
	// has passed on Options.Clock. Landing uses the inner Create, so a
	// straggler never overwrites: if the key was taken meanwhile it fails,
	// which Stats records.
	Straggler
)

func (k Effect) String() string {
	switch k {
	case Fail:
		return "fail"
	case LostAnswer:
		return "lost answer"
	case Straggler:
		return "straggler"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

var (
	// ErrInjected matches every error this package injects, so a test can
	// tell them from errors of the inner bucket.
	ErrInjected = errors.New("fault: injected")
	// ErrDown matches the errors of a bucket switched off with SetDown.
	ErrDown = errkind.New(cutline.ErrUnavailable, "fault: bucket down")
)

// Rule injects a fault into the calls it matches. The zero Rule matches
// every call and fails it with objstore.ErrUnavailable.
type Rule struct {
	// Op restricts the rule to one operation; "" matches all of them
	// (a Straggler rule with Op "" matches only Create).
	Op Method
	// Prefix restricts the rule to keys (for List: prefixes) that start
	// with it.
	Prefix string
	// Glob, when set, restricts the rule to keys matching it with
	// path.Match ('*' does not cross '/').
	Glob string
	// Kind is what happens to a call the rule fires on; default Fail.
	Kind Effect
	// Err is the error answered; nil means objstore.ErrUnavailable. The
	// answer also matches ErrInjected.
	Err error
	// Probability is the chance that a matching call fires the rule,
	// drawn from the seeded generator; 0 (or 1) means every matching call.
	Probability float64
	// Count is how many times the rule fires before it is spent; 0 means
	// without limit. Count 3 with Probability 0 fails the next three
	// matching calls.
	Count int
}

func (r Rule) validate() error {
	switch r.Op {
	case "", OpCreate, OpGet, OpGetRange, OpDelete, OpList:
	default:
		return fmt.Errorf("fault: rule: unknown Op %q", r.Op)
	}
	switch r.Kind {
	case Fail, LostAnswer:
	case Straggler:
		if r.Op != "" && r.Op != OpCreate {
			return fmt.Errorf("fault: rule: Straggler applies to %s only, not %s", OpCreate, r.Op)
		}
	default:
		return fmt.Errorf("fault: rule: unknown Kind %d", int(r.Kind))
	}
	if r.Glob != "" {
		if _, err := path.Match(r.Glob, ""); err != nil {
			return fmt.Errorf("fault: rule: Glob %q: %w", r.Glob, err)
		}
	}
	if r.Probability < 0 || r.Probability > 1 {
		return fmt.Errorf("fault: rule: Probability %v outside [0, 1]", r.Probability)
	}
	if r.Count < 0 {
		return fmt.Errorf("fault: rule: Count %d < 0", r.Count)
	}
	return nil
}

func (r Rule) matches(op Method, key string) bool {
	if r.Kind == Straggler && op != OpCreate {
		return false
	}
	if r.Op != "" && r.Op != op {
		return false
	}
	if !strings.HasPrefix(key, r.Prefix) {
		return false
	}
	if r.Glob != "" {
		if ok, _ := path.Match(r.Glob, key); !ok {
			return false
		}
	}
	return true
}

// Options configures a Bucket. The zero value injects nothing.
type Options struct {
	// Seed seeds the generator behind Rule.Probability: the same seed and
	// the same sequence of calls inject the same faults.
	Seed uint64
	// Rules are tried in order for every call; the first that matches and
	// fires decides. More can be added with AddRule.
	Rules []Rule
	// Clock times StragglerDelay; nil means the real clock.
	Clock clock.Clock
	// StragglerDelay, when positive, lands every straggler this long after
	// its Create on Clock. With 0 stragglers land only when
	// ReleaseStragglers is called.
	StragglerDelay time.Duration
}

// Counts counts calls. Maps are keyed by operation and are copies.
type Counts struct {
	// Calls is every call the wrapper received.
	Calls map[Method]int
	// Forwarded is the calls that reached the inner bucket (including lost
	// answers, excluding straggler landings).
	Forwarded map[Method]int
	// Injected is the calls answered with an injected error (down, Fail,
	// LostAnswer, Straggler).
	Injected map[Method]int
	// Straggler writes: queued, landed in the inner bucket, failed to land
	// (the key was taken meanwhile, or the inner bucket refused), dropped
	// by DropStragglers.
	StragglersQueued, StragglersLanded, StragglersFailed, StragglersDropped int
}

// Bucket wraps an objstore.Bucket and injects faults into its calls. It is
// safe for concurrent use; its random draws are serialised, so a test that
// makes its calls in a fixed order sees the same faults for the same seed.
type Bucket struct {
	inner objstore.Bucket
	clk   clock.Clock
	delay time.Duration

	mu         sync.Mutex
	rng        *rand.Rand
	rules      []*ruleState
	down       bool
	stats      Counts
	stragglers []*straggler // queued, in order
	landing    int          // stragglers being landed by a timer
	landed     *sync.Cond   // signalled when landing drops
}

type ruleState struct {
	Rule
	left int // remaining firings when Count > 0
}

type straggler struct {
	key   string
	data  []byte
	timer clock.Timer
}

var _ objstore.Bucket = (*Bucket)(nil)

// Wrap returns b with fault injection. It panics if a rule in opts is
// invalid, like regexp.MustCompile: rules are written by tests.
func Wrap(b objstore.Bucket, opts Options) *Bucket {
	f := &Bucket{
		inner: b,
		clk:   clock.Or(opts.Clock),
		delay: opts.StragglerDelay,
		rng:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
	}
	f.landed = sync.NewCond(&f.mu)
	f.resetStats()
	for _, r := range opts.Rules {
		if err := f.AddRule(r); err != nil {
			panic(err)
		}
	}
	return f
}

// Inner returns the wrapped bucket.
func (b *Bucket) Inner() objstore.Bucket { return b.inner }

// Name implements objstore.Bucket: the inner bucket's name.
func (b *Bucket) Name() string { return b.inner.Name() }

// AddRule appends a rule, after the existing ones.
func (b *Bucket) AddRule(r Rule) error {
	if err := r.validate(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rules = append(b.rules, &ruleState{Rule: r, left: r.Count})
	return nil
}

// ClearRules removes every rule. Queued stragglers stay queued.
func (b *Bucket) ClearRules() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rules = nil
}

// SetDown takes the whole bucket (a zone) down or brings it back. While it
// is down every call fails with an error matching objstore.ErrUnavailable
// and ErrDown, and nothing reaches the inner bucket. Stragglers still land:
// they are already inside the zone.
func (b *Bucket) SetDown(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}

// Down reports whether the bucket is down.
func (b *Bucket) Down() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down
}

// Stats returns a snapshot of the counters.
func (b *Bucket) Stats() Counts {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.Calls = copyMap(s.Calls)
	s.Forwarded = copyMap(s.Forwarded)
	s.Injected = copyMap(s.Injected)
	return s
}

// ResetStats sets every counter to zero.
func (b *Bucket) ResetStats() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resetStats()
}

func (b *Bucket) resetStats() {
	b.stats = Counts{Calls: map[Method]int{}, Forwarded: map[Method]int{}, Injected: map[Method]int{}}
	for _, op := range ops {
		b.stats.Calls[op], b.stats.Forwarded[op], b.stats.Injected[op] = 0, 0, 0
	}
}

func copyMap(m map[Method]int) map[Method]int {
	out := make(map[Method]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// PendingStragglers returns the keys of the stragglers not landed yet, in
// the order they were queued.
func (b *Bucket) PendingStragglers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := make([]string, len(b.stragglers))
	for i, s := range b.stragglers {
		keys[i] = s.key
	}
	return keys
}

// ReleaseStragglers lands every queued straggler now, in the order they were
// queued, waits for landings already started by StragglerDelay, and returns
// how many of the released ones were created (the others found their key
// taken). Call it before a test ends when StragglerDelay is used, so that no
// landing is left running.
func (b *Bucket) ReleaseStragglers(ctx context.Context) int {
	b.mu.Lock()
	queued := b.take()
	b.mu.Unlock()
	created := 0
	for _, s := range queued {
		if b.land(ctx, s) {
			created++
		}
	}
	b.mu.Lock()
	for b.landing > 0 {
		b.landed.Wait()
	}
	b.mu.Unlock()
	return created
}

// DropStragglers discards every queued straggler: writes that never arrive.
// It returns how many were dropped.
func (b *Bucket) DropStragglers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	queued := b.take()
	b.stats.StragglersDropped += len(queued)
	return len(queued)
}

// take removes and returns every queued straggler, stopping their timers;
// b.mu is held.
func (b *Bucket) take() []*straggler {
	queued := b.stragglers
	b.stragglers = nil
	for _, s := range queued {
		if s.timer != nil {
			s.timer.Stop()
		}
	}
	return queued
}

// land creates a straggler in the inner bucket and reports whether it was
// created.
func (b *Bucket) land(ctx context.Context, s *straggler) bool {
	err := b.inner.Create(ctx, s.key, s.data)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.stats.StragglersFailed++
		return false
	}
	b.stats.StragglersLanded++
	return true
}

// landLater is the StragglerDelay timer's callback.
func (b *Bucket) landLater(s *straggler) {
	b.mu.Lock()
	i := -1
	for j, q := range b.stragglers {
		if q == s {
			i = j
			break
		}
	}
	if i < 0 {
		b.mu.Unlock() // released or dropped meanwhile
		return
	}
	b.stragglers = append(b.stragglers[:i], b.stragglers[i+1:]...)
	b.landing++
	b.mu.Unlock()

	b.land(context.Background(), s)

	b.mu.Lock()
	b.landing--
	b.landed.Broadcast()
	b.mu.Unlock()
}

// injectedError is what an injected fault answers.
type injectedError struct {
	what string
	err  error
	down bool
}

func (e *injectedError) Error() string { return "fault: " + e.what + ": " + e.err.Error() }

func (e *injectedError) Unwrap() []error {
	if e.down {
		return []error{e.err, ErrInjected, ErrDown}
	}
	return []error{e.err, ErrInjected}
}

// decision is what to do with one call.
type decision struct {
	kind   Effect
	inject error // nil: forward untouched
}

// decide counts the call and picks its fault, if any.
func (b *Bucket) decide(op Method, key string) decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		b.stats.Injected[op]++
		return decision{inject: &injectedError{what: "bucket down", err: objstore.ErrUnavailable, down: true}}
	}
	for i, r := range b.rules {
		if !r.matches(op, key) {
			continue
		}
		if p := r.Probability; p > 0 && p < 1 && b.rng.Float64() >= p {
			continue
		}
		if r.Count > 0 {
			r.left--
			if r.left == 0 {
				b.rules = append(b.rules[:i:i], b.rules[i+1:]...)
			}
		}
		err := r.Err
		if err == nil {
			err = objstore.ErrUnavailable
		}
		b.stats.Injected[op]++
		if r.Kind == LostAnswer {
			b.stats.Forwarded[op]++
		}
		return decision{kind: r.Kind, inject: &injectedError{what: "injected " + r.Kind.String(), err: err}}
	}
	b.stats.Forwarded[op]++
	return decision{}
}

// enter counts the call and refuses done contexts and invalid keys the way
// every backend does, before any fault: those answers are local.
func (b *Bucket) enter(ctx context.Context, op Method, key string) error {
	b.mu.Lock()
	b.stats.Calls[op]++
	b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return b.opErr(op, key, err)
	}
	check := objstore.ValidateKey
	if op == OpList {
		check = objstore.ValidatePrefix
	}
	if err := check(key); err != nil {
		return b.opErr(op, key, err)
	}
	return nil
}

func (b *Bucket) opErr(op Method, key string, err error) error {
	return &objstore.OpError{Op: string(op), Bucket: b.inner.Name(), Key: key, Err: err}
}

// Create implements objstore.Bucket.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	if err := b.enter(ctx, OpCreate, key); err != nil {
		return err
	}
	d := b.decide(OpCreate, key)
	switch {
	case d.inject == nil:
		return b.inner.Create(ctx, key, data)
	case d.kind == LostAnswer:
		_ = b.inner.Create(ctx, key, data)
	case d.kind == Straggler:
		b.queue(key, data)
	}
	return b.opErr(OpCreate, key, d.inject)
}

func (b *Bucket) queue(key string, data []byte) {
	s := &straggler{key: key, data: bytes.Clone(data)}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stragglers = append(b.stragglers, s)
	b.stats.StragglersQueued++
	if b.delay > 0 {
		s.timer = b.clk.AfterFunc(b.delay, func() { b.landLater(s) })
	}
}

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := b.enter(ctx, OpGet, key); err != nil {
		return nil, err
	}
	d := b.decide(OpGet, key)
	if d.inject == nil {
		return b.inner.Get(ctx, key)
	}
	if d.kind == LostAnswer {
		_, _ = b.inner.Get(ctx, key)
	}
	return nil, b.opErr(OpGet, key, d.inject)
}

// GetRange implements objstore.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := b.enter(ctx, OpGetRange, key); err != nil {
		return nil, err
	}
	if offset < 0 || length <= 0 {
		return nil, b.opErr(OpGetRange, key, objstore.ErrInvalidRange)
	}
	d := b.decide(OpGetRange, key)
	if d.inject == nil {
		return b.inner.GetRange(ctx, key, offset, length)
	}
	if d.kind == LostAnswer {
		_, _ = b.inner.GetRange(ctx, key, offset, length)
	}
	return nil, b.opErr(OpGetRange, key, d.inject)
}

// Delete implements objstore.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.enter(ctx, OpDelete, key); err != nil {
		return err
	}
	d := b.decide(OpDelete, key)
	if d.inject == nil {
		return b.inner.Delete(ctx, key)
	}
	if d.kind == LostAnswer {
		_ = b.inner.Delete(ctx, key)
	}
	return b.opErr(OpDelete, key, d.inject)
}

// List implements objstore.Bucket. Rules match the prefix argument.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	if err := b.enter(ctx, OpList, prefix); err != nil {
		return nil, err
	}
	d := b.decide(OpList, prefix)
	if d.inject == nil {
		return b.inner.List(ctx, prefix, startAfter, limit)
	}
	if d.kind == LostAnswer {
		_, _ = b.inner.List(ctx, prefix, startAfter, limit)
	}
	return nil, b.opErr(OpList, prefix, d.inject)
}
