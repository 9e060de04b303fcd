package batch

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// DedupAppenderConfig is what a DedupAppender is built from. Every field
// is required.
type DedupAppenderConfig struct {
	// Star is the star the records go through, one flight per record.
	Star *lease.Star
	// Store rebuilds and saves the streams' producer tables; it is over
	// Star.
	Store *DedupStore
	// Encode returns the bytes of record r at offset of its stream, in
	// the host's format: what Store's Split gives back for it, and its
	// Extract reads. It must be deterministic: a retry is compared with
	// the record the stream holds by encoding it again.
	Encode func(r Submission, offset uint64) []byte
}

// DedupAppenderOptions tunes a DedupAppender. The zero value works.
type DedupAppenderOptions struct {
	// Wrap returns the payload of the flight that holds one record (the
	// bytes Encode made) at offset of stream: a one-record bundle, say
	// (Encode). Nil means the record is the flight's whole payload, as
	// for a Locator whose one span is the payload.
	Wrap func(stream string, offset uint64, record []byte) []byte
	// MaxStreams bounds the streams open at once (each costs a producer
	// table in memory): an Append to one more fails with
	// ErrTooManyStreams. 0 means DefaultAppenderStreams; at most
	// MaxAppenderStreams.
	MaxStreams int
	// OpenWait bounds how long an Append waits while its stream's open
	// is deferred (a predecessor that may still be alive), retrying every
	// OpenRetry. 0 means 10 s and 100 ms; at most MaxOpenWait each, and
	// OpenRetry at least 1 ms.
	OpenWait, OpenRetry time.Duration
	// SnapshotEvery saves a stream's table once that many of its records
	// were applied since its last save; SnapshotInterval saves every
	// stream that moved, that often. 0 means DefaultSnapshotEvery and
	// DefaultSnapshotInterval; a negative value turns that trigger off; a
	// positive SnapshotInterval lies between MinSnapshotInterval and
	// MaxSnapshotInterval. Every departure of a stream saves its table too
	// (Flush).
	SnapshotEvery    int
	SnapshotInterval time.Duration
	// FlushWait bounds how long Flush waits for the table to apply every
	// acknowledged record. 0 means 5 s; at most MaxOpenWait.
	FlushWait time.Duration
	// OnOpen, when set, is called after each open of a stream, with its
	// tenure and how its table was rebuilt; OnSave after each save of a
	// table (err nil: saved; lease.ErrSnapshotTooBig: refused); OnAck
	// after each acknowledged append, with the time from its Submit.
	// They must not block.
	OnOpen func(OpenInfo)
	OnSave func(stream string, offset uint64, err error)
	OnAck  func(stream string, r Receipt, took time.Duration)
	Clock  clock.Clock
	Logger *slog.Logger
}

// Bounds of DedupAppenderOptions.
const (
	DefaultAppenderStreams  = 1024
	MaxAppenderStreams      = 1 << 20
	MaxOpenWait             = 10 * time.Minute
	DefaultSnapshotEvery    = 1000
	DefaultSnapshotInterval = 30 * time.Second
	MinSnapshotInterval     = time.Second
	MaxSnapshotInterval     = 24 * time.Hour
)

// Submission is one record for Append.
type Submission struct {
	Stream string
	// Producer and Seq name the record of an idempotent producer; ""
	// appends without deduplication.
	Producer string
	Seq      uint64
	// Token is the producer's fencing token ("" for none), judged
	// against the stream's installed one (lease.Star.CheckToken).
	Token string
	Data  []byte
}

// Appended is where Append's record is: its receipt, and whether the
// stream held it already (a retry judged a Duplicate, answered with the
// first receipt: nothing was appended).
type Appended struct {
	Receipt
	Duplicate bool
}

// OpenInfo is how a DedupAppender opened a stream: the tenure the gate
// admitted (Adopted: a tenure the star held already, left by an open
// whose rebuild failed), and how the table was rebuilt.
type OpenInfo struct {
	Tenure  lease.Tenure
	Adopted bool
	Rebuild RebuildInfo
}

