package settle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// CompactorOptions tunes a Compactor. The zero value works.
type CompactorOptions struct {
	// SegmentBytes bounds the body of one segment: pages of a stream go
	// into one segment until the next would pass it (a page larger than
	// the bound gets a segment of its own). Default 16 MiB, at most
	// MaxSegmentBytes.
	SegmentBytes int
	// PassBytes bounds the flight bytes one pass holds in memory. Default
	// 64 MiB, at most MaxPassBytes.
	PassBytes int
	// PassSlots bounds the flights one pass reads. Default 1,024, at most
	// MaxPassSlots.
	PassSlots int
	// MaxParallel bounds the object and metastore requests in flight.
	// Default 192: as many as a writer of K=3 zones keeps in flight with
	// its default window of 64. Each stream's segment costs K creates and
	// K read-backs, so with fewer a compactor of many streams falls behind
	// the appends it follows. At most MaxParallelLimit. It does not bound
	// memory: a pass holds PassBytes of flights, plus at most
	// chain.DefaultReadAhead flights read ahead.
	MaxParallel int
	// Logger receives progress (debug) and garbage left behind (warn).
	// Nil discards.
	Logger *slog.Logger
}

// Bounds of CompactorOptions.
const (
	MaxSegmentBytes = 1 << 30
	MaxPassBytes    = 1 << 30
	MaxPassSlots    = 1 << 20
)

// Compactor rewrites the flights of an epoch below its checkpoint into
// per-stream segments, moves the refs onto them and advances the epoch's
// rewritten cursor (see "Compaction" in the package guide). It is safe for
// concurrent use, and so are several compactors of one star: segments
// never share a key, and refs move only by compare-and-set.
type Compactor struct {
	minter *epoch.Minter
	zones  chain.Zones
	index  *RefIndex
	reader *chain.Reader
	ident  string // names the compactor in its segment keys
	opts   CompactorOptions

	mu  sync.Mutex
	rnd *rand.Rand // draws segment nonces

	scanMu    sync.Mutex
	scans     map[scanKey]*scanState // the last scan of each epoch compacted
	scanPages int                    // the held pages of scans
	scanClock uint64
}

// NewCompactor returns a Compactor over the epochs of m, their buckets in
// zones, and the index x whose refs it moves. identity names the
// compactor in the keys of the segments it writes, so that two compactors
// never write one key: it must be a valid name (epoch.ValidateName) and
// unique among the processes that compact one star.
func NewCompactor(m *epoch.Minter, zones chain.Zones, x *RefIndex, identity string, opts CompactorOptions) (*Compactor, error) {
	if m == nil {
		return nil, &cutline.ConfigError{Field: "minter", Value: nil, Reason: "required"}
	}
	if x == nil {
		return nil, &cutline.ConfigError{Field: "index", Value: nil, Reason: "required"}
	}
	if err := epoch.ValidateName("identity", identity); err != nil {
		return nil, err
	}
	for _, b := range []struct {
		field    string
		v        *int
		def, max int
	}{
		{"SegmentBytes", &opts.SegmentBytes, 16 << 20, MaxSegmentBytes},
		{"PassBytes", &opts.PassBytes, 64 << 20, MaxPassBytes},
		{"PassSlots", &opts.PassSlots, 1024, MaxPassSlots},
		{"MaxParallel", &opts.MaxParallel, 192, MaxParallelLimit},
	} {
		if *b.v < 0 || *b.v > b.max {
			return nil, &cutline.ConfigError{Field: b.field, Value: *b.v, Reason: fmt.Sprintf("must satisfy 0 ≤ %s ≤ %d (0 means %d)", b.field, b.max, b.def)}
		}
		if *b.v == 0 {
			*b.v = b.def
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := chain.NewReader(m, zones, chain.ReaderOptions{Logger: opts.Logger, ReadAhead: min(opts.MaxParallel, chain.DefaultReadAhead)})
	if err != nil {
		return nil, err
	}
	return &Compactor{minter: m, zones: zones, index: x, reader: r, ident: identity, opts: opts,
		rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), scans: map[scanKey]*scanState{}}, nil
}

func (c *Compactor) nonce() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rnd.Uint64()
}

