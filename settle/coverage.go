package settle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
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
	ErrDoubleCover = errkind.New(cutline.ErrConflict, "settle: offset covered by another position")
	// ErrGap: a span would leave offsets [next, offset) of its stream
	// uncovered, next being the first offset no ref covers. Spans of a
	// stream tile it, in order. The error is a *GapError.
	ErrGap = errkind.New(cutline.ErrInvalid, "settle: a span would leave offsets uncovered")
	// ErrLocate: the Locator could not read a flight's payload, or the
	// spans it read are not valid (see CheckSpans).
	ErrLocate = errkind.New(cutline.ErrUnavailable, "settle: cannot locate flight payload")
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
	metastore.RecordHeader
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
// ErrLocate (and cutline.ErrInvalid for a bad stream name) and names the
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