// Errors of a DedupAppender, beside ErrFailed (an append not
// acknowledged: it may or may not be in the stream, and a retry with the
// same producer sequence is safe).
var (
	// ErrTooManyStreams: an Append to a stream past MaxStreams. Nothing
	// was appended.
	ErrTooManyStreams = errkind.New(cutline.ErrUnavailable, "batch: the appender holds as many streams as it may")
	// ErrSequenceTooOld: a producer sequence below the window the table
	// keeps: it may be in the stream already. Nothing was appended.
	ErrSequenceTooOld = errkind.New(cutline.ErrConflict, "batch: the producer sequence is too old to judge")
	// ErrPayloadConflict: a producer sequence sent before with another
	// payload. Nothing was appended.
	ErrPayloadConflict = errkind.New(cutline.ErrConflict, "batch: the producer sequence was sent with another payload")
)

var (
	errAppenderClosed = errkind.New(cutline.ErrClosed, "batch: appender closed")
	// errReplaced: a submit through a stream's state that is no longer
	// the current one, or is suspect; errFenced: a fencing token was
	// installed since the submission's was judged.
	errReplaced = errors.New("batch: the stream's state was replaced")
	errFenced   = errors.New("batch: a fencing token was installed since the token was judged")
)

// DedupAppender appends the records of idempotent producers through a
// lease.Star, one flight per record, each exactly once: a retry of a
// record the stream holds is answered with its first receipt, one in
// flight waits for it, one with another payload is refused. It opens a
// stream on its first Append (through the gate, waiting while it is
// deferred), rebuilds its producer table (DedupStore.Rebuild), applies
// every acknowledged record in offset order, and saves the table on a
// schedule and at every departure (Flush), so that a successor replays
// only a short tail.
//
// An append whose outcome is unknown (its flight failed) leaves the
// stream suspect: the next Append leaves it through Finish, which
// decides that append (the settlement covers it if it landed), opens it
// again and rebuilds the table from the stream. So a retry is judged
// against what the stream holds, never against a guess.
//
// A DedupAppender is safe for concurrent use. The star stays the host's:
// Close stops the saves, then the host closes or aborts the star, then
// Wait.
type DedupAppender struct {
	cfg  DedupAppenderConfig
	opts DedupAppenderOptions
	clk  clock.Clock
	log  *slog.Logger

	// submitMu orders a stream's Next with its Submit, and a token's
	// install with both; fences counts the installs (under submitMu),
	// so that a submission judged before one is judged again.
	submitMu sync.Mutex
	fences   atomic.Uint64

	mu      sync.Mutex
	streams map[string]*appendStream // opened, with their tables
	opening map[string]chan struct{} // opens in progress
	closed  bool
	acks    sync.WaitGroup // appends not decided yet

	kick       chan struct{} // the saves due by count
	stop       context.CancelFunc
	done       chan struct{}
	stopSaving sync.Once

	// afterJudge, set only by tests, runs once an Append judged its
	// token and took its stream's state, before it submits.
	afterJudge func()
}

// appendStream is what the appender knows of one opened stream: its
// producers' table (records applied in offset order), the acknowledged
// records waiting for an earlier one, and those in flight.
type appendStream struct {
	name     string
	table    *Dedup
	acked    map[uint64]ackedRecord
	inflight map[producerSeq]*pending
	// suspect: an append failed with an unknown outcome. broken: an
	// append failed; the table stops below it.
	suspect, broken bool
	// applied is closed and renewed with every record applied.
	applied chan struct{}
	savedAt uint64 // the offset of the last table saved or loaded
}

type producerSeq struct {
	producer string
	seq      uint64
}

type ackedRecord struct {
	key producerSeq
	r   Receipt
}

// pending is an append not decided yet.
type pending struct {
	done chan struct{}
	res  Appended
	err  error
	sum  [sha256.Size]byte // of the data, to tell a retry from a conflict
}

