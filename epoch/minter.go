package epoch

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/metastore"
)

// Errors returned by the Minter.
var (
	// ErrNoRecord: the epoch has no record: it was never minted, or its
	// number was burned by a crash between the counter and the record.
	// Such an epoch is empty; nothing was ever written to it.
	ErrNoRecord = errkind.New(cutline.ErrNotFound, "epoch: no such epoch record")
	// ErrCutMismatch: a cut different from the published one was offered.
	// Every fencer derives the same cut, so this is a programming error
	// (or corruption) and is never retried. The error is a *CutMismatchError.
	ErrCutMismatch = errkind.New(cutline.ErrCorrupt, "epoch: cut differs from the published cut")
	// ErrState: the record is not in a state that allows the transition.
	// The error is a *StateError.
	ErrState = errkind.New(cutline.ErrConflict, "epoch: wrong state for transition")
	// ErrCursorRegression: a cursor update would move a cursor backwards.
	// The error is a *CursorError.
	ErrCursorRegression = errkind.New(cutline.ErrConflict, "epoch: cursor regression")
	// ErrCursorAhead: a cursor update would move a cursor past the
	// position that bounds it: trimmed or rewritten past the checkpoint,
	// the checkpoint past the cut, or an open epoch's checkpoint past what
	// its writer acknowledged. The error is a *CursorError.
	ErrCursorAhead = errkind.New(cutline.ErrInvalid, "epoch: cursor ahead of its bound")
	// ErrNotMinted: Claim was called on a record that Mint did not return
	// in this process (one read back with Get or Epochs, or decoded). Only
	// the mint that created an epoch may write it; nothing resumes one.
	ErrNotMinted = errkind.New(cutline.ErrInvalid, "epoch: record was not returned by Mint")
	// ErrClaimed: the minted record was already claimed by a writer.
	ErrClaimed = errkind.New(cutline.ErrConflict, "epoch: minted record already claimed")
)

// CutMismatchError reports a disagreeing cut.
type CutMismatchError struct {
	Star      string
	Epoch     uint64
	Published uint64
	Offered   uint64
}

func (e *CutMismatchError) Error() string {
	return fmt.Sprintf("epoch %s/%d: cut %d offered but cut %d is published", e.Star, e.Epoch, e.Offered, e.Published)
}

func (e *CutMismatchError) Unwrap() error { return ErrCutMismatch }

// StateError reports a transition refused because of the record's state.
type StateError struct {
	Star  string
	Epoch uint64
	Have  State
	Op    string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("epoch %s/%d: cannot %s in state %s", e.Star, e.Epoch, e.Op, e.Have)
}

func (e *StateError) Unwrap() error { return ErrState }

// CursorError reports a refused cursor update.
type CursorError struct {
	Star   string
	Epoch  uint64
	Cursor string
	From   uint64
	To     uint64
	Reason string
	// Err is ErrCursorRegression (the cursor would move backwards) or
	// ErrCursorAhead (it would pass its bound).
	Err error
}

func (e *CursorError) Error() string {
	return fmt.Sprintf("epoch %s/%d: %s %d → %d: %s", e.Star, e.Epoch, e.Cursor, e.From, e.To, e.Reason)
}

// Unwrap makes errors.Is match Err.
func (e *CursorError) Unwrap() error { return e.Err }

// Options configures a Minter. The zero value works.
type Options struct {
	// Root prefixes every metastore key ("" or e.g. "prod/"). When not
	// empty it must end with '/'.
	Root string
	// Identity names the minting process (a broker, a star's host). It is
	// recorded in minted epochs (Record.MintedBy) for forensics and never
	// used for decisions; fence.Options.Identity is its counterpart in
	// poison.
	Identity string
	// Clock stamps mint, fence and settle times. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives state transitions at debug level. Nil discards.
	Logger *slog.Logger
}

// Minter mints epochs and is the only writer of epoch records: every
// transition (open → fenced → settled) and every cursor update is a CAS on
// the record. It is safe for concurrent use.
type Minter struct {
	store metastore.Store
	root  string
	opts  Options
	clock clock.Clock
	log   *slog.Logger
}

