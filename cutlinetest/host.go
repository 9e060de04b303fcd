package cutlinetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// ErrStopped: the host was killed, or closed, before it passed the answer
// on. As the Err of a Failed event the outcome is unknown to the producer
// (a dead process acknowledges nothing); as the Err of a Refused one the
// record was never placed.
var ErrStopped = errkind.New(cutline.ErrClosed, "cutlinetest: host stopped")

// HostOptions configures a Host. The zero value works.
type HostOptions struct {
	// Name labels the host's events. Empty means the star.
	Name string
	// Stream is the stream the host serves. Empty means "s".
	Stream string
	// History receives the host's events. Nil means a new one (see
	// Host.History); share one between the hosts of a run.
	History *History
	// AbsorbEvery is how many acknowledged records the host covers at
	// once before it advances the checkpoint past them. 0 means 1.
	AbsorbEvery int
	// LagCheckpoint keeps the checkpoint one batch behind what is
	// covered, as a host that persists its cursor lazily would: after
	// covering a batch the host moves the checkpoint to the batch's first
	// position, not past its last.
	LagCheckpoint bool
	// Coverage is the host's index. Nil means the party's RefIndex. The
	// first offset is where the party's RefIndex says the stream
	// continues.
	Coverage settle.Coverage
}

// Host is the reference host loop: a producer feeds it records with
// Submit; it places each at the stream's next offset (a Record payload)
// and submits it pipelined; an absorb loop waits for the answers in slot
// order, records them in the History, covers each acknowledged flight in
// the index and, every AbsorbEvery records, advances the epoch's
// checkpoint past them. It ends with Close (clean) or Kill (a crash).
type Host struct {
	a     appender
	star  string
	opts  HostOptions
	ctx   context.Context // ended by Kill and Close
	stop  context.CancelFunc
	dead  chan struct{} // closed by Kill
	kill  sync.Once
	queue chan item     // submissions in slot order
	done  chan struct{} // the absorb loop has ended

	subMu sync.Mutex // orders offsets with slots; guards next and shut
	next  uint64
	shut  bool // queue is closed

	mu      sync.Mutex
	acked   int
	failed  []string
	errs    []error
	changed chan struct{}
	pending []chain.Flight // acknowledged, not covered yet
	covered int
	cp      chain.Position // where the host last moved the checkpoint
}

type item struct {
	of      int
	id      string
	payload []byte
	w       waiter
}

// waiter is a pending append: a *chain.Future or a *roll.Future.
type waiter interface {
	Wait(context.Context) (chain.Position, error)
}

// appender is what a Host appends through: a chain.Writer or a
// roll.Roller.
type appender interface {
	submit(ctx context.Context, p []byte) (waiter, error)
	// checkpoint moves the checkpoint to pos.
	checkpoint(ctx context.Context, pos chain.Position) error
	close(ctx context.Context) error
	abort()
}

type writerAppender struct{ w *chain.Writer }

func (a writerAppender) submit(ctx context.Context, p []byte) (waiter, error) {
	f, err := a.w.Submit(ctx, p)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (a writerAppender) checkpoint(ctx context.Context, pos chain.Position) error {
	_, err := a.w.Checkpoint(ctx, pos.Slot)
	return err
}

func (a writerAppender) close(ctx context.Context) error { return a.w.Close(ctx) }
func (a writerAppender) abort()                          { a.w.Abort() }

type rollerAppender struct{ r *roll.Roller }

func (a rollerAppender) submit(ctx context.Context, p []byte) (waiter, error) {
	ap, err := a.r.Submit(ctx, p)
	if err != nil {
		return nil, err
	}
	return ap, nil
}

func (a rollerAppender) checkpoint(ctx context.Context, pos chain.Position) error {
	return a.r.Checkpoint(ctx, pos)
}

func (a rollerAppender) close(ctx context.Context) error { return a.r.Close(ctx) }

// abort is a roller's crash: Close with an ended context aborts its
// writer and fails what is pending.
func (a rollerAppender) abort() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = a.r.Close(ctx)
}

// StartHost starts a host over w, a writer of p's. It is killed when the
// test ends unless it was closed.
func StartHost(p *Party, w *chain.Writer, opts HostOptions) *Host {
	p.Env.T.Helper()
	return start(p, writerAppender{w}, w.Record().Star, opts)
}

// StartRoller starts a host over r, a roller over p's settler. It is
// killed when the test ends unless it was closed.
func StartRoller(p *Party, r *roll.Roller, opts HostOptions) *Host {
	p.Env.T.Helper()
	return start(p, rollerAppender{r}, r.Epoch().Star, opts)
}

