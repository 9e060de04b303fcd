package settle

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// Placed is a flight's position and the spans its payload carries: what a
// cover records.
type Placed struct {
	Position chain.Position
	Spans    []Span
}

// FlightCoverage is a Coverage that covers the spans of many flights in
// one call, at a cost per call rather than per span. The Settler uses it
// when the Coverage has it, and a lease.Star requires it.
type FlightCoverage interface {
	Coverage
	// Locate reads and checks the spans a flight's payload carries.
	Locate(payload []byte) ([]Span, error)
	// CoverFlights records the refs of every span of flights, which are
	// in chain order. It is idempotent: spans covered already by the
	// same refs are skipped.
	CoverFlights(ctx context.Context, star string, flights []Placed) error
}

// Limits of one cover transaction. They are etcd's defaults (128
// operations and 1.5 MiB per request), with room left for the request's
// own framing.
const (
	MaxTxnOps   = 128
	MaxTxnBytes = 1 << 20
	// roundSpans bounds the spans of one stream one round plans, so that
	// the stream's writes fit one transaction (a page per PageSpans spans,
	// and the head).
	roundSpans = 8 * PageSpans
	// coverAttempts bounds the rounds a cover may lose to compares in a
	// row. A lost compare means another writer moved a stream's head
	// meanwhile; the next round reads it again and decides from it.
	coverAttempts = 16
	// coverParallel bounds the reads and transactions one cover has in
	// flight.
	coverParallel = 8
	// maxCachedHeads bounds the stream heads a RefIndex remembers.
	maxCachedHeads = 1 << 14
)

// RefIndex is a ready Coverage kept in the metastore. A stream's refs live
// in pages of up to PageSpans spans (see refpage.go for the layout), so
// the index grows by one key per PageSpans spans of a stream, and one key
// of a stream's retention point once it has one. Its spans tile the
// stream: each starts where the one before ends. Nothing is ever
// overwritten: a span already covered is compared, never replaced, and a
// page is written only by compare-and-set on the revision it was read at.
// Hosts with an index of their own implement Coverage (and
// FlightCoverage) with the same guarantees.
//
// Costs. CoverFlights writes each stream it touches once per call, packing
// streams into transactions of at most MaxTxnOps operations: a cover of
// flights carrying S streams is about S ÷ 128 transactions, whatever the
// number of flights. It reads nothing for a stream whose head it wrote or
// read last (it remembers up to 16,384 heads; the compare in the
// transaction guards against any other writer) and one key for any other.
// Next is one read; Find is two (the retention point and the page).
type RefIndex struct {
	store  metastore.Store
	root   string
	locate Locator
	clock  clock.Clock // stamps pages with their newest span's time; nil: none

	mu     sync.Mutex
	heads  map[string]head
	noV1   bool          // the index holds no format-1 key (see lookForV1)
	v1Look chan struct{} // one lookForV1 at a time
}

var _ FlightCoverage = (*RefIndex)(nil)

// head is what the index knows of a stream's last page.
type head struct {
	rev  int64   // the page's revision; 0 when the stream has no page
	page refPage // the last page; Spans empty when the stream has none
}

// NewRefIndex returns a RefIndex under root ("" or ending in '/').
func NewRefIndex(store metastore.Store, root string, locate Locator) (*RefIndex, error) {
	if store == nil {
		return nil, &cutline.ConfigError{Field: "store", Value: nil, Reason: "required"}
	}
	if locate == nil {
		return nil, &cutline.ConfigError{Field: "locate", Value: nil, Reason: "required"}
	}
	if root != "" && !strings.HasSuffix(root, "/") {
		return nil, &cutline.ConfigError{Field: "root", Value: fmt.Sprintf("%q", root), Reason: "must end with '/'"}
	}
	if err := metastore.ValidatePrefix(root); err != nil {
		return nil, &cutline.ConfigError{Field: "root", Value: fmt.Sprintf("%q", root), Reason: "not a valid key prefix", Err: err}
	}
	return &RefIndex{store: store, root: root, locate: locate, heads: map[string]head{}, v1Look: make(chan struct{}, 1)}, nil
}

