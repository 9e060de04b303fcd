package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// Index is the coverage index a Star keeps current: the span refs of
// every acknowledged record. *settle.RefIndex implements it; a host with
// an index of its own implements it with the RefIndex's guarantees
// (idempotent by position, spans of a stream tile it, never overwritten),
// and the same index must be the Coverage of the Settler.
type Index interface {
	// Locate reads and checks the spans a flight's payload carries.
	Locate(payload []byte) ([]settle.Span, error)
	// CoverFlights records the refs of every span of flights of star,
	// in chain order, skipping those covered already.
	CoverFlights(ctx context.Context, star string, flights []settle.Placed) error
	// Next returns the stream's first offset not covered.
	Next(ctx context.Context, stream string) (uint64, error)
	// NextMany is Next for many streams, in order: what a bulk open
	// reads, at a cost per batch rather than per stream.
	NextMany(ctx context.Context, streams []string) ([]uint64, error)
}

var _ Index = (*settle.RefIndex)(nil)

// Config is what a Star is built from.
type Config struct {
	// Star is the writer identity: one chain, shared by every stream the
	// star leads.
	Star string
	// Store is the metastore of the tenure records; Root their prefix ("",
	// or ending in '/'), the same root as the Minter's.
	Store metastore.Store
	Root  string
	// Session is the star's liveness: its registry entry and every stream
	// lease are bound to it. The host creates it (Store.NewSession) and
	// closes it after Close. When it ends, the star evicts every stream
	// through Finish and holds nothing more.
	Session metastore.Session
	// Minter, Settler and Index are the star's core parts. The Settler
	// must have a Fencer and settle into Index.
	Minter  *epoch.Minter
	Settler *settle.Settler
	Index   Index
	// Constants are those of the star's epochs.
	Constants epoch.Constants
}

// Options tunes a Star. The zero value works.
type Options struct {
	// Roller configures the star's roll.Roller. RollOnHalt is always
	// on, and Republish and Admit are the star's own: set neither.
	Roller roll.Options
	// AbsorbEvery is how many acknowledged flights the star lets pile up
	// before it covers them in the Index and advances its epoch's
	// checkpoint. 0 means 64; at most epoch.MaxWindow. Absorb does it on
	// demand.
	AbsorbEvery int
	// Backoff spaces the retries of a departure that could not land
	// (limbo), on Clock. Zero fields mean a fixed DefaultRetryDelay (a
	// zero Max becomes at least Min); each is at most clock.MaxBackoff.
	Backoff clock.Backoff
	// Flush, when set, runs in every departure after the stream's span
	// refs are written and before the clean-release mark: the host's own
	// release work (a snapshot of producer state, …). An error leaves the
	// departure in limbo, retried.
	Flush func(ctx context.Context, stream string) error
	// Admit, when set, is asked before every Open and Submit whether this
	// star may write now; an error refuses the call with it. A host under
	// the authority layer passes its authority.Agent's Admit: the star
	// then writes only while its grant is current (and builds its parts
	// over an authority.Guarded store, so that a stale grant's progress
	// writes fail too).
	Admit func() error
	// MaxSnapshot bounds the host bytes of a stream's snapshot
	// (SaveSnapshot). 0 means DefaultMaxSnapshot; at most
	// MaxSnapshotLimit.
	MaxSnapshot int
	// Clock drives limbo retries. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives gate decisions and departures (info), limbo (warn).
	// Nil discards.
	Logger *slog.Logger
}