// NewDedupAppender returns an appender and starts its saves. Options
// out of bounds are refused with a *cutline.ConfigError.
func NewDedupAppender(cfg DedupAppenderConfig, opts DedupAppenderOptions) (*DedupAppender, error) {
	switch {
	case cfg.Star == nil:
		return nil, &cutline.ConfigError{Field: "Star", Reason: "required"}
	case cfg.Store == nil:
		return nil, &cutline.ConfigError{Field: "Store", Reason: "required"}
	case cfg.Encode == nil:
		return nil, &cutline.ConfigError{Field: "Encode", Reason: "required"}
	case opts.MaxStreams < 0 || opts.MaxStreams > MaxAppenderStreams:
		return nil, &cutline.ConfigError{Field: "MaxStreams", Value: opts.MaxStreams, Reason: fmt.Sprintf("must satisfy 0 ≤ MaxStreams ≤ %d", MaxAppenderStreams)}
	}
	for name, d := range map[string]time.Duration{"OpenWait": opts.OpenWait, "OpenRetry": opts.OpenRetry, "FlushWait": opts.FlushWait} {
		if d < 0 || d > MaxOpenWait {
			return nil, &cutline.ConfigError{Field: name, Value: d, Reason: fmt.Sprintf("must satisfy 0 ≤ %s ≤ %v", name, MaxOpenWait)}
		}
	}
	switch si := opts.SnapshotInterval; {
	case opts.OpenRetry > 0 && opts.OpenRetry < time.Millisecond:
		return nil, &cutline.ConfigError{Field: "OpenRetry", Value: opts.OpenRetry, Reason: "must be 0 or at least 1ms: a deferred open is retried that often"}
	case si > 0 && (si < MinSnapshotInterval || si > MaxSnapshotInterval):
		return nil, &cutline.ConfigError{Field: "SnapshotInterval", Value: si,
			Reason: fmt.Sprintf("must be 0, negative (off) or between %v and %v", MinSnapshotInterval, MaxSnapshotInterval)}
	}
	opts.MaxStreams = cmp.Or(opts.MaxStreams, DefaultAppenderStreams)
	opts.OpenWait = cmp.Or(opts.OpenWait, 10*time.Second)
	opts.OpenRetry = cmp.Or(opts.OpenRetry, 100*time.Millisecond)
	opts.FlushWait = cmp.Or(opts.FlushWait, 5*time.Second)
	opts.SnapshotEvery = cmp.Or(opts.SnapshotEvery, DefaultSnapshotEvery)
	opts.SnapshotInterval = cmp.Or(opts.SnapshotInterval, DefaultSnapshotInterval)
	a := &DedupAppender{cfg: cfg, opts: opts, clk: clock.Or(opts.Clock), log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		streams: map[string]*appendStream{}, opening: map[string]chan struct{}{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	var ctx context.Context
	ctx, a.stop = context.WithCancel(context.Background())
	go a.saveLoop(ctx)
	return a, nil
}

// Append appends s to its stream, opening the stream on its first
// Append, and returns where it was acknowledged. A record of a producer
// sequence the stream holds is not appended again: its first receipt is
// returned (Duplicate); one in flight is waited for. An append that was
// not acknowledged fails with a *RecordError matching ErrFailed: it may
// or may not be in the stream, and a retry with the same sequence is
// safe.
func (a *DedupAppender) Append(ctx context.Context, s Submission) (Appended, error) {
	if err := epoch.ValidateName("stream", s.Stream); err != nil {
		return Appended{}, err
	}
	gen := a.fences.Load()
	if err := a.cfg.Star.CheckToken(ctx, s.Stream, s.Token); err != nil {
		return Appended{}, err
	}
	st, err := a.stream(ctx, s.Stream, s.Token)
	if err == nil && a.afterJudge != nil {
		a.afterJudge()
	}
	for err == nil {
		var pd *pending
		switch pd, err = a.submit(ctx, st, s, gen); {
		case errors.Is(err, errFenced):
			gen = a.fences.Load()
			err = a.cfg.Star.CheckToken(ctx, s.Stream, s.Token)
		case errors.Is(err, errReplaced):
			st, err = a.stream(ctx, s.Stream, s.Token)
		case err == nil:
			select {
			case <-pd.done:
			case <-ctx.Done():
				return Appended{}, ctx.Err()
			}
			if pd.err == nil && pd.res.Duplicate {
				return pd.res, a.samePayload(ctx, s, pd.res.Offset)
			}
			return pd.res, pd.err
		}
	}
	return Appended{}, err
}

// stream returns the opened stream, opening it on its first Append: one
// open at a time per stream, the others wait for it.
func (a *DedupAppender) stream(ctx context.Context, name, token string) (*appendStream, error) {
	for {
		a.mu.Lock()
		s, ch := a.streams[name], a.opening[name]
		switch {
		case a.closed:
			a.mu.Unlock()
			return nil, errAppenderClosed
		case s != nil && !s.suspect:
			a.mu.Unlock()
			return s, nil
		case ch != nil:
			a.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case s == nil && len(a.streams)+len(a.opening) >= a.opts.MaxStreams:
			a.mu.Unlock()
			return nil, fmt.Errorf("%w (%d streams)", ErrTooManyStreams, a.opts.MaxStreams)
		}
		ch = make(chan struct{})
		a.opening[name] = ch
		a.mu.Unlock()
		ns, err := a.open(ctx, name, token, s != nil)
		a.mu.Lock()
		delete(a.opening, name)
		// A reopen that failed leaves the suspect state in place: the
		// next Append leaves the stream through Finish again.
		if err == nil {
			a.streams[name] = ns
		}
		a.mu.Unlock()
		close(ch)
		return ns, err
	}
}

// open opens the stream through the gate and rebuilds its table. To
// reopen (after an append of unknown outcome), the star first leaves the
// stream through Finish, which decides that append: it rolls the star's
// epoch, whose settlement covers the append if it landed.
func (a *DedupAppender) open(ctx context.Context, name, token string, reopen bool) (*appendStream, error) {
	// Every submit judged by the state this one replaces has reached the
	// star (and, on a reopen, Finish decides it); later ones find that
	// state replaced.
	a.submitMu.Lock()
	a.submitMu.Unlock()
	star := a.cfg.Star
	if reopen {
		if err := star.Finish(ctx, name, lease.ReasonReestablish); err != nil && !errors.Is(err, lease.ErrNotHeld) {
			return nil, err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	t := a.clk.AfterFunc(a.opts.OpenWait, cancel)
	ten, err := star.OpenWait(wctx, name, lease.OpenOptions{Token: token}, a.opts.OpenRetry)
	t.Stop()
	cancel()
	info := OpenInfo{Tenure: ten}
	if errors.Is(err, lease.ErrHeld) && !reopen {
		// The star holds the stream without a table here: an earlier open
		// took the tenure and then failed to rebuild. Nothing was
		// appended since, so the tenure still starts where the rebuild
		// must end: adopt it and rebuild again.
		held := star.Streams()
		i := slices.IndexFunc(held, func(t lease.Tenure) bool { return t.Stream == name })
		next, nerr := star.Next(name)
		if i < 0 || nerr != nil {
			return nil, err
		}
		info.Tenure, info.Adopted, err = held[i], true, nil
		info.Tenure.Next = next
		a.log.Info("adopting a held stream whose producers were not rebuilt", "stream", name, "tenure", held[i].Tenure, "next", next)
	}
	if err != nil {
		return nil, err
	}
	table, rb, err := a.cfg.Store.Rebuild(ctx, name, info.Tenure.Next)
	info.Rebuild = rb
	if rb.SetAside != nil {
		a.log.Warn("ignoring a producer snapshot; replaying the whole stream", "stream", name, "err", rb.SetAside)
	}
	if rb.Skipped > 0 {
		a.log.Warn("records below the retention point cannot be replayed: their producers' retries are no longer recognized",
			"stream", name, "skipped", rb.Skipped)
	}
	if err != nil {
		return nil, fmt.Errorf("batch: rebuild the producers of %s: %w", name, err)
	}
	producers, receipts := table.Len()
	a.log.Info("stream ready", "stream", name, "decision", info.Tenure.Decision, "tenure", info.Tenure.Tenure, "next", info.Tenure.Next,
		"had_snapshot", rb.HadSnapshot, "snapshot", rb.Snapshot, "replayed", rb.Replayed, "producers", producers, "receipts", receipts)
	if a.opts.OnOpen != nil {
		a.opts.OnOpen(info)
	}
	return &appendStream{name: name, table: table, acked: map[uint64]ackedRecord{}, inflight: map[producerSeq]*pending{},
		applied: make(chan struct{}), savedAt: rb.Snapshot}, nil
}

// submit appends s through st, unless st judges it a duplicate (or too
// old), or is no longer the stream's current state (errReplaced), or a
// fencing token was installed since gen (errFenced). It holds submitMu
// from the check to the Submit: open waits for it before it starts a new
// tenure, so that nothing judged by a replaced state reaches the new one.
func (a *DedupAppender) submit(ctx context.Context, st *appendStream, s Submission, gen uint64) (*pending, error) {
	key := producerSeq{s.Producer, s.Seq}
	sum := sha256.Sum256(s.Data)
	a.submitMu.Lock()
	defer a.submitMu.Unlock()
	if a.fences.Load() != gen {
		return nil, errFenced
	}
	a.mu.Lock()
	if a.streams[s.Stream] != st || st.suspect {
		a.mu.Unlock()
		return nil, errReplaced
	}
	var v Verdict
	var r Receipt
	var pd *pending
	if s.Producer != "" {
		r, v = st.table.Lookup(s.Producer, s.Seq)
		pd = st.inflight[key]
	}
	a.mu.Unlock()
	switch {
	case pd != nil && pd.sum != sum:
		return nil, fmt.Errorf("%w: %s's sequence %d is in flight", ErrPayloadConflict, s.Producer, s.Seq)
	case pd != nil:
		return pd, nil
	case s.Producer == "":
	case v == Duplicate:
		pd = &pending{done: make(chan struct{}), res: Appended{Receipt: r, Duplicate: true}}
		close(pd.done)
		return pd, nil
	case v == TooOld:
		return nil, fmt.Errorf("%w: %s's sequence %d", ErrSequenceTooOld, s.Producer, s.Seq)
	}
	off, err := a.cfg.Star.Next(s.Stream)
	if err != nil {
		a.forget(st, err)
		return nil, err
	}
	start := a.clk.Now()
	// Counted before it can be decided: a drain or a close that waits
	// for the appends sees it.
	a.acks.Add(1)
	payload := a.cfg.Encode(s, off)
	if a.opts.Wrap != nil {
		payload = a.opts.Wrap(s.Stream, off, payload)
	}
	f, err := a.cfg.Star.Submit(ctx, payload)
	if err != nil {
		a.acks.Done()
		a.forget(st, err)
		return nil, err
	}
	pd = &pending{done: make(chan struct{}), sum: sum}
	if s.Producer != "" {
		a.mu.Lock()
		st.inflight[key] = pd
		a.mu.Unlock()
	}
	go a.await(f, st, key, off, pd, start)
	return pd, nil
}

// samePayload checks that the record at off, which a retry was judged a
// duplicate of, holds the retry's payload: the table keeps no payloads
// (its snapshots stay small), so the record is read back and compared
// with what Encode makes of the retry; retries are rare. A record that
// retention dropped meanwhile cannot be compared, and is answered as the
// duplicate it is.
func (a *DedupAppender) samePayload(ctx context.Context, s Submission, off uint64) error {
	same, err := a.cfg.Store.Holds(ctx, s.Stream, off, a.cfg.Encode(s, off))
	switch {
	case errors.Is(err, settle.ErrBelowRetention):
		return nil
	case err == nil && !same:
		return fmt.Errorf("%w: %s's sequence %d is at offset %d", ErrPayloadConflict, s.Producer, s.Seq, off)
	}
	return err
}

// await decides one append: every lease.Future is answered, at the
// latest when the star closes or aborts.
func (a *DedupAppender) await(f *lease.Future, st *appendStream, key producerSeq, off uint64, pd *pending, start time.Time) {
	defer a.acks.Done()
	pos, err := f.Wait(context.Background())
	r := Receipt{Offset: off, Position: pos}
	if err == nil {
		pd.res = Appended{Receipt: r}
		if a.opts.OnAck != nil {
			a.opts.OnAck(st.name, r, a.clk.Now().Sub(start))
		}
	} else {
		pd.err = &RecordError{Stream: st.name, Offset: off, Err: err}
	}
	a.mu.Lock()
	if err == nil {
		// Applied in offset order: a retry finds the record in flight
		// until it is in the table.
		st.acked[off] = ackedRecord{key: key, r: r}
		a.applyLocked(st)
	} else {
		if key.producer != "" {
			delete(st.inflight, key)
		}
		st.broken = true
		// A flight the roller dropped was never written: the outcome is
		// known. Any other failure may have landed.
		st.suspect = st.suspect || !errors.Is(err, roll.ErrDropped)
	}
	a.mu.Unlock()
	close(pd.done)
}

// forget forgets a stream the star no longer holds, so that the next
// Append opens it again.
func (a *DedupAppender) forget(st *appendStream, err error) {
	if !errors.Is(err, lease.ErrNotHeld) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streams[st.name] == st {
		delete(a.streams, st.name)
	}
}

// applyLocked applies the acknowledged records that continue the table,
// and asks for a save once enough were applied since the last one.
func (a *DedupAppender) applyLocked(st *appendStream) {
	from := st.table.Next()
	for r, ok := st.acked[from]; ok; r, ok = st.acked[st.table.Next()] {
		delete(st.acked, st.table.Next())
		st.table.Apply(r.key.producer, r.key.seq, r.r)
		delete(st.inflight, r.key)
	}
	if st.table.Next() == from {
		return
	}
	close(st.applied)
	st.applied = make(chan struct{})
	if every := a.opts.SnapshotEvery; every > 0 && st.table.Next()-st.savedAt >= uint64(every) {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// Fence installs token (and mode) on stream (lease.Star.Fence) with no
// submit in between, and counts the install before it lets submits go
// on: an Append judged under the old token is judged again rather than
// appended after Fence returned.
func (a *DedupAppender) Fence(ctx context.Context, stream string, mode lease.Mode, token string) (*lease.Tenure, error) {
	a.submitMu.Lock()
	defer a.submitMu.Unlock()
	defer a.fences.Add(1)
	return a.cfg.Star.Fence(ctx, stream, mode, token)
}

// saveLoop saves the tables, one at a time, until Close: each stream's
// once SnapshotEvery records were applied since its last save
// (applyLocked kicks it), and every SnapshotInterval each stream that
// moved.
func (a *DedupAppender) saveLoop(ctx context.Context) {
	defer close(a.done)
	var tick <-chan time.Time
	arm := func() {
		if a.opts.SnapshotInterval > 0 {
			tick = a.clk.NewTimer(a.opts.SnapshotInterval).C()
		}
	}
	arm()
	for {
		least := uint64(max(a.opts.SnapshotEvery, 1))
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-tick:
			least = 1
			arm()
		}
		a.mu.Lock()
		var due []*appendStream
		for _, st := range a.streams {
			if !st.broken && st.table.Next() >= st.savedAt+least {
				due = append(due, st)
			}
		}
		a.mu.Unlock()
		for _, st := range due {
			a.save(ctx, st)
		}
	}
}

// save saves the stream's table at the offset it is applied up to. A
// save that fails is only logged: a later one, or the replay of a longer
// tail, makes up for it.
func (a *DedupAppender) save(ctx context.Context, st *appendStream) {
	a.mu.Lock()
	off, saved, table := st.table.Next(), st.savedAt, st.table.Clone()
	a.mu.Unlock()
	if off <= saved {
		return
	}
	err := a.cfg.Store.Save(ctx, st.name, table)
	switch {
	case err == nil:
		a.mu.Lock()
		st.savedAt = max(st.savedAt, off)
		a.mu.Unlock()
	case errors.Is(err, lease.ErrSnapshotTooBig):
		a.log.Warn("producer snapshot too big: a new holder replays a longer tail", "stream", st.name, "err", err)
	case ctx.Err() == nil:
		a.log.Warn("producer snapshot not saved", "stream", st.name, "offset", off, "err", err)
	}
	if a.opts.OnSave != nil {
		a.opts.OnSave(st.name, off, err)
	}
}

// Flush is the star's release flush (lease.Options.Flush): before a
// stream's clean-release mark, it saves the stream's table at the
// tenure's end, so that the next holder replays nothing. It waits (at
// most FlushWait) for the table to apply every acknowledged record; a
// table stopped by a failed append is not saved. It never fails the
// departure.
func (a *DedupAppender) Flush(ctx context.Context, stream string) error {
	a.mu.Lock()
	st := a.streams[stream]
	a.mu.Unlock()
	want, err := a.cfg.Star.Next(stream)
	if st == nil || err != nil {
		return nil
	}
	t := a.clk.NewTimer(a.opts.FlushWait)
	defer t.Stop()
	for {
		a.mu.Lock()
		next, broken, applied := st.table.Next(), st.broken, st.applied
		a.mu.Unlock()
		switch {
		case broken:
			return nil
		case next >= want:
			a.save(ctx, st)
			return nil
		}
		select {
		case <-applied:
		case <-t.C():
			a.log.Warn("producer snapshot: the table did not catch up before the release", "stream", stream, "table", next, "next", want)
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Release gives up every stream for a planned handoff: the star drains
// (each stream leaves through Finish, its table saved by Flush, and gets
// its clean-release mark), the appends in flight are decided, and the
// appender forgets the streams, so that an Append opens its stream
// again.
func (a *DedupAppender) Release(ctx context.Context) error {
	if err := a.cfg.Star.Drain(ctx); err != nil {
		return err
	}
	a.acks.Wait()
	a.mu.Lock()
	clear(a.streams)
	a.mu.Unlock()
	return nil
}

// Close stops the saves and refuses every later Append; the appends in
// flight are decided when the star closes or aborts (Wait). Flush still
// saves, so that the star's Close, after this, leaves each stream with
// its table. Close is idempotent.
func (a *DedupAppender) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.stopSaving.Do(func() {
		a.stop()
		<-a.done
	})
}

// Wait returns once every append submitted is decided: after the star
// closed or aborted, at once.
func (a *DedupAppender) Wait() { a.acks.Wait() }