// WithClock makes the index stamp every page it writes with the time its
// newest span joined it, read from c, which retention by age
// (RetainPolicy's MaxAge) needs. Call it before the index is used; it
// returns x. Pages written without a clock carry no time: retention by
// age never deletes them, retention by offset or size does.
func (x *RefIndex) WithClock(c clock.Clock) *RefIndex {
	x.clock = c
	return x
}

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

// Cover records the refs of flight f: every span its payload carries. It
// succeeds when the same refs exist already.
func (x *RefIndex) Cover(ctx context.Context, star string, f chain.Flight) error {
	spans, err := x.Locate(f.Payload)
	if err != nil {
		return fmt.Errorf("%s/%v: %w", star, f.Position, err)
	}
	return x.CoverFlights(ctx, star, []Placed{{Position: f.Position, Spans: spans}})
}

// CoverSpan records the ref of span s of the flight at star's position
// pos: CoverFlights of one span.
func (x *RefIndex) CoverSpan(ctx context.Context, star string, pos chain.Position, s Span) error {
	return x.CoverFlights(ctx, star, []Placed{{Position: pos, Spans: []Span{s}}})
}

// spanAt is one span of a cover and the position of its flight.
type spanAt struct {
	pos  chain.Position
	span Span
}

// CoverFlights records the refs of every span of flights, the flights of
// star in chain order. Each span must start where its stream's coverage
// ends (Next), or be covered already by the same ref (same star, epoch,
// slot, count and byte range), which is skipped. A span starting below
// Next that is not that ref is a *DoubleCoverError (ErrDoubleCover), one
// starting above it a *GapError (ErrGap). A span that is not valid on its
// own (see CheckSpans) matches ErrLocate, a bad star or epoch
// cutline.ErrInvalid; nothing is written then.
//
// Streams are written in transactions of at most MaxTxnOps operations and
// MaxTxnBytes bytes, several at once; each stream's writes of one round
// are in one transaction, so a stream's coverage always ends at a span
// boundary. A failure may leave some streams covered and others not;
// covering the same flights again finishes the job.
func (x *RefIndex) CoverFlights(ctx context.Context, star string, flights []Placed) error {
	if err := epoch.ValidateName("star", star); err != nil {
		return err
	}
	var order []string
	pending := map[string][]spanAt{}
	for _, f := range flights {
		if f.Position.Epoch == 0 {
			return &cutline.ConfigError{Field: "epoch", Value: f.Position.Epoch, Reason: "epoch numbers start at 1"}
		}
		for _, s := range f.Spans {
			if err := s.check(); err != nil {
				return fmt.Errorf("%w: %s/%v: span %v: %w", ErrLocate, star, f.Position, s, err)
			}
			if _, ok := pending[s.Stream]; !ok {
				order = append(order, s.Stream)
			}
			pending[s.Stream] = append(pending[s.Stream], spanAt{pos: f.Position, span: s})
		}
	}
	// A deterministic order: a cover split over several transactions
	// splits the same way every time it is retried.
	slices.Sort(order)
	lost := 0
	for len(order) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("settle cover: %w", err)
		}
		plans, err := x.planRound(ctx, star, order, pending)
		if err != nil {
			return err
		}
		conflicted, err := x.apply(ctx, plans)
		if err != nil {
			return err
		}
		for _, p := range plans {
			pending[p.stream] = pending[p.stream][p.taken:]
		}
		if conflicted {
			if lost++; lost == coverAttempts {
				return fmt.Errorf("settle cover: %w: the heads of its streams kept changing (%d rounds lost)", metastore.ErrConflict, lost)
			}
		} else {
			lost = 0
		}
		next := order[:0]
		for _, id := range order {
			if len(pending[id]) > 0 {
				next = append(next, id)
			}
		}
		order = next
	}
	return nil
}