// NewMinter returns a Minter over store.
func NewMinter(store metastore.Store, opts Options) (*Minter, error) {
	if store == nil {
		return nil, &cutline.ConfigError{Field: "store", Value: nil, Reason: "required"}
	}
	if opts.Root != "" && !strings.HasSuffix(opts.Root, "/") {
		return nil, &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%q", opts.Root), Reason: "must end with '/'"}
	}
	if err := metastore.ValidateKey(opts.Root + "x"); err != nil {
		return nil, &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%q", opts.Root), Reason: "not a valid key prefix", Err: err}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Minter{store: store, root: opts.Root, opts: opts, clock: clock.Or(opts.Clock), log: log}, nil
}

// ChainKey is the metastore key of star's counter.
func (m *Minter) ChainKey(star string) string { return m.root + "chains/" + star }

// RecordKey is the metastore key of an epoch record. Epoch numbers are
// zero-padded so that key order is numeric order.
func (m *Minter) RecordKey(star string, epoch uint64) string {
	return fmt.Sprintf("%schains/%s/%020d", m.root, star, epoch)
}

// Chain returns star's counter. A star that never minted has Next = 1 and
// Revision = 0.
func (m *Minter) Chain(ctx context.Context, star string) (*CounterRecord, error) {
	if err := ValidateName("star", star); err != nil {
		return nil, err
	}
	key := m.ChainKey(star)
	kv, err := m.store.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return &CounterRecord{RecordHeader: metastore.RecordHeader{Kind: chainKind, Format: chainFormat}, Star: star, Next: 1, Heads: map[string]uint64{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("epoch chain %s: %w", star, err)
	}
	var c CounterRecord
	if err := metastore.DecodeRecord(key, kv.Value, chainKind, chainFormat, &c); err != nil {
		return nil, err
	}
	if c.Star != star || c.Next < 1 {
		return nil, &metastore.RecordError{Key: key, Kind: chainKind, Reason: fmt.Sprintf("claims star %q next %d", c.Star, c.Next)}
	}
	if c.Heads == nil {
		c.Heads = map[string]uint64{}
	}
	for class, head := range c.Heads {
		// Every head was minted from the counter, so it lies below it.
		if head >= c.Next {
			return nil, &metastore.RecordError{Key: key, Kind: chainKind, Reason: fmt.Sprintf("head %d of class %q is not below next %d", head, class, c.Next)}
		}
	}
	if c.Unsettled > c.Next {
		// The cursor is moved only up to the counter as read with it.
		return nil, &metastore.RecordError{Key: key, Kind: chainKind, Reason: fmt.Sprintf("settlement cursor %d is past next %d", c.Unsettled, c.Next)}
	}
	c.Revision = kv.Revision
	return &c, nil
}

// Mint starts a new epoch of star with the given constants: it increments
// the star's counter, moves the class head, and creates the open record, in
// one compare-and-set transaction. Only a returned record may be written to.
//
// An error matching metastore.ErrUnavailable leaves the outcome unknown: the
// epoch may have been minted. That is harmless: nobody holds it, and the
// next fence of that epoch finds it empty. Call Mint again for a fresh one.
func (m *Minter) Mint(ctx context.Context, star string, c Constants) (*Record, error) {
	if err := ValidateName("star", star); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// floor is the lowest number not yet taken by a record, found when the
	// counter turned out to lag the records (restored or hand-edited
	// metadata). The new epoch must be numbered above every existing one,
	// not merely unused: numbers order a star's epochs.
	floor := uint64(0)
	for {
		ch, err := m.Chain(ctx, star)
		if err != nil {
			return nil, err
		}
		n := max(ch.Next, floor)
		if n == math.MaxUint64 {
			// Unreachable by minting; only a corrupt counter or record
			// gets here. Refuse rather than wrap around.
			return nil, &metastore.RecordError{Key: m.ChainKey(star), Kind: chainKind, Reason: "epoch numbers exhausted"}
		}
		rec := &Record{
			RecordHeader: metastore.RecordHeader{Kind: recordKind, Format: recordFormat},
			Star:         star,
			Epoch:        n,
			Constants:    c,
			State:        StateOpen,
			MintedAt:     m.clock.Now().UTC(),
			MintedBy:     m.opts.Identity,
		}
		rec.Constants.Buckets = append([]string(nil), c.Buckets...)
		next := *ch
		next.Next = n + 1
		next.Heads = make(map[string]uint64, len(ch.Heads)+1)
		for k, v := range ch.Heads {
			next.Heads[k] = v
		}
		next.Heads[c.Class] = n
		cv, err := metastore.EncodeRecord(&next)
		if err != nil {
			return nil, err
		}
		rv, err := metastore.EncodeRecord(rec)
		if err != nil {
			return nil, err
		}
		rkey := m.RecordKey(star, n)
		rev, err := m.store.Txn(ctx, metastore.Txn{
			If:   []metastore.Compare{{Key: m.ChainKey(star), Revision: ch.Revision}, {Key: rkey, Revision: 0}},
			Then: []metastore.Op{{Key: m.ChainKey(star), Value: cv}, {Key: rkey, Value: rv}},
		})
		var ce *metastore.ConflictError
		switch {
		case err == nil:
			rec.Revision = rev
			rec.claim = &claimToken{minter: m}
			m.log.DebugContext(ctx, "epoch minted", "star", star, "epoch", n, "class", c.Class)
			return rec, nil
		case errors.As(err, &ce) && ce.Key == rkey:
			// The counter lags a record that exists (restored or
			// hand-edited metadata): never reuse a number, and number
			// the new epoch above every record.
			last, err := m.lastRecorded(ctx, star)
			if err != nil {
				return nil, err
			}
			if last == math.MaxUint64 {
				return nil, &metastore.RecordError{Key: m.RecordKey(star, last), Kind: recordKind, Reason: "epoch numbers exhausted"}
			}
			floor = max(floor, last+1, n+1)
			m.log.WarnContext(ctx, "epoch counter lags its records", "star", star, "next", ch.Next, "last", last)
		case errors.As(err, &ce):
			// Another mint won the counter; read it again.
		default:
			return nil, fmt.Errorf("epoch mint %s: %w", star, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// lastRecorded returns the highest epoch number that has a record under
// star's chain (0 if none). Keys that are not epoch numbers are ignored here;
// Epochs reports them.
func (m *Minter) lastRecorded(ctx context.Context, star string) (uint64, error) {
	prefix := m.ChainKey(star) + "/"
	kvs, _, err := m.store.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("epoch mint %s: list records: %w", star, err)
	}
	var last uint64
	for _, kv := range kvs {
		if n, ok := m.epochOf(star, prefix, kv.Key); ok {
			last = max(last, n)
		}
	}
	return last, nil
}

// epochOf parses the epoch number of a record key; ok is false for a key
// that is not exactly RecordKey(star, n).
func (m *Minter) epochOf(star, prefix, key string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(key, prefix), 10, 64)
	if err != nil || m.RecordKey(star, n) != key {
		return 0, false
	}
	return n, true
}

// Get reads an epoch record. It returns ErrNoRecord when the epoch was never
// minted or its number was burned.
func (m *Minter) Get(ctx context.Context, star string, epoch uint64) (*Record, error) {
	if err := ValidateName("star", star); err != nil {
		return nil, err
	}
	key := m.RecordKey(star, epoch)
	kv, err := m.store.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, fmt.Errorf("epoch %s/%d: %w", star, epoch, ErrNoRecord)
	}
	if err != nil {
		return nil, fmt.Errorf("epoch get %s/%d: %w", star, epoch, err)
	}
	return decodeRecord(kv, star, epoch)
}

func decodeRecord(kv metastore.KV, star string, epoch uint64) (*Record, error) {
	var r Record
	if err := metastore.DecodeRecord(kv.Key, kv.Value, recordKind, recordFormat, &r); err != nil {
		return nil, err
	}
	if err := r.check(kv.Key, star, epoch); err != nil {
		return nil, err
	}
	r.Revision = kv.Revision
	return &r, nil
}

// Epochs yields star's epoch records in epoch order. Burned numbers have no
// record and are not yielded. It lists every record the star ever had, in
// one request: EpochsFrom and Unsettled read only from a known epoch on.
func (m *Minter) Epochs(ctx context.Context, star string) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		if err := ValidateName("star", star); err != nil {
			yield(nil, err)
			return
		}
		m.list(ctx, star, 0, yield)
	}
}

// pointReads is how many numbers epochsFrom reads one key at a time before
// it lists the rest of the star's records in one request: a short walk
// (a settlement, the cursor) costs a key per epoch it visits, a long one
// (a reader catching up over many epochs) one listing.
const pointReads = 8

// EpochsFrom yields star's epoch records numbered from or more, in epoch
// order; burned numbers have no record and are not yielded. Its reads do
// not grow with the epochs below from: it reads the records by number, a
// key each, and lists the star's records in one request only after
// visiting several (a long walk, which a listing serves in one round
// trip). From 0 (the chain's start) it lists at once, as Epochs does. A walk by number
// ends at the first number without a record at or past the counter's
// Next, and sees no key that is not an epoch record; a listing reports
// such keys, as Epochs does.
func (m *Minter) EpochsFrom(ctx context.Context, star string, from uint64) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		if err := ValidateName("star", star); err != nil {
			yield(nil, err)
			return
		}
		m.epochsFrom(ctx, star, from, 0, yield)
	}
}

