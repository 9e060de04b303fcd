package settle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// Coverage is the host's index over the chain: the refs that map what the
// host serves (stream offsets, queue positions) to chain positions. The
// coverage invariant is that refs cover every acknowledged byte.
//
// A host keeps its index current as acknowledgements arrive, and advances the
// epoch's checkpoint (epoch.Minter.Advance) past what it has covered. When a
// writer dies between an acknowledgement and the host's index update,
// settlement hands every committed flight in [checkpoint, cut) to Cover, in
// slot order, so nothing acknowledged is left unreachable. Cover must
// therefore be idempotent by (star, epoch, slot): covering a flight twice
// changes nothing, and it must never make two positions cover the same host
// offset. A flight may carry records of several streams (a transit bundle);
// Cover covers all of them. Settlement moves no flight bytes: refs point
// into the flights where they are.
type Coverage interface {
	Cover(ctx context.Context, star string, f chain.Flight) error
}

// Errors of the RefIndex.
var (
	// ErrDoubleCover: a host offset is already covered by another chain
	// position (or another byte range of the same one). Two positions
	// claiming one offset means an acknowledged record would be served
	// twice or not at all; it is never overwritten. The error is a
	// *DoubleCoverError.
	ErrDoubleCover = errors.New("settle: offset covered by another position")
	// ErrGap: a span would leave offsets [next, offset) of its stream
	// uncovered, next being the first offset no ref covers. Spans of a
	// stream tile it, in order. The error is a *GapError.
	ErrGap = errors.New("settle: a span would leave offsets uncovered")
	// ErrLocate: the Locator could not read a flight's payload, or the
	// spans it read are not valid (see CheckSpans).
	ErrLocate = errors.New("settle: cannot locate flight payload")
)

// DoubleCoverError names the offset and the two positions claiming it.
// Existing is the ref at Offset when there is one; when there is none, the
// zero Ref, Offset lies inside a ref that starts before it: below Next, the
// first offset of Stream that no ref covers.
type DoubleCoverError struct {
	Stream   string
	Offset   uint64
	Existing Ref
	Offered  Ref
	// Next is the stream's first uncovered offset when the error was
	// found.
	Next uint64
}

func (e *DoubleCoverError) Error() string {
	if e.Existing.Star == "" {
		return fmt.Sprintf("settle: stream %s offset %d is already covered (inside a ref starting before it; the stream is covered up to %d), refusing %s",
			e.Stream, e.Offset, e.Next, e.Offered.at())
	}
	return fmt.Sprintf("settle: stream %s offset %d is covered by %s, refusing %s", e.Stream, e.Offset, e.Existing.at(), e.Offered.at())
}

func (e *DoubleCoverError) Unwrap() error { return ErrDoubleCover }

// GapError names a span that does not start where its stream's coverage
// ends: offsets [Next, Offset) would be covered by no ref.
type GapError struct {
	Stream string
	Offset uint64
	Next   uint64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("settle: stream %s is covered up to %d; a span at %d would leave [%d, %d) uncovered",
		e.Stream, e.Next, e.Offset, e.Next, e.Offset)
}

func (e *GapError) Unwrap() error { return ErrGap }

// Span is one stream's run of records inside a flight's payload: offsets
// [Offset, Offset+Count) of Stream, held by the payload's bytes [Start, End).
type Span struct {
	Stream     string
	Offset     uint64
	Count      uint64
	Start, End uint64
}

// String names the span: its stream, offset run and byte range.
func (s Span) String() string {
	return fmt.Sprintf("%s [%d, +%d) at bytes [%d, %d)", s.Stream, s.Offset, s.Count, s.Start, s.End)
}

// check validates what a span says on its own: a valid stream name, a
// non-empty offset run inside the offset space, an ordered byte range.
func (s Span) check() error {
	if err := epoch.ValidateName("stream", s.Stream); err != nil {
		return err
	}
	switch {
	case s.Count == 0:
		return errors.New("covers no offsets")
	case s.Offset+s.Count < s.Offset:
		return errors.New("runs past the offset space")
	case s.Start > s.End:
		return errors.New("its byte range ends before it starts")
	}
	return nil
}

// Ref maps a run of a stream's offsets [Offset, Offset+Count) to the flight
// that holds them, and to the bytes [Start, End) of that flight's payload
// that hold them. Refs written before bundles carry no byte range (0, 0).
type Ref struct {
	metastore.Header
	Stream string `json:"stream"`
	Offset uint64 `json:"offset"`
	Count  uint64 `json:"count"`
	Star   string `json:"star"`
	Epoch  uint64 `json:"epoch"`
	Slot   uint64 `json:"slot"`
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
}

