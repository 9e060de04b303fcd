package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/internal/synth"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

const (
	// scaleLag is how many acknowledged records the dead host had not
	// covered (nor checkpointed) in the scale figures.
	scaleLag = 16
	// scaleRuns is how many refs cover the checkpointed prefix: the
	// takeover reads none of them, so their number only costs the layout.
	scaleRuns = 1000
	// historyRecords is the stream's length in the history figure.
	historyRecords = 1000
)

// scaleResult is what one takeover asked for, and its time.
type scaleResult struct {
	time    time.Duration
	rounds  int
	meta    metacount.Stats
	objects benchfix.Requests
}

// scaleTakeover lays out a star with past settled epochs and then the
// epoch its writer died in: n records of the stream, one per slot, the
// last scaleLag not covered, and a ragged tail of a full window. The
// checkpointed prefix lives in synthetic buckets (internal/synth), which
// answer for any number of slots without storing them, and its refs are
// written as scaleRuns spans; the rest is laid as settle's takeover
// benchmark lays it (benchfix.LayRaggedEpoch), in in-memory buckets above
// the synthetic ones (layered). A successor then takes the
// star over (SettleAll: fence and settle; then RefIndex.Next, where the
// stream goes on), every object request delayed by lat; its metastore
// keys and object requests are counted.
func scaleTakeover(ctx context.Context, n, past int, lat time.Duration, seed uint64) (scaleResult, error) {
	store := metacount.Wrap(memstore.New(memstore.Options{}))
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		return scaleResult{}, err
	}
	refs, err := settle.NewRefIndex(store, "", locate)
	if err != nil {
		return scaleResult{}, err
	}
	laid := uint64(n - scaleLag)
	sc := &synth.Chain{Star: star, N: laid, Payload: record(0)}
	var raw, views []objstore.Bucket
	var counted []*fault.Bucket
	for _, b := range synth.NewZones(sc, k) {
		l := &layered{base: b, top: memblob.New(b.Name())}
		f := fault.Wrap(l, fault.Options{})
		raw, counted, views = append(raw, l), append(counted, f), append(views, benchfix.Slow(f, lat))
	}
	c := constants(raw, window)
	for range past {
		rec, err := m.Mint(ctx, star, c)
		if err != nil {
			return scaleResult{}, err
		}
		if _, err := m.Publish(ctx, star, rec.Epoch, 0); err != nil {
			return scaleResult{}, err
		}
		if _, err := m.MarkSettled(ctx, star, rec.Epoch); err != nil {
			return scaleResult{}, err
		}
	}
	l := raggedEpoch(n, scaleLag, seed)
	l.Laid = int(laid)
	l.CoverPrefix = coverRuns
	ep, err := benchfix.LayRaggedEpoch(ctx, m, refs, raw, l)
	if err != nil {
		return scaleResult{}, err
	}
	zones := chain.MustZones(views...)
	f, err := fence.New(m, zones, fence.Options{Identity: "successor"})
	if err != nil {
		return scaleResult{}, err
	}
	st, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	if err != nil {
		return scaleResult{}, err
	}
	runtime.GC() // the layout's garbage is not the takeover's
	store.Reset()
	benchfix.Reset(counted)
	start := time.Now()
	reps, err := st.SettleAll(ctx, star)
	if err != nil {
		return scaleResult{}, err
	}
	next, err := refs.Next(ctx, stream)
	el := time.Since(start)
	if err != nil {
		return scaleResult{}, err
	}
	if len(reps) != 1 || reps[0].Epoch != ep || reps[0].Fence == nil || reps[0].Covered != scaleLag+4 || next != uint64(n)+4 {
		return scaleResult{}, fmt.Errorf("takeover of %d records after %d epochs: reports %+v, next %d", n, past, reps, next)
	}
	return scaleResult{time: el, rounds: reps[0].Fence.Rounds, meta: store.Stats(), objects: benchfix.Count(counted)}, nil
}

// coverRuns covers the first covered offsets of the stream, at the slots
// of the same numbers in epoch ep, in scaleRuns spans of consecutive
// records (a run's ref at its first slot).
func coverRuns(ctx context.Context, refs *settle.RefIndex, ep, covered uint64) error {
	per := max(1, (covered+scaleRuns-1)/scaleRuns)
	for off := uint64(0); off < covered; off += per {
		cnt := min(per, covered-off)
		if err := refs.CoverSpan(ctx, star, chain.Position{Epoch: ep, Slot: off}, settle.Span{Stream: stream, Offset: off, Count: cnt, End: uint64(len(record(off)))}); err != nil {
			return err
		}
	}
	return nil
}

// scaleBest runs reps takeovers of one size and returns the shortest time
// (the latency per request sets a floor; a loaded machine only adds to
// it) and the counts of the last repetition. Counts vary between
// repetitions only with the tail's random copies, whose seeds every size
// shares, so the counts of different sizes compare exactly.
func scaleBest(ctx context.Context, n, past int, lat time.Duration, reps int) (scaleResult, error) {
	var best time.Duration
	var last scaleResult
	for i := range reps {
		r, err := scaleTakeover(ctx, n, past, lat, uint64(i))
		if err != nil {
			return scaleResult{}, err
		}
		if i == 0 || r.time < best {
			best = r.time
		}
		last = r
	}
	last.time = best
	return last, nil
}