// epochsFrom yields star's records numbered n or more (see EpochsFrom).
// next is the counter's Next when the caller read it, 0 when not: it is
// read at the first number without a record, to tell a burned number from
// the end of the chain.
func (m *Minter) epochsFrom(ctx context.Context, star string, n, next uint64, yield func(*Record, error) bool) {
	if n == 0 {
		m.list(ctx, star, 0, yield) // the whole chain: one listing
		return
	}
	for reads := 0; ; reads++ {
		if reads == pointReads {
			m.list(ctx, star, n, yield)
			return
		}
		r, err := m.Get(ctx, star, n)
		if errors.Is(err, ErrNoRecord) && next == 0 {
			ch, cerr := m.Chain(ctx, star)
			if cerr != nil {
				yield(nil, cerr)
				return
			}
			next = max(ch.Next, 1)
			// A mint may have taken n between the two reads; a number
			// below the counter that has no record now never will.
			r, err = m.Get(ctx, star, n)
		}
		switch {
		case errors.Is(err, ErrNoRecord):
			if n >= next {
				return // the end: no record at or past the counter's Next
			}
			// Burned: the counter passed n, and only numbers at or past
			// it are ever minted.
		case err != nil:
			yield(nil, err)
			return
		default:
			if !yield(r, nil) {
				return
			}
		}
		if n == math.MaxUint64 {
			return
		}
		n++
	}
}