// CompactReport describes one Compact call.
type CompactReport struct {
	Star  string
	Epoch uint64
	// Rewritten is the epoch's rewritten cursor after the call, Checkpoint
	// its checkpoint when the call read it. Scanned is how far the call
	// looked: every page of flights below it that may be compacted was;
	// the pages that may not yet (a stream's last page in an open epoch,
	// a page another party changed) hold Rewritten below it.
	Rewritten, Checkpoint, Scanned uint64
	// Passes counts the passes run.
	Passes int
	// Segments counts the segments written and referenced, Bytes their
	// bodies, Pages the pages moved onto them.
	Segments, Pages int
	Bytes           int64
	// Lost counts the pages another party changed between the read and
	// the compare-and-set (another compactor won them, or the holder
	// sealed them): left to a later pass. Dropped counts the segments no
	// page came to name, deleted again at once.
	Lost, Dropped int
	// Reads, Creates and Deletes count object requests.
	Reads, Creates, Deletes int
}

func (r *CompactReport) add(p passReport) {
	r.Passes++
	r.Segments += p.segments
	r.Pages += p.pages
	r.Bytes += p.bytes
	r.Lost += p.lost
	r.Dropped += p.dropped
	r.Reads += p.reads
	r.Creates += p.creates
	r.Deletes += p.deletes
}

// Compact rewrites star's epoch ep from its rewritten cursor up to its
// checkpoint (as the call first reads it), a pass of at most PassSlots
// flights and PassBytes bytes at a time.
//
// A pass reads the flights, finds the ref pages of every stream they
// carry, and for each stream writes the pages it may compact (sealed, or
// the last page of a settled epoch, every slot below the checkpoint) into
// segments, create-only in the epoch's buckets, verified by reading every
// copy back, W at least. Then it replaces those pages by pages naming the
// segments, by compare-and-set, MaxTxnOps pages a transaction, and moves
// the rewritten cursor to the lowest slot whose spans are not all in
// segments. A page that changed meanwhile is left as it is, and the
// segments no page came to name are deleted. Run it again after any
// failure: every step is idempotent, and what a crash leaves is garbage
// that Collect deletes.
//
// A page it may not compact yet (a stream's last page in an open epoch,
// or a page that changed under it) holds the cursor back, not the scan:
// the next pass reads the flights after those of the pass before. The
// Compactor remembers, for the epochs it compacted last, how far it
// scanned and the pages it left, so that the next call reads those pages
// again (a few metastore reads) and the flights past the scan only: a
// holder's epoch compacted every minute costs the flights appended since,
// however long one stream's last page stays open. What it remembers only
// saves reads: when the epoch's record disagrees with it (another
// compactor or a trim moved the cursors further), the call scans from the
// cursor again.
func (c *Compactor) Compact(ctx context.Context, star string, ep uint64) (CompactReport, error) {
	rep := CompactReport{Star: star, Epoch: ep}
	if err := epoch.ValidateName("star", star); err != nil {
		return rep, err
	}
	st := c.lastScan(star, ep)
	var end uint64
	for i := 0; ; i++ {
		rec, err := c.minter.Get(ctx, star, ep)
		if err != nil {
			c.keepScan(star, ep, nil)
			return rep, fmt.Errorf("settle compact %s/%d: %w", star, ep, err)
		}
		if i == 0 {
			end = rec.Cursors.Checkpoint
		}
		p, err := c.pass(ctx, rec, st, end)
		rep.add(p)
		rep.Rewritten, rep.Checkpoint, rep.Scanned = p.rewritten, p.checkpoint, st.scan
		if err != nil {
			c.keepScan(star, ep, nil)
			return rep, fmt.Errorf("settle compact %s/%d: %w", star, ep, err)
		}
		if st.scan >= end {
			break
		}
	}
	c.keepScan(star, ep, st)
	return rep, nil
}

// passReport is what one pass did.
type passReport struct {
	from, rewritten, checkpoint    uint64
	segments, pages, lost, dropped int
	bytes                          int64
	reads, creates, deletes        int
}

// candidate is a page a pass compacts.
type candidate struct {
	kv   metastore.KV
	page refPage
	low  uint64 // its lowest slot
}