// scaleRows are the rows of one size: time, metastore keys and object
// requests, beside those of the reference size (ref nil: this is it).
func scaleRows(id, what string, r, ref *scaleResult, refSize string, lat time.Duration, reps int) []Row {
	rows := []Row{
		Row{ID: id + ".time", Figure: fmt.Sprintf("takeover %s: time at %v per request", what, lat), Value: ms(r.time), Unit: "ms"}.
			note("%d fence rounds; best of %d", r.rounds, reps),
		Row{ID: id + ".keys", Figure: fmt.Sprintf("takeover %s: metastore keys read", what), Value: float64(r.meta.Keys), Unit: "keys"}.
			note("%d gets, %d lists, %d transactions", r.meta.Gets, r.meta.Lists, r.meta.Txns),
		Row{ID: id + ".requests", Figure: fmt.Sprintf("takeover %s: object requests", what), Value: float64(r.objects.Total()), Unit: "requests"}.
			objects(r.objects).note("%s", r.objects),
	}
	if ref == nil {
		for i := range rows {
			rows[i].Note = "reference size; " + rows[i].Note
		}
		return rows
	}
	label := "same at " + refSize
	rows[0] = rows[0].ref(label, ms(ref.time), "ms")
	rows[1] = rows[1].ref(label, float64(ref.meta.Keys), "keys")
	rows[2] = rows[2].ref(label, float64(ref.objects.Total()), "requests")
	return rows
}

// figTakeoverStream: a takeover as the stream grows: 10³, 10⁴, 10⁵ and
// 10⁶ records (one per slot; 16 not covered, a ragged tail of a full
// window), each size beside the smallest. Goal: flat.
func figTakeoverStream(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	var rows []Row
	var ref *scaleResult
	for _, n := range cfg.streamSizes {
		r, err := scaleBest(ctx, n, 0, cfg.scaleLatency, cfg.scaleReps)
		if err != nil {
			return nil, err
		}
		what := "of a stream of " + thousands(int64(n)) + " records"
		refSize := thousands(int64(cfg.streamSizes[0])) + " records"
		rows = append(rows, scaleRows(fmt.Sprintf("takeover.stream.%d", n), what, &r, ref, refSize, cfg.scaleLatency, cfg.scaleReps)...)
		if ref == nil {
			ref = &r
		}
	}
	return rows, nil
}

// figTakeoverHistory: a takeover as the star's history grows: after 10,
// 10³ and 10⁴ past epochs (10, 100 and 1,000 with -quick; minted,
// published empty and settled), the epoch the writer died in holding
// 1,000 records; each beside the first. Goal: flat.
func figTakeoverHistory(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	var rows []Row
	var ref *scaleResult
	for _, past := range cfg.historySizes {
		r, err := scaleBest(ctx, historyRecords, past, cfg.scaleLatency, cfg.scaleReps)
		if err != nil {
			return nil, err
		}
		what := "after " + thousands(int64(past)) + " past epochs"
		refSize := thousands(int64(cfg.historySizes[0])) + " past epochs"
		rows = append(rows, scaleRows(fmt.Sprintf("takeover.history.%d", past), what, &r, ref, refSize, cfg.scaleLatency, cfg.scaleReps)...)
		if ref == nil {
			ref = &r
		}
	}
	return rows, nil
}

// layered is a synthetic prefix (base, whose slots below its N hold
// their flights) under an in-memory bucket (top) that holds everything
// created: the tail laid out, poison, repaired copies. Reads look in top
// first; lists and deletes see top only, which is what a real bucket
// would show them: settlement lists and deletes past the cut, above the
// prefix.
type layered struct {
	base *synth.Bucket
	top  *memblob.Bucket
}

var _ objstore.Bucket = (*layered)(nil)

func (l *layered) Name() string { return l.top.Name() }

func (l *layered) Create(ctx context.Context, key string, data []byte) error {
	if _, err := l.base.Get(ctx, key); err == nil {
		return &objstore.OpError{Op: "create", Bucket: l.Name(), Key: key, Err: objstore.ErrExists}
	}
	return l.top.Create(ctx, key, data)
}

func (l *layered) Get(ctx context.Context, key string) ([]byte, error) {
	d, err := l.top.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return l.base.Get(ctx, key)
	}
	return d, err
}

func (l *layered) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	d, err := l.top.GetRange(ctx, key, off, n)
	if errors.Is(err, objstore.ErrNotFound) {
		return l.base.GetRange(ctx, key, off, n)
	}
	return d, err
}

func (l *layered) Delete(ctx context.Context, key string) error { return l.top.Delete(ctx, key) }

func (l *layered) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	return l.top.List(ctx, prefix, after, limit)
}