// list yields star's records numbered from or more, from one listing of
// all of them; a key that is not an epoch number is an error, wherever it
// lies.
func (m *Minter) list(ctx context.Context, star string, from uint64, yield func(*Record, error) bool) {
	prefix := m.ChainKey(star) + "/"
	kvs, _, err := m.store.List(ctx, prefix)
	if err != nil {
		yield(nil, fmt.Errorf("epoch list %s: %w", star, err))
		return
	}
	for _, kv := range kvs {
		n, ok := m.epochOf(star, prefix, kv.Key)
		if !ok {
			if !yield(nil, &metastore.RecordError{Key: kv.Key, Kind: recordKind, Reason: "key is not an epoch number"}) {
				return
			}
			continue
		}
		if n < from {
			continue
		}
		r, err := decodeRecord(kv, star, n)
		if !yield(r, err) {
			return
		}
	}
}

// Unsettled yields star's epoch records that are not settled, oldest
// first: what a successor settles before it serves. It starts at the
// counter's settlement cursor (Chain.Unsettled), below which every epoch
// is settled, and reads the records from there by number (EpochsFrom), so
// its reads grow with the epochs since the oldest unsettled one, not with
// the star's history.
func (m *Minter) Unsettled(ctx context.Context, star string) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		ch, err := m.Chain(ctx, star)
		if err != nil {
			yield(nil, err)
			return
		}
		m.epochsFrom(ctx, star, max(ch.Unsettled, 1), ch.Next, func(r *Record, err error) bool {
			if err != nil || r.State != StateSettled {
				return yield(r, err)
			}
			return true
		})
	}
}

// cursorAttempts bounds the compares moveCursor may lose in a row (to
// mints and other settlements); the cursor is then left where it is.
const cursorAttempts = 8

