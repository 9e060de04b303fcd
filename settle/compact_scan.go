package settle

import (
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// Bounds of what a Compactor remembers of the epochs it compacted.
const (
	// maxScanEpochs bounds the epochs whose scan a Compactor remembers;
	// the one compacted longest ago is forgotten first.
	maxScanEpochs = 256
	// maxHeldPages bounds the held pages one scan tracks, and those a
	// Compactor remembers over all epochs. A scan that finds more still
	// compacts what it may and holds the cursor at the lowest of them,
	// but is not remembered: the next call scans from the cursor again.
	maxHeldPages = 1 << 16
)

// noSlot stands for no slot at all: past every slot.
const noSlot = math.MaxUint64

// heldPage is a page of flights that holds the rewritten cursor back: a
// stream's last page in an open epoch, or a page another party changed
// under a pass.
type heldPage struct {
	stream string
	low    uint64 // the lowest slot of a span on it that a retained ref needs
}

// scanState is how far a compactor has looked at an epoch's flights, and
// what it left there. Every span in [base, scan) whose ref still lies in
// a page of flights lies on a page of held, or at or past gap (a span no
// page was found for). Nothing makes that false later: a page of
// segments never turns back into a page of flights, and no ref of a slot
// below the checkpoint is written again; held only grows stale, holding
// pages that were rewritten or dropped by retention since. So the
// rewritten cursor may go up to target, and a later call need only look
// at held again and scan on from scan. Nothing depends on it for
// correctness, only for cost: whatever disagrees with the epoch's record
// resets it to a scan from the cursor.
type scanState struct {
	minted  time.Time // the epoch record's, telling one epoch from another
	base    uint64    // max(rewritten, trimmed) when last checked
	scan    uint64
	gap     uint64
	held    map[string]heldPage // by page key
	heldMin uint64              // the lowest slot of pages held past maxHeldPages
	// overflow: held pages were left out of held (heldMin holds them);
	// recheck: held was found by an earlier call, to be read again.
	overflow, recheck bool
	used              uint64 // when the Compactor last used it (LRU)
}

// reset starts a scan at the cursor of rec.
func (s *scanState) reset(rec *epoch.Record) {
	c := max(rec.Cursors.Rewritten, rec.Cursors.Trimmed)
	*s = scanState{minted: rec.MintedAt, base: c, scan: c, gap: noSlot, held: map[string]heldPage{}, heldMin: noSlot}
}

// check resets the state unless it agrees with rec: the same epoch, a
// cursor at or past where the state started and not past where it may
// move the cursor (else another compactor, or a trim, went further), and
// a scan not past the checkpoint.
func (s *scanState) check(rec *epoch.Record) {
	c := max(rec.Cursors.Rewritten, rec.Cursors.Trimmed)
	if s.held == nil || !s.minted.Equal(rec.MintedAt) || c < s.base || c > s.target() || s.scan > rec.Cursors.Checkpoint {
		s.reset(rec)
		return
	}
	s.base = c
}

// target is where the rewritten cursor may go: the lowest slot of a span
// the scan left in a page of flights, or the scan's end.
func (s *scanState) target() uint64 {
	t := min(s.scan, s.gap, s.heldMin)
	for _, h := range s.held {
		t = min(t, h.low)
	}
	return max(t, s.base)
}

// hold records page key of stream as held from slot low on.
func (s *scanState) hold(stream, key string, low uint64) {
	if h, ok := s.held[key]; ok {
		s.held[key] = heldPage{stream: stream, low: min(h.low, low)}
		return
	}
	if len(s.held) >= maxHeldPages {
		s.overflow = true
		s.heldMin = min(s.heldMin, low)
		return
	}
	s.held[key] = heldPage{stream: stream, low: low}
}

// scanKey names an epoch a Compactor remembers a scan of.
type scanKey struct {
	star string
	ep   uint64
}

// lastScan returns a copy of the scan of star's epoch ep the Compactor
// remembers, to be checked again, or a state that check resets.
func (c *Compactor) lastScan(star string, ep uint64) *scanState {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	s, ok := c.scans[scanKey{star, ep}]
	if !ok {
		return &scanState{}
	}
	c.scanClock++
	s.used = c.scanClock
	cp := *s
	cp.held = maps.Clone(s.held)
	cp.recheck = len(cp.held) > 0
	return &cp
}

// keepScan remembers the scan s of star's epoch ep, which a call
// finished, or forgets the epoch when s is not worth keeping.
func (c *Compactor) keepScan(star string, ep uint64, s *scanState) {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	k := scanKey{star, ep}
	if old, ok := c.scans[k]; ok {
		c.scanPages -= len(old.held)
		delete(c.scans, k)
	}
	if s == nil || s.overflow || s.held == nil {
		return
	}
	// A span no page was found for is looked at again: from it on, the
	// scan is done again.
	s.scan, s.gap = min(s.scan, s.gap), noSlot
	c.scanClock++
	s.used = c.scanClock
	c.scans[k] = s
	c.scanPages += len(s.held)
	for len(c.scans) > maxScanEpochs || c.scanPages > maxHeldPages {
		var oldest scanKey
		first := true
		for ok, os := range c.scans {
			if first || os.used < c.scans[oldest].used {
				oldest, first = ok, false
			}
		}
		c.scanPages -= len(c.scans[oldest].held)
		delete(c.scans, oldest)
	}
}

// recheck reads again the pages an earlier call left held, and the
// retention points of their streams, MaxReadMany reads a request: a page
// gone (retention deleted it), rewritten, or whose every span retention
// passed holds nothing back any more; a page that may be compacted now
// (sealed since, or the epoch settled) is returned, by stream, for the
// pass to compact; any other stays held, from its lowest retained span.
// stale reports a page that is not of the epoch: the state is to be
// reset.
func (c *Compactor) recheck(ctx context.Context, rec *epoch.Record, s *scanState) (cands map[string][]*candidate, stale bool, err error) {
	x := c.index
	keys := slices.Sorted(maps.Keys(s.held))
	var streams []string
	seen := map[string]bool{}
	for _, k := range keys {
		if id := s.held[k].stream; !seen[id] {
			seen[id] = true
			streams = append(streams, id)
		}
	}
	reads := make([]metastore.Read, 0, len(streams)+len(keys))
	for _, id := range streams {
		reads = append(reads, metastore.Read{Key: x.startKey(id)})
	}
	for _, k := range keys {
		reads = append(reads, metastore.Read{Key: k})
	}
	res, err := c.readMany(ctx, reads)
	if err != nil {
		return nil, false, err
	}
	starts := make(map[string]uint64, len(streams))
	for i, id := range streams {
		if starts[id], _, err = x.startOf(id, res[i]); err != nil {
			return nil, false, err
		}
	}
	cands = map[string][]*candidate{}
	for i, k := range keys {
		h := s.held[k]
		delete(s.held, k)
		r := res[len(streams)+i]
		if !r.Found {
			continue // retention deleted it
		}
		pg, err := x.decodePage(r.KV, h.stream)
		if err != nil {
			return nil, false, err
		}
		if pg.Segment != "" {
			continue
		}
		if pg.Star != rec.Star || pg.Epoch != rec.Epoch {
			return nil, true, nil
		}
		low, at := uint64(noSlot), pg.First
		for _, sp := range pg.Spans {
			if at+sp[0] > starts[h.stream] {
				low = sp[1]
				break
			}
			at += sp[0]
		}
		if low == noSlot {
			continue // no ref on it is retained
		}
		if c.compactable(rec, &pg) {
			cands[h.stream] = append(cands[h.stream], &candidate{kv: r.KV, page: pg, low: pg.Spans[0][1]})
			continue
		}
		s.held[k] = heldPage{stream: h.stream, low: low}
	}
	return cands, false, nil
}

// readMany answers reads through metastore.ReadMany, MaxReadMany reads a
// request, MaxParallel requests at once.
func (c *Compactor) readMany(ctx context.Context, reads []metastore.Read) ([]metastore.ReadResult, error) {
	out := make([]metastore.ReadResult, len(reads))
	var g errgroup.Group
	g.SetLimit(c.opts.MaxParallel)
	for from := 0; from < len(reads); from += metastore.MaxReadMany {
		chunk := reads[from:min(len(reads), from+metastore.MaxReadMany)]
		g.Go(func() error {
			res, err := metastore.ReadMany(ctx, c.index.store, chunk)
			if err != nil {
				return err
			}
			copy(out[from:], res)
			return nil
		})
	}
	return out, g.Wait()
}