// Star leads streams on one chain: it opens them through the gate,
// appends their records (several streams may share one flight), absorbs
// the acknowledged ones into the Index, and lets each one go through
// Finish. Its methods are safe for concurrent use.
type Star struct {
	cfg    Config
	opts   Options
	keys   keys
	reg    *Registry
	roller *roll.Roller
	clock  clock.Clock
	log    *slog.Logger

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	subMu sync.Mutex // orders submissions: offsets with slots

	// tenMu serializes the writes of last-writer records by this star
	// (admission and rolls), so that every record names the epoch the
	// stream's next acknowledgement lands in. cur is guarded by it.
	tenMu sync.Mutex
	cur   *epoch.Record

	mu          sync.Mutex
	held        map[string]*tenure
	opening     map[string]bool
	queue       []*Future      // submitted, not yet answered, in order
	acked       []placed       // acknowledged, not absorbed, in order
	kick        chan struct{}  // wakes the answer loop
	absorbReq   chan struct{}  // wakes the absorb loop
	absorbMu    sync.Mutex     // one absorb at a time
	absorbed    chain.Position // the last flight absorbed; guarded by mu
	room        chan struct{}  // closed when an absorb shrinks the backlog
	qroom       chan struct{}  // closed when the answer loop takes an answer
	absorbStats AbsorbStats
	closed      bool
	lost        bool // the session ended
}

// placed is one acknowledged flight and the spans it carries.
type placed struct {
	pos   chain.Position
	spans []settle.Span
}

// tenure is the star's state of one held stream.
type tenure struct {
	info      Tenure
	writerRev int64
	epoch     uint64 // the epoch the writer record names
	leaseRev  int64
	next      uint64 // the stream's next offset to submit
	inflight  int
	pending   []spanAt // acknowledged, not covered yet, in order
	unknown   uint64   // highest epoch holding an append of unknown outcome
	lostErr   error    // why the star can no longer append to it
	departing bool
	reason    Reason
	lastErr   error         // the last failed landing (limbo)
	changed   chan struct{} // closed and renewed when inflight drops
	finished  chan struct{} // closed when the departure ended
	finishErr error
}

type spanAt struct {
	pos  chain.Position
	span settle.Span
}

// Bounds of Options.
const (
	DefaultAbsorbEvery = 64
	// DefaultRetryDelay is what zero Backoff fields mean: limbo is retried
	// every 5 s.
	DefaultRetryDelay = 5 * time.Second
)

