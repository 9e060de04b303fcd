package roll

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/settle"
)

// Roller is a star's writer across epochs. It appends through a
// chain.Writer and, on Roll (a configuration change) or when the writer
// halts with RollOnHalt, turns over in process: it mints a new epoch, fences
// its own old epoch, acknowledges the pooled payloads that landed below the
// cut at their old positions, republishes the rest in order into the new
// epoch's first slots, and settles the old epoch. Producers see a delayed
// acknowledgement, not an error; no payload is acknowledged twice or at two
// positions, and no position is skipped.
type Roller struct {
	settler *settle.Settler
	minter  *epoch.Minter // the settler's
	zones   chain.Zones   // the settler's
	fencer  *fence.Fencer // the settler's
	star    string
	opts    Options
	clock   clock.Clock
	log     *slog.Logger

	// sub holds one token, taken by each submission while it assigns a
	// slot and records its append, so that pend stays in slot order. It
	// is a channel, not a mutex, so that a Submit waiting for it honours
	// its context while another waits for window space.
	sub chan struct{}

	mu      sync.Mutex
	w       *chain.Writer
	pend    []*Future // unresolved appends in chain order
	rolling chan struct{}
	// changed is closed and replaced (under mu) whenever pend shrinks or
	// a roll starts or ends: Close and waitRolling wait on it, not on the
	// clock.
	changed  chan struct{}
	closed   bool
	kick     chan struct{}
	requests chan rollRequest

	ctx    context.Context // the roller's lifetime
	cancel context.CancelFunc
	done   chan struct{}
}

type rollRequest struct {
	c   epoch.Constants
	res chan error
}

// Open starts star's writing: it settles every unsettled epoch of the
// star (a previous incarnation's, crashed or not), mints a new epoch with
// constants c, and starts appending there. The Settler must have a Fencer:
// the Roller fences its own epochs with it, mints and reads them with its
// Minter and writes them in its Zones.
func Open(ctx context.Context, s *settle.Settler, star string, c epoch.Constants, opts Options) (*Roller, error) {
	if s == nil {
		return nil, &cutline.ConfigError{Field: "settler", Value: nil, Reason: "required"}
	}
	if s.Fencer() == nil {
		return nil, &cutline.ConfigError{Field: "Settler.Fencer", Value: nil, Reason: "a Roller fences its own epochs"}
	}
	if err := opts.Backoff.Validate("Backoff"); err != nil {
		return nil, err
	}
	opts.Backoff = opts.Backoff.Or(clock.Backoff{Min: 100 * time.Millisecond, Max: 100 * time.Millisecond})
	if opts.Writer.Clock == nil {
		opts.Writer.Clock = opts.Clock
	}
	// Refuse bad input before anything is fenced, settled or minted.
	if err := epoch.ValidateName("star", star); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if _, err := s.Zones().Resolve(c.Buckets); err != nil {
		return nil, fmt.Errorf("roller %s: %w", star, err)
	}
	if err := opts.Writer.Validate(); err != nil {
		return nil, err
	}
	r := &Roller{settler: s, minter: s.Minter(), zones: s.Zones(), fencer: s.Fencer(), star: star, opts: opts, clock: clock.Or(opts.Clock),
		log: opts.Logger, kick: make(chan struct{}, 1), sub: make(chan struct{}, 1), changed: make(chan struct{}), requests: make(chan rollRequest), done: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if _, err := s.SettleAll(ctx, star); err != nil {
		return nil, fmt.Errorf("roller %s: settle earlier epochs: %w", star, err)
	}
	w, err := r.mint(ctx, c)
	if err != nil {
		return nil, err
	}
	r.w = w
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.dispatch()
	return r, nil
}

func (r *Roller) mint(ctx context.Context, c epoch.Constants) (*chain.Writer, error) {
	// Resolve the zones before minting: an epoch minted over buckets that
	// no zone serves could never be fenced or settled, and would block
	// every later start of the star.
	if _, err := r.zones.Resolve(c.Buckets); err != nil {
		return nil, fmt.Errorf("roller %s: %w", r.star, err)
	}
	rec, err := r.minter.Mint(ctx, r.star, c)
	if err != nil {
		return nil, fmt.Errorf("roller %s: mint: %w", r.star, err)
	}
	return chain.NewWriter(rec, r.zones, r.opts.Writer)
}

// Epoch returns the record of the epoch currently written.
func (r *Roller) Epoch() *epoch.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.Record()
}

