package sim

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/settle"
)

// The lifecycle kinds the coverage count tracks; each must be reached by
// the CI seeds.
var lifecycleKinds = []string{"compact", "collect", "trim rewritten", "retain", "crash:compact", "crash:retain"}

// anyEpoch picks an epoch of some star that has one: compaction works on
// any of them below its checkpoint, settled or open.
func (w *world) anyEpoch() *epoch.Record {
	var names []string
	for _, name := range starNames {
		if w.nodes[name] != nil {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	star := names[w.r.IntN(len(names))]
	var recs []*epoch.Record
	for rec, err := range w.party("lister").Minter.Epochs(w.ctx, star) {
		if err != nil {
			return nil
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return nil
	}
	return recs[w.r.IntN(len(recs))]
}

// compact runs a compactor on an epoch in the background, racing the
// epoch's holder and other compactors: Compact, then Collect, then
// TrimRewritten, cancelled after a delay sometimes (a crash).
func (w *world) compact() {
	rec := w.anyEpoch()
	if rec == nil {
		return
	}
	p := w.party("compactor")
	c, err := settle.NewCompactor(p.Minter, p.Zones, p.Refs, p.Name, settle.CompactorOptions{PassSlots: 1 + w.r.IntN(8)})
	if err != nil {
		w.t.Fatalf("compactor: %v", err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	var crashAt time.Duration
	if w.r.IntN(3) == 0 {
		crashAt = 1 + w.delay(30*time.Millisecond)
	}
	collect, trim := w.r.IntN(2) == 0, w.r.IntN(3) > 0
	w.note("compact %s/%d crashAt=%v collect=%v trim=%v", rec.Star, rec.Epoch, crashAt, collect, trim)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer cancel()
		var crashed atomic.Bool
		if crashAt > 0 {
			stop := time.AfterFunc(crashAt, func() { crashed.Store(true); cancel() })
			defer stop.Stop()
		}
		crash := func(err error) bool {
			if err != nil && crashed.Load() {
				w.cov.add("crash:compact")
			}
			return err != nil
		}
		rep, err := c.Compact(ctx, rec.Star, rec.Epoch)
		if crash(err) {
			return
		}
		if rep.Segments > 0 {
			w.cov.add("compact")
		}
		if collect {
			if _, err := c.Collect(ctx, rec.Star, rec.Epoch); crash(err) {
				return
			}
			w.cov.add("collect")
		}
		if trim {
			tr, err := p.Settler.TrimRewritten(ctx, rec.Star, rec.Epoch)
			if crash(err) {
				return
			}
			if tr.Deleted > 0 {
				w.cov.add("trim rewritten")
			}
		}
	}()
}

// retain moves a stream's retention point up in the background, by a
// policy of records or bytes. A crash cancels it after a few yields: it
// only talks to the metastore, whose calls take no time on the bubble's
// clock.
func (w *world) retain() {
	s := streams[w.r.IntN(len(streams))]
	p := w.party("retainer")
	ctx, cancel := context.WithTimeout(w.ctx, opBound)
	crashAfter := -1
	if w.r.IntN(3) == 0 {
		crashAfter = w.r.IntN(8)
	}
	policy := settle.Policy{MaxRecords: uint64(w.r.IntN(6))}
	if w.r.IntN(2) == 0 {
		policy = settle.Policy{MaxBytes: int64(w.r.IntN(100))}
	}
	w.note("retain %s %+v crashAfter=%d", s, policy, crashAfter)
	var crashed atomic.Bool
	if crashAfter >= 0 {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for range crashAfter {
				runtime.Gosched()
			}
			crashed.Store(true)
			cancel()
		}()
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer cancel()
		rep, err := p.Refs.RetainPolicy(ctx, s, policy)
		switch {
		case err == nil && rep.By != "":
			w.cov.add("retain")
		case err != nil && crashed.Load():
			w.cov.add("crash:retain")
		}
	}()
}

// compactAll compacts and trims every epoch of every star, once all are
// settled: what a compactor that keeps up leaves behind. Collect runs
// twice, the second finding nothing left to delete.
func (w *world) compactAll() {
	p := w.party("final-compactor")
	c, err := settle.NewCompactor(p.Minter, p.Zones, p.Refs, p.Name, settle.CompactorOptions{})
	if err != nil {
		w.t.Fatalf("compactor: %v", err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, finalBound)
	defer cancel()
	for _, star := range append(starNames, "janitor") {
		var recs []*epoch.Record
		for rec, err := range p.Minter.Epochs(ctx, star) {
			if err != nil {
				w.t.Fatalf("epochs of %s: %v", star, err)
			}
			recs = append(recs, rec)
		}
		for _, rec := range recs {
			rep, err := c.Compact(ctx, star, rec.Epoch)
			if err != nil {
				w.t.Fatalf("compact %s/%d: %v", star, rec.Epoch, err)
			}
			if rep.Segments > 0 {
				w.cov.add("compact")
			}
			if _, err := c.Collect(ctx, star, rec.Epoch); err != nil {
				w.t.Fatalf("collect %s/%d: %v", star, rec.Epoch, err)
			}
			tr, err := p.Settler.TrimRewritten(ctx, star, rec.Epoch)
			if err != nil {
				w.t.Fatalf("trim rewritten %s/%d: %v", star, rec.Epoch, err)
			}
			if tr.Deleted > 0 {
				w.cov.add("trim rewritten")
			}
		}
	}
	w.note("compact all")
}
