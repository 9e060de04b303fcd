package chain

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/objstore"
)

// MaxPayload bounds the payload of one Append: the largest flight body the
// wire format carries (wire.MaxPayload).
const MaxPayload = wire.MaxPayload

// WriterOptions configures a Writer. The zero value works.
type WriterOptions struct {
	// Clock times retry backoff. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives retries (debug) and halts (warn). Nil discards.
	Logger *slog.Logger
	// Backoff times the retries of one bucket, jittered per slot, bucket
	// and attempt. Min and Max are each at most clock.MaxBackoff; zero
	// means clock.DefaultMinBackoff and clock.DefaultMaxBackoff.
	Backoff clock.Backoff
}

// Validate reports whether NewWriter would accept the options (a
// *cutline.ConfigError naming the field if not), without changing them.
func (o WriterOptions) Validate() error { return o.validate() }

func (o *WriterOptions) validate() error {
	if err := o.Backoff.Validate("Backoff"); err != nil {
		return err
	}
	o.Backoff = o.Backoff.Or(clock.Backoff{Min: clock.DefaultMinBackoff, Max: clock.DefaultMaxBackoff})
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.Or(o.Clock)
	return nil
}

// WriterStats counts a writer's work. Request counts do not depend on the
// machine, so they are what tests and benchmarks compare.
type WriterStats struct {
	// Submitted is the number of slots assigned.
	Submitted uint64
	// Released is the number of slots acknowledged.
	Released uint64
	// Creates is the number of Create requests sent (first tries and
	// retries).
	Creates uint64
	// CreateRetries counts Creates sent again after an unknown outcome.
	CreateRetries uint64
	// ExistsReads counts reads of an object after Create returned ErrExists
	// (including retried reads).
	ExistsReads uint64
	// ReadRetries counts those reads retried after an unreachable answer.
	ReadRetries uint64
	// Copies counts buckets confirmed to hold a slot's flight.
	Copies uint64
	// RepairCopies counts copies found already in place: a fencer's repair
	// or an earlier attempt whose answer was lost.
	RepairCopies uint64
	// Poisons counts buckets found holding poison.
	Poisons uint64
	// Foreign counts buckets found holding an object that is neither.
	Foreign uint64
	// Skipped counts bucket attempts not made because the slot was decided
	// (or the bucket's bound of in-flight requests was reached) first.
	Skipped uint64
}

type writerStats struct {
	submitted, released, creates, createRetries, existsReads, readRetries atomic.Uint64
	copies, repairCopies, poisons, foreign, skipped                       atomic.Uint64
}

// pipeline is the writer's window: which slots are assigned, which are
// released, and the futures in between.
type pipeline struct {
	// sem holds one token per assigned slot not yet released, so that
	// next − released ≤ window.
	sem chan struct{}
	// inflight bounds each bucket's requests in flight, so that a hung
	// bucket cannot pile up requests from slots decided without it.
	inflight []chan struct{}
	released atomic.Uint64 // mirror of relNext for lock-free readers

	next    uint64    // mu: next slot to assign
	relNext uint64    // mu: release point, the first slot not yet released
	ring    []*Future // mu: ring[s&(len(ring)-1)] for slots in [relNext, next); grows with the slots in flight
	// slab holds futures not yet handed out (mu): they are allocated
	// futureSlab at a time rather than one per Submit.
	slab []Future
	// keys holds the bytes of slot keys not yet made (mu): keySlab keys
	// share one allocation, and the bytes of a key are never written again
	// once its string is made. Only keys share it, so a bucket that keeps
	// a key keeps other keys alive, never a flight.
	keys []byte
	// queues holds each bucket's slots waiting for one of its workers.
	queues []bucketQueue
}

// futureSlab and keySlab are how many futures and slot keys one
// allocation makes.
const futureSlab, keySlab = 32, 32

// lifecycle is how the writer ends: a halt at a dead, blocked or
// conflicting slot, Close, Abort, and the goroutines to wait for.
type lifecycle struct {
	ctx    context.Context // cancelled by Abort: stops every request
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per running bucket worker

	halt      atomic.Uint64 // halt slot, or ^0 while not halted
	halted    bool          // mu
	haltErr   error         // mu
	haltedCh  chan struct{} // closed on the first halt
	closed    bool          // mu
	closingCh chan struct{} // closed by Close or Abort
	aborted   bool          // mu
	drained   chan struct{} // mu: closed once every worker has exited, after close
}