// Stats returns a snapshot of the counters of the current epoch's writer
// (chain.Writer.Stats); a roll starts a new writer, whose counters start
// at zero.
func (r *Roller) Stats() chain.WriterStats {
	r.mu.Lock()
	w := r.w
	r.mu.Unlock()
	return w.Stats()
}

// Submit appends payload and returns its pending outcome. It blocks while
// the writer's window is full or a roll is in progress (ctx bounds the
// wait). The roller keeps payload until the append is decided: do not
// modify it.
func (r *Roller) Submit(ctx context.Context, payload []byte) (*Future, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, errClosed
		}
		if ch := r.rolling; ch != nil {
			r.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		w := r.w
		r.mu.Unlock()

		select {
		case r.sub <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.opts.Admit != nil {
			// Checked with the token held: a roll that began meanwhile
			// has run its Republish hook before this writer can be the
			// new one, and a payload placed in the old one is pooled and
			// passes that hook.
			if err := r.opts.Admit(payload); err != nil {
				<-r.sub
				return nil, err
			}
		}
		wf, err := w.Submit(ctx, payload)
		if err == nil {
			a := &Future{payload: payload, wf: wf, ep: w.Record().Epoch, done: make(chan struct{})}
			r.mu.Lock()
			r.pend = append(r.pend, a)
			r.mu.Unlock()
			<-r.sub
			r.poke()
			return a, nil
		}
		<-r.sub
		r.mu.Lock()
		replaced := r.w != w || r.rolling != nil
		closed := r.closed
		r.mu.Unlock()
		switch {
		case replaced:
			continue // a roll replaced the writer under us: try the new one
		case closed:
			return nil, errClosed // Close stopped the writer under us
		case errors.Is(err, chain.ErrFenced) && r.opts.RollOnHalt:
			r.poke() // the dispatcher rolls; wait for it
			if err := r.waitRolling(ctx, w); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, err
		}
	}
}