// moveCursor moves star's settlement cursor past the epoch just settled
// and every settled or burned one after it, up to the first unsettled
// epoch (or the counter's Next). It moves nothing while an older epoch is
// unsettled: the cursor stays at the oldest one that may be. A cursor left
// behind (a lost compare, an unavailable store) only costs the next
// settlement a few more reads, so failures are logged, not returned.
func (m *Minter) moveCursor(ctx context.Context, star string, settled uint64) {
	for range cursorAttempts {
		ch, err := m.Chain(ctx, star)
		if err != nil {
			m.log.DebugContext(ctx, "settlement cursor not moved", "star", star, "epoch", settled, "err", err)
			return
		}
		from := max(ch.Unsettled, 1)
		if from > settled || settled >= ch.Next {
			return // passed already, or the counter lags its records
		}
		to := from // the first epoch at or after from that is not settled
		if from == settled {
			to = settled + 1
		}
		var werr error
		stopped := false
		m.epochsFrom(ctx, star, to, ch.Next, func(r *Record, err error) bool {
			switch {
			case err != nil:
				werr = err
			case r.Epoch >= ch.Next || r.State != StateSettled:
				to = min(r.Epoch, ch.Next)
			default:
				return true
			}
			stopped = true
			return false
		})
		if werr != nil {
			m.log.DebugContext(ctx, "settlement cursor not moved", "star", star, "epoch", settled, "err", werr)
			return
		}
		if !stopped {
			// Every record up to the counter is settled; the numbers
			// in between are burned.
			to = ch.Next
		}
		if to <= from {
			return
		}
		next := *ch
		next.Unsettled = to
		v, err := metastore.EncodeRecord(&next)
		if err != nil {
			return
		}
		_, err = metastore.Put(ctx, m.store, m.ChainKey(star), v, ch.Revision)
		switch {
		case err == nil:
			m.log.DebugContext(ctx, "settlement cursor moved", "star", star, "from", from, "to", to)
			return
		case !errors.Is(err, metastore.ErrConflict):
			m.log.DebugContext(ctx, "settlement cursor not moved", "star", star, "epoch", settled, "err", err)
			return
		}
	}
}

// Superseded reports whether r is below the head of its class: a newer epoch
// of the same star and class has been minted. Heads are per class, so a
// standard roll never supersedes an express epoch.
func (m *Minter) Superseded(ctx context.Context, r *Record) (bool, error) {
	ch, err := m.Chain(ctx, r.Star)
	if err != nil {
		return false, err
	}
	return r.Epoch < ch.Heads[r.Constants.Class], nil
}

// update applies f to the current record and writes the result by CAS,
// retrying on conflicts with fresh reads. f returns (nil, nil) when nothing
// needs writing; the current record is returned then. On error the record
// is nil.
func (m *Minter) update(ctx context.Context, star string, epoch uint64, f func(r *Record) (*Record, error)) (*Record, error) {
	for {
		cur, err := m.Get(ctx, star, epoch)
		if err != nil {
			return nil, err
		}
		next, err := f(cur)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		v, err := metastore.EncodeRecord(next)
		if err != nil {
			return nil, err
		}
		var rev int64
		if planted.On(planted.CutPlainPut) && cur.State == StateOpen && next.State == StateFenced {
			// planted: a plain put instead of the compare-and-set
			rev, err = m.store.Txn(ctx, metastore.Txn{Then: []metastore.Op{{Key: m.RecordKey(star, epoch), Value: v}}})
		} else {
			rev, err = metastore.Put(ctx, m.store, m.RecordKey(star, epoch), v, cur.Revision)
		}
		if errors.Is(err, metastore.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("epoch update %s/%d: %w", star, epoch, err)
		}
		next.Revision = rev
		return next, nil
	}
}

// Publish moves an open epoch to fenced with the given cut. Publishing the
// cut that is already published succeeds and returns the record: racing
// fencers compute the same cut, so this is a publication, not an
// arbitration. A different cut is a *CutMismatchError, never retried; the
// record is nil with any error.
func (m *Minter) Publish(ctx context.Context, star string, epoch, cut uint64) (*Record, error) {
	return m.update(ctx, star, epoch, func(r *Record) (*Record, error) {
		if r.Fenced() {
			if r.Cut != cut {
				return nil, &CutMismatchError{Star: star, Epoch: epoch, Published: r.Cut, Offered: cut}
			}
			return nil, nil
		}
		if r.Cursors.Checkpoint > cut {
			return nil, &CursorError{Star: star, Epoch: epoch, Cursor: "checkpoint", From: r.Cursors.Checkpoint, To: cut, Reason: "the checkpoint is past the offered cut", Err: ErrCursorAhead}
		}
		n := *r
		n.State = StateFenced
		n.Cut = cut
		n.FencedAt = m.clock.Now().UTC()
		m.log.DebugContext(ctx, "epoch fenced", "star", star, "epoch", epoch, "cut", cut)
		return &n, nil
	})
}