func (o *Options) validate() error {
	if o.AbsorbEvery < 0 || o.AbsorbEvery > epoch.MaxWindow {
		return &cutline.ConfigError{Field: "AbsorbEvery", Value: o.AbsorbEvery, Reason: fmt.Sprintf("must satisfy 0 ≤ AbsorbEvery ≤ %d (0 means %d)", epoch.MaxWindow, DefaultAbsorbEvery)}
	}
	if o.AbsorbEvery == 0 {
		o.AbsorbEvery = DefaultAbsorbEvery
	}
	if err := o.Backoff.Validate("Backoff"); err != nil {
		return err
	}
	if err := o.validateSnapshot(); err != nil {
		return err
	}
	o.Backoff = o.Backoff.Or(clock.Backoff{Min: DefaultRetryDelay, Max: DefaultRetryDelay})
	if o.Roller.Republish != nil {
		return &cutline.ConfigError{Field: "Roller.Republish", Value: "set", Reason: "the star sets it itself"}
	}
	if o.Roller.Admit != nil {
		return &cutline.ConfigError{Field: "Roller.Admit", Value: "set", Reason: "the star sets it itself"}
	}
	o.Clock = clock.Or(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Start registers the star (its entry bound to cfg.Session), settles its
// earlier epochs and mints the epoch it appends in. A star whose entry is
// held by another live session fails with ErrStarRunning.
func Start(ctx context.Context, cfg Config, opts Options) (*Star, error) {
	if err := epoch.ValidateName("star", cfg.Star); err != nil {
		return nil, err
	}
	for _, req := range []struct {
		field string
		nil   bool
	}{{"Store", cfg.Store == nil}, {"Session", cfg.Session == nil}, {"Minter", cfg.Minter == nil}, {"Settler", cfg.Settler == nil}, {"Index", cfg.Index == nil}} {
		if req.nil {
			return nil, &cutline.ConfigError{Field: req.field, Value: nil, Reason: "required"}
		}
	}
	if err := cfg.Constants.Validate(); err != nil {
		return nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	k, err := newKeys(cfg.Root)
	if err != nil {
		return nil, err
	}
	reg, err := NewRegistry(cfg.Store, cfg.Root, opts.Clock)
	if err != nil {
		return nil, err
	}
	s := &Star{cfg: cfg, opts: opts, keys: k, reg: reg, clock: opts.Clock, log: opts.Logger.With("star", cfg.Star),
		held: map[string]*tenure{}, opening: map[string]bool{}, kick: make(chan struct{}, 1), absorbReq: make(chan struct{}, 1)}
	// Register first: from here on the registry calls the star alive, and
	// the mint below supersedes the head of its previous run, so a
	// successor settles that epoch inline instead of waiting.
	if err := reg.Register(ctx, cfg.Star, cfg.Session); err != nil {
		return nil, err
	}
	ropts := opts.Roller
	ropts.RollOnHalt = true
	ropts.Republish = s.republish
	ropts.Admit = s.admitPayload
	if ropts.Clock == nil {
		ropts.Clock = opts.Clock
	}
	if ropts.Logger == nil {
		ropts.Logger = opts.Logger
	}
	r, err := roll.Open(ctx, cfg.Settler, cfg.Star, cfg.Constants, ropts)
	if err != nil {
		return nil, err
	}
	s.roller = r
	s.cur = r.Epoch()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(3)
	go s.answer()
	go s.absorbLoop()
	go s.watchSession()
	s.log.Info("star started", "epoch", s.cur.Epoch)
	return s, nil
}

// Name is the star's identity.
func (s *Star) Name() string { return s.cfg.Star }

// Epoch returns the record of the epoch the star appends in.
func (s *Star) Epoch() *epoch.Record { return s.roller.Epoch() }

// Stats returns a snapshot of the counters of the writer of the star's
// current epoch (roll.Roller.Stats).
func (s *Star) Stats() chain.WriterStats { return s.roller.Stats() }

// Lost is closed when the star's session has ended: it evicts every stream
// and can open none. Start a new Star with a new session.
func (s *Star) Lost() <-chan struct{} { return s.cfg.Session.Done() }

// Streams returns the streams the star holds (departing ones included),
// sorted.
func (s *Star) Streams() []Tenure {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Tenure, 0, len(s.held))
	for _, t := range s.held {
		out = append(out, t.info)
	}
	slices.SortFunc(out, func(a, b Tenure) int {
		switch {
		case a.Stream < b.Stream:
			return -1
		case a.Stream > b.Stream:
			return 1
		}
		return 0
	})
	return out
}

// Next returns where the held stream's next record goes: its next offset.
func (s *Star) Next(stream string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.held[stream]
	if t == nil {
		return 0, &StreamError{Stream: stream, Err: ErrNotHeld}
	}
	return t.next, nil
}

// Future is the pending outcome of one Submit: what this layer adds is the
// spans of the streams the flight carries (Spans, known at once), and an
// answer that comes only once the star has recorded the acknowledged
// flight for its index, so that a departure starting after the answer
// covers it. Its position is the roll.Future's, across rolls.
type Future struct {
	inner *roll.Future
	spans []settle.Span
	done  chan struct{}
	pos   chain.Position
	err   error
}

// Done is closed once the append is decided.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait blocks until the append is decided or ctx ends (which only stops
// the wait). A nil error is an acknowledgement: every record of the
// payload is durable at the position returned.
func (f *Future) Wait(ctx context.Context) (chain.Position, error) {
	select {
	case <-f.done:
		return f.pos, f.err
	case <-ctx.Done():
		return chain.Position{}, ctx.Err()
	}
}

// Spans returns the spans the payload carries.
func (f *Future) Spans() []settle.Span { return f.spans }

// Submit appends payload, a flight that may bundle records of several
// held streams. Each span must continue its stream exactly where the
// tenure is (Next): offsets tile a stream. Submit blocks while the window
// is full or a roll runs (ctx bounds the wait). The star keeps payload
// until the append is decided: do not modify it.
func (s *Star) Submit(ctx context.Context, payload []byte) (*Future, error) {
	spans, err := s.cfg.Index.Locate(payload)
	if err != nil {
		return nil, err
	}
	if s.opts.Admit != nil {
		if err := s.opts.Admit(); err != nil {
			return nil, err
		}
	}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if err := s.waitQueue(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	ts := make([]*tenure, len(spans))
	for i, sp := range spans {
		t, err := s.appendableLocked(sp.Stream)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if sp.Offset != t.next {
			s.mu.Unlock()
			return nil, &OffsetError{Stream: sp.Stream, Offset: sp.Offset, Want: t.next}
		}
		ts[i] = t
	}
	for i, t := range ts {
		t.next += spans[i].Count
		t.inflight++
	}
	s.mu.Unlock()
	inner, err := s.roller.Submit(ctx, payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		for i, t := range ts {
			t.next -= spans[i].Count
			s.doneInflightLocked(t)
		}
		return nil, err
	}
	f := &Future{inner: inner, spans: spans, done: make(chan struct{})}
	s.queue = append(s.queue, f)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return f, nil
}

// usableLocked refuses everything once the star is closed or lost.
func (s *Star) usableLocked() error {
	switch {
	case s.closed:
		return errClosed
	case s.lost:
		return ErrSessionLost
	}
	return nil
}

// appendableLocked returns the tenure of a stream records may be appended
// to.
func (s *Star) appendableLocked(stream string) (*tenure, error) {
	t := s.held[stream]
	switch {
	case t == nil:
		return nil, &StreamError{Stream: stream, Err: ErrNotHeld}
	case t.lostErr != nil:
		return nil, &StreamError{Stream: stream, Err: t.lostErr}
	case t.departing:
		return nil, &StreamError{Stream: stream, Err: ErrDeparting}
	}
	return t, nil
}

// admitPayload is the roller's last check before it places a payload in
// an epoch: every stream of it must still be held by this star, so that
// nothing of a stream lost in a roll reaches the new epoch.
func (s *Star) admitPayload(payload []byte) error {
	spans, err := s.cfg.Index.Locate(payload)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range spans {
		t := s.held[sp.Stream]
		switch {
		case t == nil:
			return &StreamError{Stream: sp.Stream, Err: ErrNotHeld}
		case t.lostErr != nil:
			return &StreamError{Stream: sp.Stream, Err: t.lostErr}
		}
	}
	return nil
}

func (s *Star) doneInflightLocked(t *tenure) {
	t.inflight--
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// answer passes the roller's answers on in submission order, after
// recording each acknowledged flight in the flight index: a departure that
// starts after an acknowledgement was seen covers it.
func (s *Star) answer() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		var head *Future
		if len(s.queue) > 0 {
			head = s.queue[0]
		}
		s.mu.Unlock()
		if head == nil {
			select {
			case <-s.kick:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		select {
		case <-head.inner.Done():
		case <-s.ctx.Done():
			return
		}
		pos, err := head.inner.Wait(s.ctx)
		if err == nil && !s.waitRoom() {
			return
		}
		s.mu.Lock()
		s.queue = s.queue[1:]
		if s.qroom != nil {
			close(s.qroom)
			s.qroom = nil
		}
		if err == nil {
			s.acked = append(s.acked, placed{pos: pos, spans: head.spans})
			s.absorbStats.MaxPending = max(s.absorbStats.MaxPending, len(s.acked))
		}
		for _, sp := range head.spans {
			t := s.held[sp.Stream]
			if t == nil {
				continue
			}
			switch {
			case err == nil:
				t.pending = append(t.pending, spanAt{pos: pos, span: sp})
			case errors.Is(err, roll.ErrDropped):
				// Certainly not in the chain; the tenure was lost.
			default:
				// Unknown: it may land below a later cut. Only a fence
				// of the epoch decides it.
				t.unknown = max(t.unknown, s.roller.Epoch().Epoch)
			}
			s.doneInflightLocked(t)
		}
		due := len(s.acked) >= s.opts.AbsorbEvery
		s.mu.Unlock()
		head.pos, head.err = pos, err
		close(head.done)
		if due {
			select {
			case s.absorbReq <- struct{}{}:
			default:
			}
		}
	}
}

// absorbLoop absorbs when asked. A failed absorb is retried
// Options.Backoff apart while a batch is due: the answers that wait for
// room in the backlog depend on it, and nothing else would ask again.
func (s *Star) absorbLoop() {
	defer s.wg.Done()
	seed := rand.Uint64()
	for {
		select {
		case <-s.absorbReq:
		case <-s.ctx.Done():
			return
		}
		// A request raised while the last absorb ran may find its batch
		// covered already: absorb only when one is due again (or an
		// answer waits for room).
		s.mu.Lock()
		due := len(s.acked) >= s.opts.AbsorbEvery || s.room != nil
		s.mu.Unlock()
		if !due {
			continue
		}
		for attempt := 0; ; attempt++ {
			err := s.Absorb(s.ctx)
			if err == nil || s.ctx.Err() != nil {
				break
			}
			s.mu.Lock()
			due := len(s.acked) >= s.opts.AbsorbEvery
			s.mu.Unlock()
			if !due {
				s.log.Warn("absorb failed; retried at the next batch", "err", err)
				break
			}
			delay := s.opts.Backoff.Delay(attempt, seed)
			s.log.Warn("absorb failed; retrying", "in", delay, "err", err)
			if clock.Sleep(s.ctx, s.clock, delay) != nil {
				return
			}
		}
	}
}

// Absorbed returns the position of the last flight the star covered in
// the Index (absorbs run every Options.AbsorbEvery acknowledgements, and
// on Absorb), and how many acknowledged flights wait for the next absorb.
func (s *Star) Absorbed() (last chain.Position, pending int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.absorbed, len(s.acked)
}

// AbsorbStats are the counters of a star's absorbs.
type AbsorbStats struct {
	// Pending is how many acknowledged flights are not covered yet;
	// MaxPending the most there ever were. The star keeps Pending at
	// most Options.AbsorbEvery plus its epoch's window: an answer that
	// would pass it waits for the absorb running then.
	Pending, MaxPending int
	// Absorbs counts the absorbs that covered something, Flights the
	// flights they covered, Failures the absorbs that failed (retried
	// at the next one).
	Absorbs, Flights, Failures int
	// Waits counts the answers that waited for an absorb to make room.
	Waits int
}

// AbsorbStats returns the star's absorb counters.
func (s *Star) AbsorbStats() AbsorbStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.absorbStats
	st.Pending = len(s.acked)
	return st
}

// Absorb covers every acknowledged flight not covered yet in the Index, in
// one Index.CoverFlights call, and advances the epoch's checkpoint past
// them.
func (s *Star) Absorb(ctx context.Context) error {
	s.absorbMu.Lock()
	defer s.absorbMu.Unlock()
	s.mu.Lock()
	batch := slices.Clone(s.acked)
	s.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	flights := make([]settle.Placed, len(batch))
	for i, p := range batch {
		flights[i] = settle.Placed{Position: p.pos, Spans: p.spans}
	}
	err := s.cfg.Index.CoverFlights(ctx, s.cfg.Star, flights)
	s.mu.Lock()
	if err != nil {
		s.absorbStats.Failures++
		s.mu.Unlock()
		return fmt.Errorf("lease: absorb: %w", err)
	}
	last := batch[len(batch)-1].pos
	s.acked = s.acked[len(batch):]
	s.absorbed = last
	s.absorbStats.Absorbs++
	s.absorbStats.Flights += len(batch)
	for _, t := range s.held {
		i := 0
		for i < len(t.pending) && t.pending[i].pos.Compare(last) <= 0 {
			i++
		}
		t.pending = t.pending[i:]
	}
	s.roomLocked()
	s.mu.Unlock()
	// Only the current epoch's checkpoint moves here: a roll settled
	// the earlier ones, which put theirs at the cut.
	if cur := s.roller.Epoch(); cur.Epoch == last.Epoch {
		if err := s.roller.Checkpoint(ctx, chain.Position{Epoch: last.Epoch, Slot: last.Slot + 1}); err != nil {
			return fmt.Errorf("lease: absorb: %w", err)
		}
	}
	return nil
}

// roomLocked wakes the answers waiting for the backlog to shrink.
func (s *Star) roomLocked() {
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
}

// waitQueue blocks a submission while a window's worth of appends wait
// for the answer loop: when that loop waits for an absorb, submissions
// wait too, instead of piling answered appends up behind it.
func (s *Star) waitQueue(ctx context.Context) error {
	for {
		s.mu.Lock()
		if len(s.queue) < s.roller.Epoch().Constants.Window || s.closed || s.lost {
			s.mu.Unlock()
			return nil
		}
		if s.qroom == nil {
			s.qroom = make(chan struct{})
		}
		room := s.qroom
		s.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return errClosed
		}
	}
}

// maxBacklog is how many acknowledged flights may wait for an absorb.
func (s *Star) maxBacklog() int { return s.opts.AbsorbEvery + s.roller.Epoch().Constants.Window }

// waitRoom blocks the answer loop while the backlog is full: the writer's
// window then fills and Submit waits, so memory follows what the index
// can absorb. It returns false when the star stops.
func (s *Star) waitRoom() bool {
	for {
		s.mu.Lock()
		if len(s.acked) < s.maxBacklog() {
			s.mu.Unlock()
			return true
		}
		if s.room == nil {
			s.room = make(chan struct{})
		}
		room := s.room
		s.absorbStats.Waits++
		s.mu.Unlock()
		select {
		case s.absorbReq <- struct{}{}:
		default:
		}
		select {
		case <-room:
		case <-s.ctx.Done():
			return false
		}
	}
}

// republish runs in every roll, once the old epoch is fenced and settled
// and before anything is placed in next: it moves each held stream's
// last-writer record to next, by compare-and-set on the record this star
// wrote and on its lease. A stream whose record or lease changed was taken
// over (after a successor settled the old epoch) or left with the session:
// it is lost, and its pooled appends are dropped, never republished.
func (s *Star) republish(ctx context.Context, next *epoch.Record, payloads [][]byte) ([]error, error) {
	s.tenMu.Lock()
	defer s.tenMu.Unlock()
	s.mu.Lock()
	var ts []*tenure
	for _, t := range s.held {
		if t.lostErr == nil && t.epoch < next.Epoch {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	for _, t := range ts {
		w := &WriterRecord{RecordHeader: metastore.RecordHeader{Kind: writerKind, Format: recFormat}, Stream: t.info.Stream, Star: s.cfg.Star, Epoch: next.Epoch, Class: next.Constants.Class, Tenure: t.info.Tenure}
		v, err := encode(w)
		if err != nil {
			return nil, err
		}
		rev, err := s.cfg.Store.Txn(ctx, metastore.Txn{
			If:   []metastore.Compare{{Key: s.keys.writer(w.Stream), Revision: t.writerRev}, {Key: s.keys.lease(w.Stream), Revision: t.leaseRev}},
			Then: []metastore.Op{{Key: s.keys.writer(w.Stream), Value: v}},
		})
		s.mu.Lock()
		switch {
		case err == nil:
			t.writerRev, t.epoch = rev, next.Epoch
		case errors.Is(err, metastore.ErrConflict):
			t.lostErr = ErrTenureLost
			s.log.Warn("tenure lost in a roll", "stream", w.Stream, "err", err)
		}
		s.mu.Unlock()
		if err != nil && !errors.Is(err, metastore.ErrConflict) {
			return nil, err
		}
	}
	s.cur = next
	// A dropped payload takes every stream it carries with it: a stream
	// whose record at offset o is dropped cannot go on at o+1 (offsets
	// tile a stream), so its later payloads are dropped too and its
	// tenure ends.
	errs := make([]error, len(payloads))
	var lost []string
	for i, p := range payloads {
		if errs[i] = s.admitPayload(p); errs[i] == nil {
			continue
		}
		spans, err := s.cfg.Index.Locate(p)
		if err != nil {
			continue
		}
		s.mu.Lock()
		for _, sp := range spans {
			if t := s.held[sp.Stream]; t != nil && t.lostErr == nil {
				t.lostErr = ErrTenureLost
				lost = append(lost, sp.Stream)
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	for _, t := range s.held {
		if t.lostErr != nil && !t.departing {
			lost = append(lost, t.info.Stream)
		}
	}
	s.mu.Unlock()
	// A lost tenure leaves through Finish on its own: a successor that
	// took the stream ends it superseded; a stream lost with a dropped
	// bundle is marked at what was acknowledged.
	for _, id := range lost {
		_, _ = s.startDeparture(id, ReasonEvict)
	}
	return errs, nil
}

// watchSession evicts every stream when the session ends.
func (s *Star) watchSession() {
	defer s.wg.Done()
	select {
	case <-s.cfg.Session.Done():
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	s.lost = true
	var streams []string
	for id := range s.held {
		streams = append(streams, id)
	}
	s.mu.Unlock()
	s.log.Warn("session lost: evicting every stream", "streams", len(streams))
	for _, id := range streams {
		s.startDeparture(id, ReasonEvict)
	}
}

// Close lets every held stream go through Finish (ReasonClose), closes the
// roller and deletes the star's registry entry. If ctx ends first, the
// departures that have not landed stay unmarked (an abandonment, which a
// successor settles) and the roller is aborted. The session is the
// host's: close it after Close.
func (s *Star) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	var ids []string
	for id := range s.held {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var errs []error
	// Cover everything acknowledged first: the checkpoint then moves past
	// it, and each stream's release flush has nothing left to write.
	if err := s.Absorb(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if err := s.Finish(ctx, id, ReasonClose); err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	errs = append(errs, s.roller.Close(ctx))
	s.cancel()
	s.wg.Wait()
	s.failQueue()
	if !s.lostNow() {
		if kv, ok, err := getOptional(ctx, s.cfg.Store, s.keys.star(s.cfg.Star)); err == nil && ok && kv.Session == s.cfg.Session.ID() {
			errs = append(errs, metastore.Delete(ctx, s.cfg.Store, kv.Key, kv.Revision))
		}
	}
	return errors.Join(errs...)
}

func (s *Star) lostNow() bool {
	select {
	case <-s.cfg.Session.Done():
		return true
	default:
		return false
	}
}

// Abort stops the star at once, as a crash would: no departure, no mark,
// no absorb; the roller's writer is aborted and every pending append fails
// with an unknown outcome. The leases stay until the session ends, and a
// successor settles what the star left.
func (s *Star) Abort() {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.roller.Close(ctx)
	s.cancel()
	s.wg.Wait()
	s.failQueue()
}

// failQueue answers the appends the answer loop left when it stopped.
func (s *Star) failQueue() {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, f := range q {
		select {
		case <-f.inner.Done():
			f.pos, f.err = f.inner.Wait(context.Background())
		default:
			f.err = errClosed
		}
		close(f.done)
	}
}

// Roll turns the star over to a new epoch with constants c (a change of
// class, quorum, window or zones), in process: the roller fences and
// settles the old epoch, every held stream's last-writer record moves to
// the new one, and the appends in flight are acknowledged at their old
// positions or republished. Appends submitted meanwhile wait for it.
func (s *Star) Roll(ctx context.Context, c epoch.Constants) error {
	return s.roller.Roll(ctx, c)
}