// waitRolling waits until the writer is no longer w (or the roller is
// closing).
func (r *Roller) waitRolling(ctx context.Context, w *chain.Writer) error {
	for {
		r.mu.Lock()
		cur, closed, changed := r.w, r.closed, r.changed
		r.mu.Unlock()
		if cur != w || closed {
			return nil
		}
		// The dispatcher rolls when it sees the halt (poked by the
		// caller); a roll replaces the writer and signals changed.
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Append is Submit followed by Wait.
func (r *Roller) Append(ctx context.Context, payload []byte) (chain.Position, error) {
	a, err := r.Submit(ctx, payload)
	if err != nil {
		return chain.Position{}, err
	}
	return a.Wait(ctx)
}

// Checkpoint moves the checkpoint of pos's epoch forward to pos.Slot, once
// the host's index covers every acknowledged append below pos. The current
// epoch's checkpoint moves through its writer, never past what it
// acknowledged (epoch.ErrCursorAhead); an earlier epoch's was fenced by a
// roll, so it moves at most to the cut, and settlement already put it
// there (epoch.ErrCursorRegression for anything lower).
func (r *Roller) Checkpoint(ctx context.Context, pos chain.Position) error {
	r.mu.Lock()
	w := r.w
	r.mu.Unlock()
	if w.Record().Epoch == pos.Epoch {
		_, err := w.Checkpoint(ctx, pos.Slot)
		return err
	}
	rec, err := r.minter.Get(ctx, r.star, pos.Epoch)
	if err != nil {
		return err
	}
	c := rec.Cursors
	c.Checkpoint = pos.Slot
	_, err = r.minter.Advance(ctx, r.star, pos.Epoch, c)
	return err
}

func (r *Roller) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Roll turns over to a new epoch with constants c (a change of class, W,
// window or buckets), in process. Appends submitted before Roll are
// acknowledged at their old positions or republished; appends submitted
// during the roll wait for it.
func (r *Roller) Roll(ctx context.Context, c epoch.Constants) error {
	if err := c.Validate(); err != nil {
		return err
	}
	// Refuse unknown zones here: the roll aborts the current writer before
	// it mints, so a roll that failed there would leave no writer.
	if _, err := r.zones.Resolve(c.Buckets); err != nil {
		return err
	}
	req := rollRequest{c: c, res: make(chan error, 1)}
	select {
	case r.requests <- req:
	case <-r.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dispatch resolves appends in order and runs every roll.
func (r *Roller) dispatch() {
	defer close(r.done)
	for {
		r.mu.Lock()
		var head *Future
		if len(r.pend) > 0 {
			head = r.pend[0]
		}
		w := r.w
		r.mu.Unlock()
		var headDone <-chan struct{}
		if head != nil && head.wf != nil {
			headDone = head.wf.Done()
		}
		select {
		case <-r.ctx.Done():
			return
		case req := <-r.requests:
			req.res <- r.roll(req.c, true)
		case <-r.kick:
			// Only a fenced epoch is rolled past: a blocked slot
			// (objects that are neither flight nor poison) would block
			// the fence of the old epoch as well; its appends fail.
			if r.opts.RollOnHalt && isHalted(w) && errors.Is(w.Err(), chain.ErrFenced) {
				if err := r.roll(w.Record().Constants, false); err != nil {
					r.log.Error("roll after halt failed", "star", r.star, "err", err)
				}
			}
		case <-headDone:
			pos, err := head.wf.Result()
			if err != nil && r.ctx.Err() != nil {
				// Closing: the writer was aborted under the head (select
				// may pick this case over the done context). Close
				// decides what is left, with errClosed.
				return
			}
			if err == nil || !r.opts.RollOnHalt || !errors.Is(err, chain.ErrFenced) {
				r.mu.Lock()
				r.pend = r.pend[1:]
				r.notifyLocked()
				r.mu.Unlock()
				head.resolve(pos, err)
				continue
			}
			if err := r.roll(w.Record().Constants, false); err != nil {
				r.log.Error("roll after halt failed", "star", r.star, "err", err)
			}
		}
	}
}

// notifyLocked wakes the waiters on changed; r.mu is held.
func (r *Roller) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func isHalted(w *chain.Writer) bool {
	select {
	case <-w.Halted():
		return true
	default:
		return false
	}
}

// roll turns over to a new epoch with constants c; planned is a Roll, not
// a halt. The old writer drains first (a planned roll has everything in
// flight decided; a halted one the slots below its halt point), so that
// usually only what could never be acknowledged is republished. A planned
// roll whose old writer closed cleanly fences at its release point
// (fence.Fencer.FenceAt) instead of walking; see clean.
func (r *Roller) roll(c epoch.Constants, planned bool) error {
	ctx := r.ctx
	r.mu.Lock()
	old := r.w
	r.rolling = make(chan struct{})
	r.notifyLocked()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		close(r.rolling)
		r.rolling = nil
		r.notifyLocked()
		r.mu.Unlock()
	}()
	// Let the old writer decide what it has in flight (on a halt, the
	// slots below the halt point keep going), bounded in time: a slot that
	// commits now is acknowledged at its position instead of being cut by
	// the fence and republished.
	dctx, cancel := context.WithCancel(ctx)
	t := r.clock.AfterFunc(10*time.Second, cancel)
	closeErr := old.Close(dctx)
	t.Stop()
	cancel()
	release, isClean := clean(old, closeErr)
	old.Abort()
	oldEp := old.Record().Epoch
	// A Submit adds its append to pend with the sub token after its slot
	// was assigned; once old is aborted no slot is assigned any more, so
	// with the token held pend holds every append placed in old.
	r.sub <- struct{}{}
	r.mu.Lock()
	pend := r.pend
	r.pend = nil
	r.mu.Unlock()
	<-r.sub
	var at *uint64 // the old writer's release point, when it closed cleanly
	if planned && isClean {
		at = &release
	}
	for {
		nw, cut, err := r.turnover(ctx, oldEp, c, at)
		if err != nil {
			// Only the roller's end stops a roll; Close fails what is left.
			r.mu.Lock()
			r.pend = pend
			r.mu.Unlock()
			return err
		}
		// Partition the pooled appends by the cut: below it they are
		// committed at their old positions; the rest are republished in
		// order into the new epoch's first slots. pend is in chain order,
		// so the acknowledged ones all come first.
		var next []*Future
		for _, a := range pend {
			if a.wf != nil && a.ep == oldEp && a.wf.Slot() < cut {
				a.resolve(chain.Position{Epoch: oldEp, Slot: a.wf.Slot()}, nil)
				continue
			}
			a.wf = nil
			next = append(next, a)
		}
		// The host decides what goes into the new epoch before anything
		// does: nw is nobody's writer yet, so nothing reaches it meanwhile.
		next, dropped, err := r.republish(ctx, nw.Record(), next)
		if err != nil {
			nw.Abort()
			r.mu.Lock()
			r.pend = next
			r.mu.Unlock()
			return err
		}
		ep := nw.Record().Epoch
		halted := false
		for _, a := range next {
			wf, err := nw.Submit(ctx, a.payload)
			if err != nil {
				halted = true // the new epoch was fenced already: roll again
				break
			}
			a.wf, a.ep = wf, ep
		}
		if halted {
			nw.Abort()
			oldEp, pend, at = ep, next, nil // an aborted writer did not close cleanly
			continue
		}
		r.mu.Lock()
		r.pend = next
		r.w = nw
		r.mu.Unlock()
		r.log.Info("rolled", "star", r.star, "from", oldEp, "cut", cut, "to", ep, "republished", len(next), "dropped", dropped)
		return nil
	}
}

// republish asks Options.Republish which of the pooled appends go
// into next, retrying the step until the hook answers one error per
// payload or the roller ends. It fails the dropped appends with ErrDropped
// and returns the others in order, with how many it dropped. When the
// roller ends first it returns every append, none decided.
func (r *Roller) republish(ctx context.Context, next *epoch.Record, pend []*Future) ([]*Future, int, error) {
	if r.opts.Republish == nil {
		return pend, 0, nil
	}
	payloads := make([][]byte, len(pend))
	for i, a := range pend {
		payloads[i] = a.payload
	}
	var verdicts []error
	err := r.retry(ctx, "republish", func() error {
		errs, err := r.opts.Republish(ctx, next, payloads)
		if err != nil {
			return fmt.Errorf("republish into %s/%d: %w", next.Star, next.Epoch, err)
		}
		if len(errs) != len(payloads) {
			return fmt.Errorf("republish into %s/%d: the Republish hook returned %d errors for %d payloads; it must return one per payload",
				next.Star, next.Epoch, len(errs), len(payloads))
		}
		verdicts = errs
		return nil
	}, func(error) bool { return false })
	if err != nil {
		return pend, 0, err
	}
	var keep []*Future
	for i, a := range pend {
		if verdicts[i] != nil {
			a.resolve(chain.Position{}, fmt.Errorf("%w: %w", ErrDropped, verdicts[i]))
			continue
		}
		keep = append(keep, a)
	}
	return keep, len(pend) - len(keep), nil
}

// clean reports whether w closed cleanly, given what its Close returned,
// and if so its release point: Close returned nil (every slot it assigned
// is decided and every goroutine of the writer, its requests included, has
// exited), it never halted, and every slot it assigned was acknowledged.
// Such a writer stopped exactly at its release point: every slot below it
// holds W verified copies, and it never sent a create at or past it, nor
// will. That is what fence.Fencer.FenceAt needs to fence without a walk.
func clean(w *chain.Writer, closeErr error) (uint64, bool) {
	if closeErr != nil || w.Err() != nil {
		return 0, false
	}
	rel := w.Released()
	return rel, rel == w.Stats().Submitted
}

// turnover mints the new epoch, fences and settles the old one, retrying
// each step until it succeeds or the roller ends. Minting first means a
// crash after it leaves an open epoch that the next start settles. With
// release set (a planned roll from a writer that closed cleanly, see
// clean), the old epoch is fenced at that release point
// (fence.Fencer.FenceAt, one round trip of poison creates instead of a
// walk), and when that decided the cut, settlement skips the garbage sweep
// (settle.Settler.SettleFencedAt, settle.SettleReport.NoGarbageSweep): the
// writer created nothing at or past it.
func (r *Roller) turnover(ctx context.Context, old uint64, c epoch.Constants, release *uint64) (*chain.Writer, uint64, error) {
	var nw *chain.Writer
	if err := r.retry(ctx, "mint", func() (err error) { nw, err = r.mint(ctx, c); return err }, finalStep); err != nil {
		return nil, 0, err
	}
	var cut uint64
	var at *fence.Report // the FenceAt report, for a fence at release
	fenceStep := func() (err error) { cut, err = r.fencer.Fence(ctx, r.star, old); return err }
	if release != nil {
		fenceStep = func() error {
			rep, err := r.fencer.FenceAt(ctx, r.star, old, *release)
			cut, at = rep.Cut, &rep
			return err
		}
	}
	if err := r.retry(ctx, "fence", fenceStep, finalStep); err != nil {
		nw.Abort()
		return nil, 0, err
	}
	settleStep := func() error { _, err := r.settler.Settle(ctx, r.star, old); return err }
	if at != nil {
		settleStep = func() error { _, err := r.settler.SettleFencedAt(ctx, *at); return err }
	}
	if err := r.retry(ctx, "settle", settleStep, finalStep); err != nil {
		nw.Abort()
		return nil, 0, err
	}
	return nw, cut, nil
}

// retry calls f until it succeeds, Backoff apart, and returns the error of
// an attempt that final says no retry can fix, or the context's error
// when the roller ends.
func (r *Roller) retry(ctx context.Context, step string, f func() error, final func(error) bool) error {
	seed := rand.Uint64()
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if final(err) {
			return err
		}
		r.log.Warn("roll step failed, retrying", "star", r.star, "step", step, "err", err)
		if err := r.opts.Backoff.Sleep(ctx, r.clock, attempt, seed); err != nil {
			return err
		}
	}
}

// finalStep tells which errors of minting, fencing and settling no retry
// can fix.
func finalStep(err error) bool {
	return errors.Is(err, epoch.ErrCutMismatch) || errors.Is(err, cutline.ErrInvalid) ||
		errors.Is(err, epoch.ErrClaimed) || errors.Is(err, epoch.ErrNotMinted) || errors.Is(err, chain.ErrConflictingFlight)
}

// Close stops accepting appends, waits until every pending append is
// decided, and closes the writer. If ctx ends first, the writer is aborted
// and the appends still pending fail with an error matching cutline.ErrClosed (they may or may
// not be in the chain: a fence decides).
func (r *Roller) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	var err error
	for {
		// A roll holds the appends it republishes outside pend.
		r.mu.Lock()
		busy := len(r.pend) > 0 || r.rolling != nil
		changed := r.changed
		r.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-changed:
			continue
		case <-ctx.Done():
			err = ctx.Err()
		}
		break
	}
	// Stop the dispatcher before the writer: aborting the writer first
	// would let the dispatcher fail the pending appends with the writer's
	// ErrAborted instead of errClosed.
	r.cancel()
	<-r.done
	r.mu.Lock()
	w := r.w
	r.mu.Unlock()
	if err == nil {
		err = w.Close(ctx)
	}
	w.Abort()
	// A Submit that passed the closed check may still be adding its
	// append; it does so with the sub token, and the writer refuses new
	// slots now.
	r.sub <- struct{}{}
	r.mu.Lock()
	pend := r.pend
	r.pend = nil
	r.mu.Unlock()
	<-r.sub
	for _, a := range pend {
		if a.wf != nil {
			// Acknowledged before the writer stopped: report it as such,
			// so the producer does not send it again.
			if pos, ferr := a.wf.Result(); ferr == nil {
				a.resolve(pos, nil)
				continue
			}
		}
		if err != nil {
			a.resolve(chain.Position{}, fmt.Errorf("%w: %w", errClosed, err))
		} else {
			a.resolve(chain.Position{}, errClosed)
		}
	}
	return err
}