// MarkSettled moves a fenced epoch to settled and its checkpoint to the
// cut. Settling a settled epoch is a no-op; an open epoch is a *StateError.
//
// Then it moves the star's settlement cursor (Chain.Unsettled) past the
// epoch when the epoch was the oldest that might be unsettled, and past
// every settled or burned epoch after it: a few reads and one write to the
// counter. A cursor that cannot move (a lost compare, an unavailable
// store) is no error: it only stays behind, and a later MarkSettled moves
// it.
func (m *Minter) MarkSettled(ctx context.Context, star string, epoch uint64) (*Record, error) {
	r, err := m.markSettled(ctx, star, epoch)
	if err != nil {
		return nil, err
	}
	m.moveCursor(ctx, star, epoch)
	return r, nil
}

func (m *Minter) markSettled(ctx context.Context, star string, epoch uint64) (*Record, error) {
	return m.update(ctx, star, epoch, func(r *Record) (*Record, error) {
		switch r.State {
		case StateSettled:
			return nil, nil
		case StateOpen:
			return nil, &StateError{Star: star, Epoch: epoch, Have: r.State, Op: "settle"}
		}
		n := *r
		n.State = StateSettled
		n.Cursors.Checkpoint = r.Cut
		n.SettledAt = m.clock.Now().UTC()
		m.log.DebugContext(ctx, "epoch settled", "star", star, "epoch", epoch, "cut", r.Cut)
		return &n, nil
	})
}

// Advance moves cursors forward to c. Every cursor must be ≥ its current
// value (else ErrCursorRegression); trimmed and rewritten may not pass the
// checkpoint, and once the epoch is fenced the checkpoint may not pass the
// cut (else ErrCursorAhead). The checkpoint of an open epoch is refused
// with a *StateError: only its writer knows what was acknowledged, so it
// moves through chain.Writer.Checkpoint (Claim.Advance). Any refusal is a
// *CursorError or *StateError and nothing is written. Equal cursors are a
// no-op.
func (m *Minter) Advance(ctx context.Context, star string, epoch uint64, c Cursors) (*Record, error) {
	return m.advance(ctx, star, epoch, func(Cursors) Cursors { return c }, false)
}

// advance moves the cursors to to(current cursors); writer says that the
// epoch's writer moves an open epoch's checkpoint.
func (m *Minter) advance(ctx context.Context, star string, epoch uint64, to func(Cursors) Cursors, writer bool) (*Record, error) {
	return m.update(ctx, star, epoch, func(r *Record) (*Record, error) {
		old := r.Cursors
		c := to(old)
		errf := func(name string, from, to uint64, reason string, err error) error {
			return &CursorError{Star: star, Epoch: epoch, Cursor: name, From: from, To: to, Reason: reason, Err: err}
		}
		switch {
		case c.Checkpoint < old.Checkpoint:
			return nil, errf("checkpoint", old.Checkpoint, c.Checkpoint, "moves backwards", ErrCursorRegression)
		case c.Trimmed < old.Trimmed:
			return nil, errf("trimmed", old.Trimmed, c.Trimmed, "moves backwards", ErrCursorRegression)
		case c.Rewritten < old.Rewritten:
			return nil, errf("rewritten", old.Rewritten, c.Rewritten, "moves backwards", ErrCursorRegression)
		case c.Trimmed > c.Checkpoint:
			return nil, errf("trimmed", old.Trimmed, c.Trimmed, fmt.Sprintf("passes the checkpoint %d", c.Checkpoint), ErrCursorAhead)
		case c.Rewritten > c.Checkpoint:
			return nil, errf("rewritten", old.Rewritten, c.Rewritten, fmt.Sprintf("passes the checkpoint %d", c.Checkpoint), ErrCursorAhead)
		case r.Fenced() && c.Checkpoint > r.Cut:
			return nil, errf("checkpoint", old.Checkpoint, c.Checkpoint, fmt.Sprintf("passes the cut %d", r.Cut), ErrCursorAhead)
		case r.State == StateOpen && c.Checkpoint != old.Checkpoint && !writer:
			return nil, &StateError{Star: star, Epoch: epoch, Have: r.State,
				Op: "move the checkpoint without its writer (an open epoch's checkpoint moves through chain.Writer.Checkpoint, which knows what was acknowledged)"}
		case c == old:
			return nil, nil
		}
		n := *r
		n.Cursors = c
		return &n, nil
	})
}