// plan is one stream's writes of a round.
type plan struct {
	stream string
	taken  int // how many of the stream's pending spans the plan settles
	cmps   []metastore.Compare
	ops    []metastore.Op
	bytes  int
	after  head // the stream's head once the writes land (rev set then)
}

// planRound plans the next round of every stream in order: reads the
// heads it does not know (coverParallel at a time), then decides each
// stream's spans.
func (x *RefIndex) planRound(ctx context.Context, star string, order []string, pending map[string][]spanAt) ([]*plan, error) {
	heads := make([]head, len(order))
	var missing []string
	var at []int
	for i, id := range order {
		if h, ok := x.cached(id); ok {
			heads[i] = h
			continue
		}
		missing, at = append(missing, id), append(at, i)
	}
	read, err := x.readHeads(ctx, missing)
	if err != nil {
		return nil, err
	}
	for j, h := range read {
		heads[at[j]] = h
	}
	plans := make([]*plan, 0, len(order))
	for i, id := range order {
		items := pending[id]
		p, err := x.planStream(ctx, star, heads[i], items[:min(len(items), roundSpans)])
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// planStream decides the spans items of one stream against its head h:
// each is covered already (skipped), or continues the stream (written),
// or is refused.
func (x *RefIndex) planStream(ctx context.Context, star string, h head, items []spanAt) (*plan, error) {
	stream := items[0].span.Stream
	p := &plan{stream: stream, taken: len(items)}
	cur := h.page
	cur.Spans = slices.Clone(cur.Spans)
	curRev := h.rev // 0 once cur is a page this plan creates
	dirty := false
	var done []refPage // pages the plan sealed, in order
	var doneRevs []int64
	for _, it := range items {
		s := it.span
		offered := Ref{RecordHeader: metastore.RecordHeader{Kind: refKind, Format: IndexFormat}, Stream: stream, Offset: s.Offset, Count: s.Count,
			Star: star, Epoch: it.pos.Epoch, Slot: it.pos.Slot, Start: s.Start, End: s.End}
		switch {
		case s.Offset < cur.Next:
			if err := x.judgeCovered(ctx, append(done, cur, h.page), offered, cur.Next); err != nil {
				return nil, err
			}
			continue
		case s.Offset > cur.Next:
			return nil, &GapError{Stream: stream, Offset: s.Offset, Next: cur.Next}
		}
		switch {
		case len(cur.Spans) == 0:
			// The stream's first page.
			cur, curRev = newPage(stream, star, it.pos.Epoch, cur.Next), 0
		case !cur.holds(star, it.pos):
			cur.Sealed = true
			done, doneRevs = append(done, cur), append(doneRevs, curRev)
			cur, curRev = newPage(stream, star, it.pos.Epoch, cur.Next), 0
		}
		cur.add(it.pos.Slot, s)
		if x.clock != nil {
			cur.Time = max(cur.Time, x.clock.Now().UnixNano())
		}
		dirty = true
	}
	for i := range done {
		if err := p.write(x.pageKey(stream, done[i].First), doneRevs[i], &done[i]); err != nil {
			return nil, err
		}
	}
	if dirty {
		if err := p.write(x.pageKey(stream, cur.First), curRev, &cur); err != nil {
			return nil, err
		}
	}
	p.after = head{rev: h.rev, page: cur}
	return p, nil
}

// write adds a put of page at key, compared with rev, to the plan.
func (p *plan) write(key string, rev int64, page *refPage) error {
	v, err := page.encode()
	if err != nil {
		return err
	}
	p.cmps = append(p.cmps, metastore.Compare{Key: key, Revision: rev})
	p.ops = append(p.ops, metastore.Op{Key: key, Value: v})
	p.bytes += len(key)*2 + len(v)
	return nil
}

// judgeCovered decides a span offered below the stream's coverage end
// next: covered by the same ref (nil), or a *DoubleCoverError. It looks in
// the pages the plan holds, then in the index.
func (x *RefIndex) judgeCovered(ctx context.Context, pages []refPage, offered Ref, next uint64) error {
	var have *refPage
	for i := range pages {
		if len(pages[i].Spans) > 0 && offered.Offset >= pages[i].First && offered.Offset < pages[i].Next {
			have = &pages[i]
			break
		}
	}
	if have == nil {
		// Retention may have deleted the page: a span below the
		// retention point was covered once and let go, and settling its
		// flight again (a holder that died before its checkpoint moved)
		// finds nothing to compare it with.
		start, _, err := x.start(ctx, offered.Stream)
		if err != nil {
			return err
		}
		if offered.Offset < start {
			return nil
		}
		kv, err := metastore.Floor(ctx, x.store, x.pagePrefix(offered.Stream), x.pageKey(offered.Stream, offered.Offset))
		switch {
		case errors.Is(err, metastore.ErrNotFound):
			return &DoubleCoverError{Stream: offered.Stream, Offset: offered.Offset, Offered: offered, Next: next}
		case err != nil:
			return fmt.Errorf("settle ref page %s/%d: %w", offered.Stream, offered.Offset, err)
		}
		pg, err := x.decodePage(kv, offered.Stream)
		if err != nil {
			return err
		}
		if offered.Offset >= pg.Next {
			return &DoubleCoverError{Stream: offered.Stream, Offset: offered.Offset, Offered: offered, Next: next}
		}
		have = &pg
	}
	existing := have.find(offered.Offset)
	switch {
	case existing.Offset != offered.Offset:
		return &DoubleCoverError{Stream: offered.Stream, Offset: offered.Offset, Offered: offered, Next: next}
	case existing.same(offered):
		return nil
	}
	return &DoubleCoverError{Stream: offered.Stream, Offset: offered.Offset, Existing: existing, Offered: offered, Next: next}
}

// apply writes the plans of a round: packed into transactions of at most
// MaxTxnOps compares and operations and MaxTxnBytes bytes, in stream
// order, coverParallel at a time. A transaction that loses a compare
// forgets its streams' heads and puts their spans back; conflicted says
// whether any did. Any other failure is returned (its outcome unknown:
// the heads are forgotten).
func (x *RefIndex) apply(ctx context.Context, plans []*plan) (conflicted bool, err error) {
	var batches [][]*plan
	var cur []*plan
	ops, bytes := 0, 0
	for _, p := range plans {
		if len(p.ops) == 0 {
			x.remember(p.stream, p.after)
			continue
		}
		if len(cur) > 0 && (ops+len(p.ops) > MaxTxnOps || bytes+p.bytes > MaxTxnBytes) {
			batches = append(batches, cur)
			cur, ops, bytes = nil, 0, 0
		}
		cur = append(cur, p)
		ops += len(p.ops)
		bytes += p.bytes
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(coverParallel)
	for _, b := range batches {
		g.Go(func() error {
			var t metastore.Txn
			for _, p := range b {
				t.If = append(t.If, p.cmps...)
				t.Then = append(t.Then, p.ops...)
			}
			rev, err := x.store.Txn(ctx, t)
			switch {
			case err == nil:
				for _, p := range b {
					p.after.rev = rev
					x.remember(p.stream, p.after)
				}
				return nil
			case errors.Is(err, metastore.ErrConflict):
				mu.Lock()
				conflicted = true
				mu.Unlock()
			}
			// The batch did not land (or its outcome is unknown): its
			// spans go back, and the next round (or cover) decides them
			// from a fresh read of the heads. Each plan is in one batch
			// only, so this goroutine alone writes its taken.
			for _, p := range b {
				p.taken = 0
				x.forget(p.stream)
			}
			if errors.Is(err, metastore.ErrConflict) {
				return nil
			}
			return fmt.Errorf("settle cover of %d streams (%s…): %w", len(b), b[0].stream, err)
		})
	}
	err = g.Wait()
	return conflicted, err
}

func (x *RefIndex) cached(stream string) (head, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	h, ok := x.heads[stream]
	return h, ok
}

// remember keeps h as stream's head unless a newer one is known.
func (x *RefIndex) remember(stream string, h head) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.heads[stream]; ok && old.rev > h.rev {
		return
	}
	if _, ok := x.heads[stream]; !ok && len(x.heads) >= maxCachedHeads {
		for k := range x.heads { // an arbitrary one: map order is random
			delete(x.heads, k)
			break
		}
	}
	x.heads[stream] = h
}

func (x *RefIndex) forget(stream string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.heads, stream)
}

// readHead reads stream's last page (one read; a second for a stream with
// no page, to tell a new stream from one indexed in format 1) and
// remembers it.
func (x *RefIndex) readHead(ctx context.Context, stream string) (head, error) {
	kv, err := metastore.Floor(ctx, x.store, x.pagePrefix(stream), x.lastPageKey(stream))
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return x.headOf(ctx, stream, metastore.ReadResult{})
	case err != nil:
		return head{}, fmt.Errorf("settle ref head %s: %w", stream, err)
	}
	return x.headOf(ctx, stream, metastore.ReadResult{KV: kv, Found: true})
}