// Writer appends flights to the slots of one open epoch. It writes each
// slot's flight to all K buckets in parallel, counts a slot committed at W
// copies and dead at B = K−W+1 poisons, pipelines up to the epoch's window
// of slots past the release point, and acknowledges strictly in slot order.
// A dead slot halts the writer for good: see ErrFenced.
//
// A Writer is safe for concurrent use. Every Writer must end with Close or
// Abort, which wait for its goroutines to exit.
type Writer struct {
	rec     *epoch.Record
	claim   *epoch.Claim
	buckets []objstore.Bucket
	opts    WriterOptions
	clock   clock.Clock
	log     *slog.Logger

	star      string
	epoch     uint64
	k, w, b   int32
	keys      wire.Keys
	keyPrefix string // keys.Epoch(star, epoch)
	seed      uint64

	// mu guards the fields of pipe and life marked "mu".
	mu   sync.Mutex
	pipe pipeline
	life lifecycle

	stats writerStats

	// waiters lends Future.Wait the channel it parks on: each is held by
	// one Wait from Get to Put, registered on at most one future in
	// between, and receives at most one token (from resolve) per loan,
	// which that Wait takes before returning it.
	waiters sync.Pool
}

const notHalted = ^uint64(0)

// NewWriter returns a Writer for the open epoch rec, which must be the
// record Mint returned: the writer takes its claim (epoch.Record.Claim), so
// that only the mint that created an epoch writes it and nothing resumes
// it. A record read back with Get or Epochs is refused with
// epoch.ErrNotMinted, a second writer on one minted record with
// epoch.ErrClaimed. zones must serve every bucket the record names; the
// writer writes them in the record's order, at the record's key prefix. An
// epoch that is not open is a *epoch.StateError; a zone missing or bad
// options are a *cutline.ConfigError naming the field. The claim is taken
// only once everything else was accepted.
func NewWriter(rec *epoch.Record, zones Zones, opts WriterOptions) (*Writer, error) {
	if rec == nil {
		return nil, &cutline.ConfigError{Field: "rec", Value: nil, Reason: "required"}
	}
	if err := epoch.ValidateName("star", rec.Star); err != nil {
		return nil, err
	}
	if err := rec.Constants.Validate(); err != nil {
		return nil, err
	}
	if rec.State != epoch.StateOpen {
		return nil, &epoch.StateError{Star: rec.Star, Epoch: rec.Epoch, Have: rec.State, Op: "write"}
	}
	c := rec.Constants
	buckets, err := zones.Resolve(c.Buckets)
	if err != nil {
		return nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if rec.Cursors != (epoch.Cursors{}) {
		// A minted record starts with zero cursors; anything else was not
		// returned by Mint.
		return nil, fmt.Errorf("chain: writer for %s/%d: %w", rec.Star, rec.Epoch, epoch.ErrNotMinted)
	}
	claim, err := rec.Claim()
	if err != nil {
		return nil, fmt.Errorf("chain: writer for %s/%d: %w", rec.Star, rec.Epoch, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", rec.Star, rec.Epoch)
	w := &Writer{
		rec:       rec,
		claim:     claim,
		buckets:   append([]objstore.Bucket(nil), buckets...),
		opts:      opts,
		clock:     opts.Clock,
		log:       opts.Logger.With("star", rec.Star, "epoch", rec.Epoch),
		star:      rec.Star,
		epoch:     rec.Epoch,
		k:         int32(c.K()),
		w:         int32(c.W),
		b:         int32(c.B()),
		keys:      wire.KeysOf(rec),
		keyPrefix: wire.KeysOf(rec).Epoch(rec.Star, rec.Epoch),
		seed:      h.Sum64(),
		pipe: pipeline{
			sem:      make(chan struct{}, c.Window),
			inflight: make([]chan struct{}, c.K()),
			ring:     make([]*Future, min(initialRing, ringSize(c.Window))),
			queues:   make([]bucketQueue, c.K()),
		},
		life: lifecycle{
			ctx:       ctx,
			cancel:    cancel,
			haltedCh:  make(chan struct{}),
			closingCh: make(chan struct{}),
		},
	}
	for i := range w.pipe.queues {
		w.pipe.queues[i].cond.L = &w.pipe.queues[i].mu
	}
	for i := range w.pipe.inflight {
		// Elements of a chan struct{} take no memory: the bound costs
		// nothing until requests are in flight.
		w.pipe.inflight[i] = make(chan struct{}, 2*c.Window)
	}
	w.life.halt.Store(notHalted)
	return w, nil
}

// initialRing is the ring's first size; it doubles while more slots are in
// flight, up to the window, so a writer's memory follows what is in flight
// and not the window it was minted with.
const initialRing = 64

// ringSize is the smallest power of two ≥ n.
func ringSize(n int) int {
	s := 1
	for s < n {
		s <<= 1
	}
	return s
}

// at returns the ring cell of slot s.
func (w *Writer) at(s uint64) **Future { return &w.pipe.ring[s&uint64(len(w.pipe.ring)-1)] }

// growLocked doubles the ring, keeping the futures of [relNext, next) in
// their cells. w.mu is held.
func (w *Writer) growLocked() {
	old := w.pipe.ring
	w.pipe.ring = make([]*Future, 2*len(old))
	for s := w.pipe.relNext; s < w.pipe.next; s++ {
		*w.at(s) = old[s&uint64(len(old)-1)]
	}
}

// Checkpoint moves the epoch's checkpoint forward to upTo, through the
// writer's claim on the epoch: the host calls it once its index covers
// every acknowledged slot below upTo, so that a fence walks, and
// settlement covers, only what lies above. upTo past the release point (a
// slot not yet acknowledged) is a *epoch.CursorError (epoch.ErrCursorAhead),
// as is a checkpoint past the cut once the epoch is fenced; a checkpoint
// moving backwards (settlement moves it to the cut) is
// epoch.ErrCursorRegression.
func (w *Writer) Checkpoint(ctx context.Context, upTo uint64) (*epoch.Record, error) {
	if rel := w.Released(); upTo > rel {
		return nil, &epoch.CursorError{Star: w.star, Epoch: w.epoch, Cursor: "checkpoint", From: w.rec.Cursors.Checkpoint, To: upTo,
			Reason: fmt.Sprintf("passes the writer's release point %d: slots there are not acknowledged", rel), Err: epoch.ErrCursorAhead}
	}
	return w.claim.Advance(ctx, upTo)
}

// Record returns the epoch record the writer was made for.
func (w *Writer) Record() *epoch.Record { return w.rec }

// Released returns the release point: every slot below it is acknowledged,
// and it is the first slot that is not.
func (w *Writer) Released() uint64 { return w.pipe.released.Load() }

// Halted is closed when the writer halts: a slot turned out dead (ErrFenced)
// or blocked (ErrNoQuorum). See Err.
func (w *Writer) Halted() <-chan struct{} { return w.life.haltedCh }

// Err returns nil until the writer halts, then the halt error: a
// *FencedError naming the lowest dead slot known (errors.Is ErrFenced), or
// a *NoQuorumError. While slots below the halt point are still being
// decided, a lower dead slot can still be found and the error moves down to
// it; once Close returns nil, Err is final.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.life.haltErr
}

// Stats returns a snapshot of the writer's counters.
func (w *Writer) Stats() WriterStats {
	s := &w.stats
	return WriterStats{
		Submitted:     s.submitted.Load(),
		Released:      s.released.Load(),
		Creates:       s.creates.Load(),
		CreateRetries: s.createRetries.Load(),
		ExistsReads:   s.existsReads.Load(),
		ReadRetries:   s.readRetries.Load(),
		Copies:        s.copies.Load(),
		RepairCopies:  s.repairCopies.Load(),
		Poisons:       s.poisons.Load(),
		Foreign:       s.foreign.Load(),
		Skipped:       s.skipped.Load(),
	}
}

// Append submits payload and waits for its acknowledgement: Submit, then
// Future.Wait. If ctx ends while waiting, the slot keeps going (it may
// still be acknowledged) and Append returns ctx's error.
func (w *Writer) Append(ctx context.Context, payload []byte) (Position, error) {
	f, err := w.Submit(ctx, payload)
	if err != nil {
		return Position{}, err
	}
	return f.Wait(ctx)
}

// Submit assigns payload the next slot and starts writing it. It blocks
// while the window is full (window slots assigned past the release point)
// until a slot is released, ctx ends, or the writer halts or closes.
//
// The payload is encoded into the slot's flight before Submit returns; the
// writer keeps that flight, with the payload, until the slot is
// acknowledged, so that a host rolling to a new epoch can republish the
// payloads of failed futures (Future.Payload). Treat payload as owned by the
// writer until the future is done.
//
// Submit fails at once with the halt error (errors.Is ErrFenced) once the
// writer has halted, with cutline.ErrClosed after Close or Abort, and with a
// *PayloadError for a payload over MaxPayload; nothing is assigned then.
func (w *Writer) Submit(ctx context.Context, payload []byte) (*Future, error) {
	if len(payload) > MaxPayload {
		return nil, &PayloadError{Size: len(payload)}
	}
	if err := w.refusal(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case w.pipe.sem <- struct{}{}:
	default:
		select {
		case w.pipe.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.life.haltedCh:
			return nil, w.refusal()
		case <-w.life.closingCh:
			return nil, w.refusal()
		}
	}
	w.mu.Lock()
	if err := w.refusalLocked(); err != nil {
		w.mu.Unlock()
		<-w.pipe.sem
		return nil, err
	}
	if w.pipe.next-w.pipe.relNext == uint64(len(w.pipe.ring)) {
		w.growLocked()
	}
	if len(w.pipe.slab) == 0 {
		w.pipe.slab = make([]Future, futureSlab)
	}
	f := &w.pipe.slab[0]
	w.pipe.slab = w.pipe.slab[1:]
	f.w = w
	f.slot = w.pipe.next
	w.pipe.next++
	*w.at(f.slot) = f
	key := w.slotKeyLocked(f.slot)
	w.life.wg.Add(int(w.k))
	w.mu.Unlock()
	w.stats.submitted.Add(1)

	data := wire.EncodeFlight(w.star, w.epoch, f.slot, payload)
	f.mu.Lock()
	f.data = data
	f.mu.Unlock()
	// The workers get the flight with the job: the future drops its own
	// reference once acknowledged, while a straggling worker may still be
	// sending it. One encoding serves the K creates.
	for i := range w.pipe.queues {
		w.push(i, bucketJob{f: f, key: key, data: data})
	}
	return f, nil
}

// slotKeyLocked returns slot's key, made in w.pipe.keys. w.mu is held.
func (w *Writer) slotKeyLocked(slot uint64) string {
	n := len(w.keyPrefix) + slotDigits
	if cap(w.pipe.keys)-len(w.pipe.keys) < n {
		w.pipe.keys = make([]byte, 0, keySlab*n)
	}
	start := len(w.pipe.keys)
	w.pipe.keys = w.appendSlotKey(w.pipe.keys, slot)
	return unsafe.String(&w.pipe.keys[start], n)
}

func (w *Writer) refusal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refusalLocked()
}

func (w *Writer) refusalLocked() error {
	switch {
	case w.life.halted:
		return w.life.haltErr
	case w.life.closed:
		return errClosed
	}
	return nil
}

// slotDigits is the width of a slot number in a key (wire.Keys).
const slotDigits = 20

// appendSlotKey appends Keys.Slot of slot to dst, with the epoch part
// computed once.
func (w *Writer) appendSlotKey(dst []byte, slot uint64) []byte {
	dst = append(dst, w.keyPrefix...)
	var buf [slotDigits]byte
	d := strconv.AppendUint(buf[:0], slot, 10)
	for range slotDigits - len(d) {
		dst = append(dst, '0')
	}
	return append(dst, d...)
}

// onCommit releases every committed slot from the release point up, in
// order, stopping at the first one not committed or at the halt point.
func (w *Writer) onCommit() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.life.aborted {
		return
	}
	haltAt := w.life.halt.Load()
	for w.pipe.relNext < w.pipe.next && w.pipe.relNext < haltAt {
		cell := w.at(w.pipe.relNext)
		f := *cell
		if planted.On(planted.DeadSlotNoHalt) && f != nil && f.state.Load() == slotDead {
			w.failAloneLocked(cell, f) // planted: released with its error
			continue
		}
		if f == nil || f.state.Load() != slotCommitted {
			break
		}
		*cell = nil
		w.pipe.relNext++
		w.pipe.released.Store(w.pipe.relNext)
		w.stats.released.Add(1)
		f.resolve(Position{Epoch: w.epoch, Slot: f.slot}, nil)
		f.dropPayload()
		<-w.pipe.sem
	}
}