// segmentPlan is one segment a pass writes: consecutive pages of a stream.
type segmentPlan struct {
	key   string
	pages []*candidate
	data  []byte
	// state of its compare-and-sets: named once any page names it;
	// unknown once a transaction's outcome is unknown.
	named, unknown bool
}

// pass reads the flights from where the scan st stopped, up to end (at
// most PassSlots and PassBytes), compacts the pages it may among those
// they name and those st held before, and moves the cursor to st's
// target.
func (c *Compactor) pass(ctx context.Context, rec *epoch.Record, st *scanState, end uint64) (passReport, error) {
	var pr passReport
	star, ep := rec.Star, rec.Epoch
	ck := rec.Cursors.Checkpoint
	pr.from, pr.rewritten, pr.checkpoint = rec.Cursors.Rewritten, rec.Cursors.Rewritten, ck
	st.check(rec)
	var held map[string][]*candidate // pages held before that may be compacted now
	if st.recheck {
		st.recheck = false
		var stale bool
		var err error
		if held, stale, err = c.recheck(ctx, rec, st); err != nil {
			return pr, err
		}
		if stale {
			st.reset(rec)
			held = nil
		}
	}
	lo := st.scan
	hi := max(lo, min(end, lo+uint64(c.opts.PassSlots)))
	if lo >= hi && len(held) == 0 {
		return pr, c.advance(ctx, star, ep, st.target(), &pr)
	}
	buckets, err := c.zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return pr, err
	}

	// 1. The flights of [lo, hi) and the spans they carry, per stream.
	// Every slot below the checkpoint is committed, as every slot below
	// a cut is, so an open epoch's flights there are read as a fenced
	// epoch's are.
	if !rec.Fenced() {
		view := *rec
		view.State, view.Cut = epoch.StateFenced, ck
		rec = &view
	}
	payloads := map[uint64][]byte{}
	perStream := map[string][]spanAt{}
	inMemory := 0
	if lo < hi {
		for f, err := range c.reader.Range(ctx, rec, lo, hi) {
			if err != nil {
				return pr, err
			}
			pr.reads++
			spans, err := c.index.Locate(f.Payload)
			if err != nil {
				return pr, fmt.Errorf("slot %d: %w", f.Position.Slot, err)
			}
			payloads[f.Position.Slot] = f.Payload
			for _, s := range spans {
				perStream[s.Stream] = append(perStream[s.Stream], spanAt{pos: f.Position, span: s})
			}
			if inMemory += len(f.Payload); inMemory >= c.opts.PassBytes {
				hi = f.Position.Slot + 1
				break
			}
		}
	}
	streams := make([]string, 0, len(perStream)+len(held))
	for id := range perStream {
		streams = append(streams, id)
	}
	for id := range held {
		if _, ok := perStream[id]; !ok {
			streams = append(streams, id)
		}
	}
	slices.Sort(streams)

	// 2. The pages holding those spans: compacted already, to compact, or
	// holding the cursor back; and the pages held before that may be
	// compacted now.
	perPages := make([][]*candidate, len(streams))
	var g errgroup.Group
	g.SetLimit(c.opts.MaxParallel)
	var mu sync.Mutex
	for i, id := range streams {
		if len(perStream[id]) == 0 {
			perPages[i] = held[id]
			continue
		}
		g.Go(func() error {
			cands, holds, gap, err := c.candidates(ctx, rec, id, perStream[id])
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			perPages[i] = mergeCandidates(cands, held[id])
			for _, h := range holds {
				st.hold(id, h.key, h.low)
			}
			st.gap = min(st.gap, gap)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return pr, err
	}
	st.scan = hi

	// 3. Their bytes: from the flights read, and the slots of their pages
	// outside [lo, hi).
	if err := c.fetchMissing(ctx, rec, perPages, payloads, &pr); err != nil {
		return pr, err
	}
	var plans []*segmentPlan
	for i, id := range streams {
		ps, err := c.planSegments(rec, id, perPages[i], payloads)
		if err != nil {
			return pr, err
		}
		plans = append(plans, ps...)
	}

	// 4. The segments, each verified in W buckets before any page names it.
	g = errgroup.Group{}
	g.SetLimit(c.opts.MaxParallel)
	for _, sp := range plans {
		g.Go(func() error {
			creates, reads, err := writeSegment(ctx, buckets, rec.Constants.W, sp.key, sp.data)
			mu.Lock()
			pr.creates += creates
			pr.reads += reads
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return pr, err // what landed is garbage no page names
	}

	// 5. The pages, moved onto the segments by compare-and-set.
	lostPages, err := c.movePages(ctx, plans, &pr)
	for _, id := range streams {
		c.index.forget(id) // a stream's last page may have moved
	}
	if err != nil {
		return pr, err
	}
	for _, sp := range plans {
		for _, cd := range sp.pages {
			delete(st.held, cd.kv.Key) // held in an earlier pass, sealed since
		}
	}
	for _, cd := range lostPages {
		st.hold(cd.page.Stream, cd.kv.Key, cd.low)
	}
	c.dropUnnamed(ctx, buckets, plans, &pr)

	// 6. The cursor.
	return pr, c.advance(ctx, star, ep, st.target(), &pr)
}

// mergeCandidates returns the pages of a and b, each once, in offset
// order.
func mergeCandidates(a, b []*candidate) []*candidate {
	out := make([]*candidate, 0, len(a)+len(b))
	seen := make(map[string]bool, len(a)+len(b))
	for _, cd := range slices.Concat(a, b) {
		if !seen[cd.kv.Key] {
			seen[cd.kv.Key] = true
			out = append(out, cd)
		}
	}
	slices.SortFunc(out, func(x, y *candidate) int { return cmp.Compare(x.page.First, y.page.First) })
	return out
}

// pageHold is a page of flights candidates found holding the cursor back,
// from slot low on.
type pageHold struct {
	key string
	low uint64
}

// candidates finds the pages that hold the spans items of stream, which
// flights of rec carry: the pages to compact, in offset order; the pages
// of flights that may not be compacted yet, each with the lowest slot of
// a span on it among items; and the lowest slot of a span no page holds
// (noSlot when there is none).
func (c *Compactor) candidates(ctx context.Context, rec *epoch.Record, stream string, items []spanAt) ([]*candidate, []pageHold, uint64, error) {
	x := c.index
	start, _, err := x.start(ctx, stream)
	if err != nil {
		return nil, nil, 0, err
	}
	var out []*candidate
	var holds []pageHold
	gap := uint64(noSlot)
	var cur *candidate
	for _, it := range items {
		s := it.span
		if s.Offset+s.Count <= start {
			continue // below the retention point: no ref needs it
		}
		if cur == nil || s.Offset < cur.page.First || s.Offset >= cur.page.Next {
			kv, err := metastore.Floor(ctx, x.store, x.pagePrefix(stream), x.pageKey(stream, s.Offset))
			if errors.Is(err, metastore.ErrNotFound) {
				gap = min(gap, it.pos.Slot) // not covered: nothing to move, nothing to trim
				cur = nil
				continue
			}
			if err != nil {
				return nil, nil, 0, fmt.Errorf("ref page %s/%d: %w", stream, s.Offset, err)
			}
			pg, err := x.decodePage(kv, stream)
			if err != nil {
				return nil, nil, 0, err
			}
			if s.Offset >= pg.Next {
				gap = min(gap, it.pos.Slot)
				cur = nil
				continue
			}
			cur = &candidate{kv: kv, page: pg, low: pg.Spans[0][1]}
			if c.compactable(rec, &pg) {
				out = append(out, cur)
			}
		}
		r := cur.page.find(s.Offset)
		if r.Offset != s.Offset || r.Star != rec.Star || r.Epoch != rec.Epoch || r.Slot != it.pos.Slot {
			continue // another ref covers these offsets: no ref needs this flight for them
		}
		if cur.page.Segment == "" && !c.compactable(rec, &cur.page) {
			i := slices.IndexFunc(holds, func(h pageHold) bool { return h.key == cur.kv.Key })
			if i < 0 {
				holds = append(holds, pageHold{key: cur.kv.Key, low: it.pos.Slot})
			} else {
				holds[i].low = min(holds[i].low, it.pos.Slot)
			}
		}
	}
	return out, holds, gap, nil
}

// compactable reports whether pg may be rewritten: a page of flights of
// rec that no cover appends to any more (sealed, or in a settled epoch,
// which gets no more flights) and whose every flight lies in
// [trimmed, checkpoint).
func (c *Compactor) compactable(rec *epoch.Record, pg *refPage) bool {
	if pg.Segment != "" || pg.Star != rec.Star || pg.Epoch != rec.Epoch || !pg.Sealed && rec.State != epoch.StateSettled {
		return false
	}
	first, last := pg.Spans[0][1], pg.Spans[len(pg.Spans)-1][1]
	return first >= rec.Cursors.Trimmed && last < rec.Cursors.Checkpoint
}

// fetchMissing reads the flights the candidate pages need that the pass
// did not read.
func (c *Compactor) fetchMissing(ctx context.Context, rec *epoch.Record, perPages [][]*candidate, payloads map[uint64][]byte, pr *passReport) error {
	var missing []uint64
	for _, cands := range perPages {
		for _, cd := range cands {
			for _, sp := range cd.page.Spans {
				if _, ok := payloads[sp[1]]; !ok {
					payloads[sp[1]] = nil
					missing = append(missing, sp[1])
				}
			}
		}
	}
	slices.Sort(missing)
	for _, s := range missing {
		for f, err := range c.reader.Range(ctx, rec, s, s+1) {
			if err != nil {
				return err
			}
			pr.reads++
			payloads[s] = f.Payload
		}
	}
	return nil
}

// planSegments groups a stream's candidate pages into segments: pages
// that follow each other (each starts where the one before ends), up to
// SegmentBytes of body.
func (c *Compactor) planSegments(rec *epoch.Record, stream string, cands []*candidate, payloads map[uint64][]byte) ([]*segmentPlan, error) {
	var out []*segmentPlan
	var cur []*candidate
	size := 0
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		name := segmentName{Star: rec.Star, Epoch: rec.Epoch, Stream: stream, First: cur[0].page.First, Next: cur[len(cur)-1].page.Next,
			Compactor: c.ident, Nonce: c.nonce()}
		key := name.key(wire.KeysOf(rec))
		if err := objstore.ValidateKey(key); err != nil {
			return &cutline.ConfigError{Field: "identity", Value: c.ident, Reason: "segment keys of this epoch would not be valid object keys", Err: err}
		}
		body := make([]byte, 0, size)
		at := segmentHeaderLen(key)
		for _, cd := range cur {
			cd.page.Segment, cd.page.At = key, at+uint64(len(body))
			for _, sp := range cd.page.Spans {
				p := payloads[sp[1]]
				if sp[3] > uint64(len(p)) {
					return &metastore.RecordError{Key: cd.kv.Key, Kind: pageKind,
						Reason: fmt.Sprintf("a span's bytes [%d, %d) end past the %d bytes of the flight at slot %d", sp[2], sp[3], len(p), sp[1])}
				}
				body = append(body, p[sp[2]:sp[3]]...)
			}
		}
		out = append(out, &segmentPlan{key: key, pages: cur, data: encodeSegment(key, body)})
		cur, size = nil, 0
		return nil
	}
	for _, cd := range cands {
		n := 0
		for _, sp := range cd.page.Spans {
			n += int(sp[3] - sp[2])
		}
		if len(cur) > 0 && (cur[len(cur)-1].page.Next != cd.page.First || size+n > c.opts.SegmentBytes) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		cur = append(cur, cd)
		size += n
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// pageMove is one page's compare-and-set and the segment it names.
type pageMove struct {
	cd  *candidate
	seg *segmentPlan
	val []byte
}

// movePages replaces the candidate pages of plans by pages naming their
// segments: transactions of at most MaxTxnOps pages and MaxTxnBytes
// bytes, MaxParallel at a time. It returns the pages lost to another
// party's write. A transaction whose outcome is unknown is an error.
func (c *Compactor) movePages(ctx context.Context, plans []*segmentPlan, pr *passReport) ([]*candidate, error) {
	var batches [][]pageMove
	var cur []pageMove
	size := 0
	for _, sp := range plans {
		for _, cd := range sp.pages {
			v, err := cd.page.encode()
			if err != nil {
				return nil, err
			}
			n := 2*len(cd.kv.Key) + len(v)
			if len(cur) > 0 && (len(cur) == MaxTxnOps || size+n > MaxTxnBytes) {
				batches = append(batches, cur)
				cur, size = nil, 0
			}
			cur = append(cur, pageMove{cd: cd, seg: sp, val: v})
			size += n
		}
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	var mu sync.Mutex
	var lost []*candidate
	var g errgroup.Group
	g.SetLimit(c.opts.MaxParallel)
	for _, b := range batches {
		g.Go(func() error {
			var t metastore.Txn
			for _, m := range b {
				t.If = append(t.If, metastore.Compare{Key: m.cd.kv.Key, Revision: m.cd.kv.Revision})
				t.Then = append(t.Then, metastore.Op{Key: m.cd.kv.Key, Value: m.val})
			}
			_, err := c.index.store.Txn(ctx, t)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				for _, m := range b {
					m.seg.named = true
				}
				pr.pages += len(b)
				return nil
			case errors.Is(err, metastore.ErrConflict):
				pr.lost += len(b)
				for _, m := range b {
					lost = append(lost, m.cd)
				}
				return nil
			}
			for _, m := range b {
				m.seg.unknown = true
			}
			return fmt.Errorf("move %d ref pages (%s…): %w", len(b), b[0].cd.kv.Key, err)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	// A lost page another compactor moved onto its own segment is done.
	var still []*candidate
	for _, cd := range lost {
		kv, err := c.index.store.Get(ctx, cd.kv.Key)
		if errors.Is(err, metastore.ErrNotFound) {
			continue // retention deleted it
		}
		if err != nil {
			return nil, fmt.Errorf("ref page %s: %w", cd.kv.Key, err)
		}
		pg, err := c.index.decodePage(kv, cd.page.Stream)
		if err != nil {
			return nil, err
		}
		if pg.Segment == "" {
			still = append(still, cd)
		}
	}
	for _, sp := range plans {
		if sp.named {
			pr.segments++
			pr.bytes += int64(len(sp.data)) - int64(segmentHeaderLen(sp.key))
		}
	}
	return still, nil
}

// dropUnnamed deletes the segments of plans that no page names and none
// ever will: every compare-and-set that would have named them was refused.
// A delete that fails leaves garbage for Collect.
func (c *Compactor) dropUnnamed(ctx context.Context, buckets []objstore.Bucket, plans []*segmentPlan, pr *passReport) {
	for _, sp := range plans {
		if sp.named || sp.unknown {
			continue
		}
		pr.dropped++
		for _, b := range buckets {
			pr.deletes++
			if err := b.Delete(ctx, sp.key); err != nil {
				c.opts.Logger.WarnContext(ctx, "compaction left a segment no page names", "bucket", b.Name(), "key", sp.key, "err", err)
			}
		}
	}
}

// advance moves the epoch's rewritten cursor up to to. Another compactor
// may have moved it further, and the checkpoint may move meanwhile: both
// are read again and the move retried.
func (c *Compactor) advance(ctx context.Context, star string, ep, to uint64, pr *passReport) error {
	for range coverAttempts {
		rec, err := c.minter.Get(ctx, star, ep)
		if err != nil {
			return err
		}
		pr.checkpoint = rec.Cursors.Checkpoint
		if rec.Cursors.Rewritten >= to {
			pr.rewritten = rec.Cursors.Rewritten
			return nil
		}
		cur := rec.Cursors
		cur.Rewritten = to
		rec, err = c.minter.Advance(ctx, star, ep, cur)
		if errors.Is(err, epoch.ErrCursorRegression) {
			continue
		}
		if err != nil {
			return err
		}
		pr.rewritten = rec.Cursors.Rewritten
		c.opts.Logger.DebugContext(ctx, "epoch rewritten", "star", star, "epoch", ep, "rewritten", to)
		return nil
	}
	return fmt.Errorf("rewritten cursor to %d: %w: the epoch's cursors kept moving", to, metastore.ErrConflict)
}