func (r Ref) at() string {
	return fmt.Sprintf("%s/%d/%d (offsets [%d, +%d), bytes [%d, %d))", r.Star, r.Epoch, r.Slot, r.Offset, r.Count, r.Start, r.End)
}

// Position is the chain position the ref points at.
func (r Ref) Position() chain.Position { return chain.Position{Epoch: r.Epoch, Slot: r.Slot} }

// Span is the span the ref covers.
func (r Ref) Span() Span {
	return Span{Stream: r.Stream, Offset: r.Offset, Count: r.Count, Start: r.Start, End: r.End}
}

// same tells whether r is the ref o: the same run at the same bytes of the
// same flight.
func (r Ref) same(o Ref) bool {
	return r.Star == o.Star && r.Epoch == o.Epoch && r.Slot == o.Slot && r.Count == o.Count && r.Start == o.Start && r.End == o.End
}

// Locator reads from a flight's payload which stream offsets it carries: one
// Span per stream, each naming its run of offsets and the bytes that hold
// them. It is the host's payload format. The spans it returns are checked
// with CheckSpans before anything is covered.
type Locator func(payload []byte) ([]Span, error)

// CheckSpans checks the spans a Locator read from payload: there is at
// least one; each names a valid stream (epoch.ValidateName), covers at least
// one offset without running past the offset space, and holds the bytes
// [Start, End) with Start ≤ End ≤ len(payload); no two spans' byte ranges
// overlap; and no stream has two spans in one flight. A failure matches
// ErrLocate (and config.ErrInvalid for a bad stream name) and names the
// span.
func CheckSpans(payload []byte, spans []Span) error {
	if len(spans) == 0 {
		return fmt.Errorf("%w: no span", ErrLocate)
	}
	bad := func(i int, err error) error {
		return fmt.Errorf("%w: span %d (%v): %w", ErrLocate, i, spans[i], err)
	}
	streams := make(map[string]int, len(spans))
	for i, s := range spans {
		if err := s.check(); err != nil {
			return bad(i, err)
		}
		if s.End > uint64(len(payload)) {
			return bad(i, fmt.Errorf("its byte range runs past the payload's %d bytes", len(payload)))
		}
		if j, ok := streams[s.Stream]; ok {
			return bad(i, fmt.Errorf("stream %s has span %d in this flight already", s.Stream, j))
		}
		streams[s.Stream] = i
	}
	// Two byte ranges overlap when they share a byte: sorted by start, a
	// non-empty range overlaps an earlier one iff it starts before the
	// furthest end so far.
	order := make([]int, 0, len(spans))
	for i, s := range spans {
		if s.Start < s.End {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(spans[a].Start, spans[b].Start) })
	far := -1 // the span reaching furthest so far
	for _, i := range order {
		if far >= 0 && spans[i].Start < spans[far].End {
			return bad(i, fmt.Errorf("its bytes overlap span %d (%v)", far, spans[far]))
		}
		if far < 0 || spans[i].End > spans[far].End {
			far = i
		}
	}
	return nil
}

const (
	refKind, refFormat   = "ref", 1
	headKind, headFormat = "refhead", 1
	// coverAttempts bounds the compares CoverSpan may lose in a row. A
	// lost compare means another writer covered the stream's next span
	// meanwhile, after which CoverSpan decides without writing.
	coverAttempts = 16
)

// refHead is a stream's head: the first offset no ref covers.
type refHead struct {
	metastore.Header
	Stream string `json:"stream"`
	Next   uint64 `json:"next"`
}

// RefIndex is a ready Coverage kept in the metastore, one key per span:
// <root>refs/<stream>/<offset, 20 digits> → the star, epoch, slot and byte
// range that hold it, and one head per stream, <root>refheads/<stream> → the
// first offset no ref covers. A stream's spans tile it: each starts where
// the one before ends. Writes are create-only, so covering is idempotent and
// two positions can never cover one offset. Hosts with their own index
// implement Coverage with the same guarantees.
type RefIndex struct {
	store  metastore.Store
	root   string
	locate Locator
}

var _ Coverage = (*RefIndex)(nil)