// haltAtLocked makes slot s the halt point if it is below the current one: every
// unresolved future at or past s fails with err and undecided slots there
// stop. w.mu is held.
func (w *Writer) haltAtLocked(s uint64, err error) {
	if w.life.halted && s >= w.life.halt.Load() {
		return
	}
	old := w.life.halt.Load()
	w.life.halt.Store(s)
	w.life.haltErr = err
	if !w.life.halted {
		w.life.halted = true
		close(w.life.haltedCh)
	}
	w.log.Warn("writer halted", "slot", s, "err", err)
	if w.life.aborted {
		return
	}
	for slot := max(s, w.pipe.relNext); slot < w.pipe.next && slot < old; slot++ {
		cell := w.at(slot)
		f := *cell
		if f == nil {
			continue
		}
		*cell = nil
		f.decide(slotAbandoned)
		f.resolve(Position{}, err)
	}
}

func (w *Writer) onDead(f *Future) {
	if planted.On(planted.DeadSlotNoHalt) {
		w.onCommit() // planted: no halt; onCommit fails the dead slot alone
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.haltAtLocked(f.slot, &FencedError{Star: w.star, Epoch: w.epoch, Slot: f.slot})
}

func (w *Writer) onConflict(f *Future, object error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.haltAtLocked(f.slot, &ConflictError{Star: w.star, Epoch: w.epoch, Slot: f.slot, Object: object})
}

func (w *Writer) onBlocked(f *Future) {
	err := &NoQuorumError{
		Star: w.star, Epoch: w.epoch, Slot: f.slot,
		Copies: int(f.copies.Load()), Poisons: int(f.poisons.Load()),
		Objects: f.foreignErrs(),
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.haltAtLocked(f.slot, err)
}

// Close stops accepting appends and waits until every assigned slot is
// decided and every goroutine of the writer has exited (including the
// background attempts of buckets that a decided slot no longer needed). If
// ctx ends first, Close returns ctx's error and the writer keeps working:
// call Close again or Abort. Close after Close or Abort waits the same way.
func (w *Writer) Close(ctx context.Context) error {
	drained := w.shut(false)
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Abort stops the writer now: it cancels retries and requests in flight,
// fails every unresolved future with a *AbortedError (errors.Is
// ErrAborted), and waits for every goroutine to exit. An aborted slot may or
// may not end up in the chain; only a fence of the epoch decides. Abort is
// idempotent and may follow Close.
func (w *Writer) Abort() {
	drained := w.shut(true)
	w.life.cancel()
	<-drained
}

func (w *Writer) shut(abort bool) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.life.closed {
		w.life.closed = true
		close(w.life.closingCh)
		w.life.drained = make(chan struct{})
		for i := range w.pipe.queues {
			w.pipe.queues[i].close()
		}
		go func() {
			w.life.wg.Wait()
			w.life.cancel()
			close(w.life.drained)
		}()
	}
	if abort && !w.life.aborted {
		w.life.aborted = true
		for slot := w.pipe.relNext; slot < w.pipe.next; slot++ {
			cell := w.at(slot)
			f := *cell
			if f == nil {
				continue
			}
			*cell = nil
			f.decide(slotAbandoned)
			f.resolve(Position{}, &AbortedError{Star: w.star, Epoch: w.epoch, Slot: slot})
		}
	}
	return w.life.drained
}