func start(p *Party, a appender, star string, opts HostOptions) *Host {
	t := p.Env.T
	t.Helper()
	if opts.AbsorbEvery < 0 {
		t.Fatalf("cutlinetest: HostOptions.AbsorbEvery %d < 0", opts.AbsorbEvery)
	}
	opts.AbsorbEvery = max(opts.AbsorbEvery, 1)
	if opts.Name == "" {
		opts.Name = star
	}
	if opts.Stream == "" {
		opts.Stream = "s"
	}
	if opts.History == nil {
		opts.History = &History{}
	}
	if opts.Coverage == nil {
		opts.Coverage = p.Refs
	}
	next, err := p.Refs.Next(t.Context(), opts.Stream)
	if err != nil {
		a.abort()
		t.Fatalf("cutlinetest: host %s: where stream %s continues: %v", opts.Name, opts.Stream, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	h := &Host{a: a, star: star, opts: opts, ctx: ctx, stop: stop, next: next, dead: make(chan struct{}),
		queue: make(chan item, 256), done: make(chan struct{}), changed: make(chan struct{})}
	go h.run()
	t.Cleanup(h.Kill)
	return h
}

// History is where the host records its events.
func (h *Host) History() *History { return h.opts.History }

// Submit places the record id at the stream's next offset and submits it,
// waiting while the writer's window is full (ctx bounds the wait). A
// refusal (the writer halted or closed, ctx ended) is recorded as Refused
// and returned; the offset is not used then.
func (h *Host) Submit(ctx context.Context, id string) error {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	ev := HistoryEvent{Host: h.opts.Name, Star: h.star, ID: id, Payload: Record(h.opts.Stream, h.next, id)}
	w, err := waiter(nil), error(ErrStopped)
	if !h.shut {
		w, err = h.a.submit(ctx, ev.Payload)
	}
	if err != nil {
		ev.Op, ev.Err = Refused, err
		h.answer(ev)
		return err
	}
	h.next++
	ev.Op = Submitted
	it := item{of: h.opts.History.Add(ev), id: id, payload: ev.Payload, w: w}
	select {
	case h.queue <- it:
		return nil
	case <-h.dead:
		// Killed while the writer took it: it may or may not end up in
		// the chain.
		h.answer(HistoryEvent{Op: Failed, Host: h.opts.Name, Star: h.star, ID: id, Of: it.of, Err: ErrStopped})
		return ErrStopped
	}
}

// run answers the submissions in slot order and absorbs them.
func (h *Host) run() {
	defer close(h.done)
	var batch []chain.Flight
	for it := range h.queue {
		pos, err := it.w.Wait(h.ctx)
		if h.killed() {
			err = stopped(err)
		}
		ev := HistoryEvent{Op: Acked, Host: h.opts.Name, Star: h.star, ID: it.id, Of: it.of, Pos: pos}
		if err != nil {
			ev.Op, ev.Pos, ev.Err = Failed, chain.Position{}, err
		}
		h.answer(ev)
		if err != nil {
			continue
		}
		batch = append(batch, chain.Flight{Position: pos, Payload: it.payload})
		if len(batch) >= h.opts.AbsorbEvery {
			_ = h.absorb(batch)
			batch = nil
		}
	}
	if len(batch) > 0 && !h.killed() {
		_ = h.absorb(batch)
	}
}

// stopped is the answer of a host killed before it passed err (nil for an
// acknowledgement) on: ErrStopped, wrapping what the writer said.
func stopped(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return ErrStopped
	}
	return fmt.Errorf("%w: %w", ErrStopped, err)
}

func (h *Host) answer(ev HistoryEvent) {
	h.opts.History.Add(ev)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.Op {
	case Acked:
		h.acked++
		close(h.changed)
		h.changed = make(chan struct{})
	case Failed, Refused:
		h.failed = append(h.failed, ev.ID)
	}
}

// absorb adds the acknowledged flights of batch to those pending, covers
// them in order and advances the checkpoint past (or, LagCheckpoint, to
// the first of) those it covered. It stops at the first refused cover:
// what is left stays pending, for the next absorb or Flush. Each error is
// recorded (see Errors) and the first returned. A checkpoint that moved
// past them meanwhile (a successor settled the epoch) is no error. Nothing
// is absorbed once the host is killed; a write under way then ends first.
func (h *Host) absorb(batch []chain.Flight) error {
	ctx := context.Background()
	h.mu.Lock()
	h.pending = append(h.pending, batch...)
	pending, from := h.pending, h.cp
	h.mu.Unlock()
	done := 0
	var err error
	for _, f := range pending {
		if h.killed() {
			return ErrStopped
		}
		if err = h.opts.Coverage.Cover(ctx, h.star, f); err != nil {
			err = fmt.Errorf("cover %s/%v: %w", h.star, f.Position, err)
			h.fail(err)
			break
		}
		done++
	}
	h.mu.Lock()
	h.pending = h.pending[done:]
	h.covered += done
	h.mu.Unlock()
	if done == 0 {
		return err
	}
	to := pending[done-1].Position
	to.Slot++
	if h.opts.LagCheckpoint {
		to = pending[0].Position
	}
	if to.Slot == 0 || !from.Less(to) || h.killed() { // 0: where every checkpoint starts
		return err
	}
	switch cerr := h.a.checkpoint(ctx, to); {
	case cerr == nil:
		h.mu.Lock()
		h.cp = to
		h.mu.Unlock()
	case !errors.Is(cerr, epoch.ErrCursorRegression):
		cerr = fmt.Errorf("checkpoint to %s/%v: %w", h.star, to, cerr)
		h.fail(cerr)
		err = cmp.Or(err, cerr)
	}
	return err
}

// Flush covers, once the host has stopped (Close), what is still pending
// (acknowledged flights whose cover the metastore refused) and advances
// the checkpoint past them, as the absorb loop does. It returns nil once
// nothing is left pending, the first error otherwise (recorded too), and
// ErrStopped for a killed host or one still running.
func (h *Host) Flush() error {
	select {
	case <-h.done:
	default:
		return ErrStopped
	}
	if h.killed() {
		return ErrStopped
	}
	return h.absorb(nil)
}

func (h *Host) fail(err error) {
	if h.killed() {
		return // a dead process's errors are nobody's
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err)
}

func (h *Host) killed() bool {
	select {
	case <-h.dead:
		return true
	default:
		return false
	}
}

// Acked returns how many records the host acknowledged.
func (h *Host) Acked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked
}