// NewRefIndex returns a RefIndex under root ("" or ending in '/').
func NewRefIndex(store metastore.Store, root string, locate Locator) (*RefIndex, error) {
	if store == nil {
		return nil, &config.Error{Field: "store", Value: nil, Reason: "required"}
	}
	if locate == nil {
		return nil, &config.Error{Field: "locate", Value: nil, Reason: "required"}
	}
	if root != "" && !strings.HasSuffix(root, "/") {
		return nil, &config.Error{Field: "root", Value: fmt.Sprintf("%q", root), Reason: "must end with '/'"}
	}
	return &RefIndex{store: store, root: root, locate: locate}, nil
}

func (x *RefIndex) prefix(stream string) string { return x.root + "refs/" + stream + "/" }

func (x *RefIndex) key(stream string, offset uint64) string {
	return fmt.Sprintf("%s%020d", x.prefix(stream), offset)
}

func (x *RefIndex) headKey(stream string) string { return x.root + "refheads/" + stream }

// Locate reads the spans of a flight's payload with the index's Locator and
// checks them (CheckSpans). Every error matches ErrLocate.
func (x *RefIndex) Locate(payload []byte) ([]Span, error) {
	spans, err := x.locate(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLocate, err)
	}
	if err := CheckSpans(payload, spans); err != nil {
		return nil, err
	}
	return spans, nil
}

// Cover records the refs of flight f: every span its payload carries, in
// the Locator's order (CoverSpan). It succeeds when the same refs exist
// already. A failure leaves the spans before it covered; covering f again
// finishes the job.
func (x *RefIndex) Cover(ctx context.Context, star string, f chain.Flight) error {
	spans, err := x.Locate(f.Payload)
	if err != nil {
		return fmt.Errorf("%s/%v: %w", star, f.Position, err)
	}
	for _, s := range spans {
		if err := x.CoverSpan(ctx, star, f.Position, s); err != nil {
			return err
		}
	}
	return nil
}

// CoverSpan records the ref of span s of the flight at star's position pos.
// It succeeds when the same ref (same star, epoch, slot, count and byte
// range) exists already. Otherwise s must start where its stream's coverage
// ends (Next): the ref and the stream's head move together, in one
// transaction. A span starting below Next is a *DoubleCoverError
// (ErrDoubleCover), one starting above it a *GapError (ErrGap). Nothing is
// ever overwritten. A span that is not valid on its own (see CheckSpans)
// matches ErrLocate, a bad star or epoch config.ErrInvalid.
func (x *RefIndex) CoverSpan(ctx context.Context, star string, pos chain.Position, s Span) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("%w: %s/%v: span %v: %w", ErrLocate, star, pos, s, err)
	}
	if err := epoch.ValidateName("star", star); err != nil {
		return err
	}
	if pos.Epoch == 0 {
		return &config.Error{Field: "epoch", Value: pos.Epoch, Reason: "epoch numbers start at 1"}
	}
	ref := Ref{Header: metastore.Header{Kind: refKind, Format: refFormat}, Stream: s.Stream, Offset: s.Offset, Count: s.Count,
		Star: star, Epoch: pos.Epoch, Slot: pos.Slot, Start: s.Start, End: s.End}
	rv, err := metastore.EncodeRecord(&ref)
	if err != nil {
		return err
	}
	hv, err := metastore.EncodeRecord(&refHead{Header: metastore.Header{Kind: headKind, Format: headFormat}, Stream: s.Stream, Next: s.Offset + s.Count})
	if err != nil {
		return err
	}
	key, hkey := x.key(s.Stream, s.Offset), x.headKey(s.Stream)
	stale := int64(-1) // the head's revision when a ref at s.Offset was found past it
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("settle cover %s offset %d: %w", s.Stream, s.Offset, err)
		}
		next, rev, err := x.head(ctx, s.Stream)
		if err != nil {
			return err
		}
		switch {
		case s.Offset < next:
			cur, err := x.Lookup(ctx, s.Stream, s.Offset)
			switch {
			case errors.Is(err, metastore.ErrNotFound):
				return &DoubleCoverError{Stream: s.Stream, Offset: s.Offset, Offered: ref, Next: next}
			case err != nil:
				return err
			case cur.same(ref):
				return nil
			}
			return &DoubleCoverError{Stream: s.Stream, Offset: s.Offset, Existing: cur, Offered: ref, Next: next}
		case s.Offset > next:
			return &GapError{Stream: s.Stream, Offset: s.Offset, Next: next}
		case rev == stale:
			// A ref at the head's offset that the head does not count:
			// the head and the refs disagree (a hand edit, or refs
			// written without a head). Decide nothing from it.
			return &metastore.RecordError{Key: hkey, Kind: headKind,
				Reason: fmt.Sprintf("says the stream is covered up to %d, yet a ref starts there", next)}
		}
		_, err = x.store.Txn(ctx, metastore.Txn{
			If:   []metastore.Compare{{Key: key, Revision: 0}, {Key: hkey, Revision: rev}},
			Then: []metastore.Op{{Key: key, Value: rv}, {Key: hkey, Value: hv}},
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, metastore.ErrConflict) || attempt == coverAttempts {
			return fmt.Errorf("settle cover %s offset %d: %w", s.Stream, s.Offset, err)
		}
		if ce := (*metastore.ConflictError)(nil); errors.As(err, &ce) && ce.Key == key {
			stale = rev
		}
		// Another writer moved the head (or wrote the ref) meanwhile:
		// read again and decide from what is there now.
	}
}