// headOf decodes the read of stream's last page and remembers it.
func (x *RefIndex) headOf(ctx context.Context, stream string, r metastore.ReadResult) (head, error) {
	if !r.Found {
		if err := x.checkFormat(ctx, stream); err != nil {
			return head{}, err
		}
		h := head{page: newPage(stream, "", 0, 0)}
		h.page.Spans = nil
		x.remember(stream, h)
		return h, nil
	}
	kv := r.KV
	pg, err := x.decodePage(kv, stream)
	if err != nil {
		return head{}, err
	}
	if pg.Sealed {
		return head{}, &metastore.RecordError{Key: kv.Key, Kind: pageKind, Reason: "the stream's last page is sealed, yet no page follows it"}
	}
	h := head{rev: kv.Revision, page: pg}
	x.remember(stream, h)
	return h, nil
}

// readHeads reads the last pages of streams, MaxReadMany to a request
// (metastore.ReadMany), coverParallel requests at once, and remembers
// them.
func (x *RefIndex) readHeads(ctx context.Context, streams []string) ([]head, error) {
	heads := make([]head, len(streams))
	var g errgroup.Group
	g.SetLimit(coverParallel)
	for from := 0; from < len(streams); from += metastore.MaxReadMany {
		chunk := streams[from:min(len(streams), from+metastore.MaxReadMany)]
		g.Go(func() error {
			reads := make([]metastore.Read, len(chunk))
			for i, id := range chunk {
				reads[i] = metastore.Read{Floor: true, Prefix: x.pagePrefix(id), Key: x.lastPageKey(id)}
			}
			res, err := metastore.ReadMany(ctx, x.store, reads)
			if err != nil {
				return fmt.Errorf("settle ref heads of %d streams (%s…): %w", len(chunk), chunk[0], err)
			}
			for i, id := range chunk {
				h, err := x.headOf(ctx, id, res[i])
				if err != nil {
					return err
				}
				heads[from+i] = h
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return heads, nil
}

// NextMany is Next for many streams, in order, at a cost per batch:
// MaxReadMany streams to a request.
func (x *RefIndex) NextMany(ctx context.Context, streams []string) ([]uint64, error) {
	for _, id := range streams {
		if err := epoch.ValidateName("stream", id); err != nil {
			return nil, err
		}
	}
	heads, err := x.readHeads(ctx, streams)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(heads))
	for i, h := range heads {
		out[i] = h.page.Next
	}
	return out, nil
}

// Next returns the first offset of stream that no ref covers: where the
// stream's next append goes. It reads the stream's last page, one key
// (two for a stream with none yet). A page that does not decode is a
// *metastore.RecordError; a stream indexed in format 1 a *FormatError.
func (x *RefIndex) Next(ctx context.Context, stream string) (uint64, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return 0, err
	}
	h, err := x.readHead(ctx, stream)
	if err != nil {
		return 0, err
	}
	return h.page.Next, nil
}

// Find returns the ref that holds offset of stream: two reads at any
// stream length (the retention point, and the page whose first offset is
// the floor of offset). An offset below the retention point is a
// *TrimmedError (ErrBelowRetention) naming where the stream now starts; one no
// ref covers (at or past Next) matches metastore.ErrNotFound.
func (x *RefIndex) Find(ctx context.Context, stream string, offset uint64) (Ref, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return Ref{}, err
	}
	start, _, err := x.start(ctx, stream)
	if err != nil {
		return Ref{}, err
	}
	if offset < start {
		return Ref{}, &TrimmedError{Stream: stream, Offset: offset, Start: start}
	}
	kv, err := metastore.Floor(ctx, x.store, x.pagePrefix(stream), x.pageKey(stream, offset))
	if errors.Is(err, metastore.ErrNotFound) {
		if ferr := x.checkFormat(ctx, stream); ferr != nil {
			return Ref{}, ferr
		}
	}
	if err != nil {
		return Ref{}, fmt.Errorf("settle ref %s/%d: %w", stream, offset, err)
	}
	pg, err := x.decodePage(kv, stream)
	if err != nil {
		return Ref{}, err
	}
	if offset >= pg.Next {
		return Ref{}, fmt.Errorf("settle ref %s/%d: covered up to %d: %w", stream, offset, pg.Next, metastore.ErrNotFound)
	}
	return pg.find(offset), nil
}

// Lookup returns the ref whose run starts at offset, or an error matching
// metastore.ErrNotFound (offset inside a ref, or not covered), or a
// *TrimmedError below the stream's retention point.
func (x *RefIndex) Lookup(ctx context.Context, stream string, offset uint64) (Ref, error) {
	r, err := x.Find(ctx, stream, offset)
	if err != nil {
		return Ref{}, err
	}
	if r.Offset != offset {
		return Ref{}, fmt.Errorf("settle ref %s/%d: inside the ref at %d: %w", stream, offset, r.Offset, metastore.ErrNotFound)
	}
	return r, nil
}

// Refs yields a stream's refs in offset order, from its retention point
// on (the first may start below it). It lists the stream's pages: one
// read of a key per PageSpans spans.
func (x *RefIndex) Refs(ctx context.Context, stream string) iter.Seq2[Ref, error] {
	return func(yield func(Ref, error) bool) {
		if err := epoch.ValidateName("stream", stream); err != nil {
			yield(Ref{}, err)
			return
		}
		start, _, err := x.start(ctx, stream)
		if err != nil {
			yield(Ref{}, err)
			return
		}
		kvs, _, err := x.store.List(ctx, x.pagePrefix(stream))
		if err != nil {
			yield(Ref{}, fmt.Errorf("settle refs %s: %w", stream, err))
			return
		}
		if len(kvs) == 0 {
			if err := x.checkFormat(ctx, stream); err != nil {
				yield(Ref{}, err)
			}
			return
		}
		var end uint64 // where the pages so far end
		for i, kv := range kvs {
			pg, err := x.decodePage(kv, stream)
			if err == nil {
				err = pagesTile(kv.Key, pg, i, len(kvs), &end)
			}
			if err != nil {
				yield(Ref{}, err)
				return
			}
			for _, r := range pg.refs() {
				if r.Offset+r.Count <= start {
					continue
				}
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}

// pagesTile checks page i of a stream's n pages, listed in order, against
// the ones before it: each starts where the one before ended (next holds
// that end; the first page may start anywhere, as retention leaves it),
// every page but the last is sealed, and the last is not.
func pagesTile(key string, pg refPage, i, n int, next *uint64) error {
	bad := func(format string, args ...any) error {
		return &metastore.RecordError{Key: key, Kind: pageKind, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case i > 0 && pg.First != *next:
		return bad("starts at %d, the page before it ends at %d", pg.First, *next)
	case i < n-1 && !pg.Sealed:
		return bad("is not sealed, yet a page follows it")
	case i == n-1 && pg.Sealed:
		return bad("the stream's last page is sealed, yet no page follows it")
	}
	*next = pg.Next
	return nil
}