// Failed returns the ids of the records the host did not acknowledge
// (failed or refused), in the order it answered them: what a producer
// retries.
func (h *Host) Failed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.failed...)
}

// WaitAcked waits until the host acknowledged n records. It returns an
// error when ctx ends or the host stops first.
func (h *Host) WaitAcked(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		k, ch := h.acked, h.changed
		h.mu.Unlock()
		if k >= n {
			return nil
		}
		select {
		case <-ch:
		case <-h.done:
			if h.Acked() >= n {
				return nil
			}
			return fmt.Errorf("cutlinetest: host %s stopped after %d acknowledgements, waiting for %d", h.opts.Name, h.Acked(), n)
		case <-ctx.Done():
			return fmt.Errorf("cutlinetest: host %s: %d acknowledgements, waiting for %d: %w", h.opts.Name, k, n, ctx.Err())
		}
	}
}

// Err joins what the absorb loop met that it must not: a refused cover, a
// refused checkpoint other than one a settlement moved past.
func (h *Host) Err() error {
	return errors.Join(h.Errors()...)
}

// Errors lists what Err joins, in the order the host met it.
func (h *Host) Errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

// Covered returns how many acknowledged flights the host covered.
func (h *Host) Covered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.covered
}

// Checkpoint returns where the host last moved its epoch's checkpoint
// (the zero Position before it moved it).
func (h *Host) Checkpoint() chain.Position {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cp
}

// shutQueue stops taking records, once a Submit under way has placed its
// record.
func (h *Host) shutQueue() {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	if !h.shut {
		h.shut = true
		close(h.queue)
	}
}

// Close stops taking records, waits until every submitted record is
// answered, absorbs them all and closes the writer (or roller). If ctx
// ends first the host is killed and ctx's error returned. It returns Err
// otherwise.
func (h *Host) Close(ctx context.Context) error {
	go h.shutQueue() // a Submit under way waits for window space
	select {
	case <-h.done:
	case <-ctx.Done():
		h.Kill()
		return ctx.Err()
	}
	if err := h.a.close(ctx); err != nil {
		h.Kill()
		return err
	}
	h.stop()
	return h.Err()
}

// Kill is the host's crash: it stops absorbing, aborts its writer (or
// roller) mid-flight and answers every record not yet answered with
// ErrStopped (wrapping the writer's error, chain.ErrAborted); nothing is
// covered or checkpointed after it. Idempotent.
func (h *Host) Kill() {
	h.kill.Do(func() { close(h.dead) })
	h.a.abort()
	h.stop()
	h.shutQueue()
	<-h.done
}