// head reads stream's head: the first offset no ref covers and the head's
// revision (0, 0 when the stream has none yet).
func (x *RefIndex) head(ctx context.Context, stream string) (next uint64, rev int64, err error) {
	key := x.headKey(stream)
	kv, err := x.store.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("settle ref head %s: %w", stream, err)
	}
	var h refHead
	if err := metastore.DecodeRecord(key, kv.Value, headKind, headFormat, &h); err != nil {
		return 0, 0, err
	}
	if h.Stream != stream {
		return 0, 0, &metastore.RecordError{Key: key, Kind: headKind, Reason: fmt.Sprintf("claims stream %q", h.Stream)}
	}
	return h.Next, kv.Revision, nil
}

// Lookup returns the ref whose run starts at offset, or an error matching
// metastore.ErrNotFound.
func (x *RefIndex) Lookup(ctx context.Context, stream string, offset uint64) (Ref, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return Ref{}, err
	}
	key := x.key(stream, offset)
	kv, err := x.store.Get(ctx, key)
	if err != nil {
		return Ref{}, fmt.Errorf("settle ref %s/%d: %w", stream, offset, err)
	}
	return decodeRef(kv, stream, offset)
}

// decodeRef decodes the ref stored at kv, which must be stream's ref at
// offset: a ref that claims other coordinates than its key, names no valid
// star or epoch, covers no offsets (or runs past the offset space), or
// whose byte range ends before it starts is a *metastore.RecordError, never
// acted upon.
func decodeRef(kv metastore.KV, stream string, offset uint64) (Ref, error) {
	var r Ref
	if err := metastore.DecodeRecord(kv.Key, kv.Value, refKind, refFormat, &r); err != nil {
		return Ref{}, err
	}
	bad := func(reason string) (Ref, error) {
		return Ref{}, &metastore.RecordError{Key: kv.Key, Kind: refKind, Reason: reason}
	}
	switch {
	case r.Stream != stream || r.Offset != offset:
		return bad(fmt.Sprintf("claims stream %q offset %d", r.Stream, r.Offset))
	case epoch.ValidateName("star", r.Star) != nil:
		return bad(fmt.Sprintf("names no valid star: %q", r.Star))
	case r.Epoch == 0:
		return bad("epoch numbers start at 1")
	case r.Count == 0 || r.Offset+r.Count < r.Offset:
		return bad(fmt.Sprintf("covers %d offsets from %d", r.Count, r.Offset))
	case r.Start > r.End:
		return bad(fmt.Sprintf("its byte range [%d, %d) ends before it starts", r.Start, r.End))
	}
	return r, nil
}

// Refs yields a stream's refs in offset order.
func (x *RefIndex) Refs(ctx context.Context, stream string) iter.Seq2[Ref, error] {
	return func(yield func(Ref, error) bool) {
		if err := epoch.ValidateName("stream", stream); err != nil {
			yield(Ref{}, err)
			return
		}
		kvs, _, err := x.store.List(ctx, x.prefix(stream))
		if err != nil {
			yield(Ref{}, fmt.Errorf("settle refs %s: %w", stream, err))
			return
		}
		for _, kv := range kvs {
			var r Ref
			n, err := strconv.ParseUint(strings.TrimPrefix(kv.Key, x.prefix(stream)), 10, 64)
			if err != nil || x.key(stream, n) != kv.Key {
				err = &metastore.RecordError{Key: kv.Key, Kind: refKind, Reason: "key is not an offset"}
			} else {
				r, err = decodeRef(kv, stream, n)
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// Next returns the first offset of stream that no ref covers: where the
// stream's next append goes. It reads the stream's head, one key. A head
// that does not decode is a *metastore.RecordError.
func (x *RefIndex) Next(ctx context.Context, stream string) (uint64, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return 0, err
	}
	next, _, err := x.head(ctx, stream)
	return next, err
}
