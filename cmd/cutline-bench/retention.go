package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/settle"
)

// retentionDay sizes the retention figure: how long the simulated run
// lasts, the records appended each simulated minute over how many
// streams, and how often maintenance (compaction, trim, retention,
// collection) runs.
type retentionDay struct {
	day, keep, every time.Duration
	perMinute        int
	streams          int
}

func (c config) retentionDay() retentionDay {
	if c.quick {
		return retentionDay{day: 4 * time.Hour, keep: time.Hour, every: 10 * time.Minute, perMinute: 12, streams: 3}
	}
	return retentionDay{day: 24 * time.Hour, keep: time.Hour, every: 10 * time.Minute, perMinute: 60, streams: 10}
}

// retentionRecord is the size of a record's body in the retention
// figure.
const retentionRecord = 100

// retentionLocate is the figure's payload format: "<stream> <offset>
// <bytes>", one record per flight.
func retentionLocate(p []byte) ([]settle.Span, error) {
	f := strings.SplitN(string(p), " ", 3)
	if len(f) != 3 {
		return nil, fmt.Errorf("not a record: %.20q", p)
	}
	off, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: f[0], Offset: off, Count: 1, Start: 0, End: uint64(len(p))}}, nil
}

// footprint is what storage holds at one moment.
type footprint struct {
	objects, bytes, keys int
}

func measureFootprint(ctx context.Context, store metastore.Store, buckets []objstore.Bucket) (footprint, error) {
	var fp footprint
	for _, b := range buckets {
		for o, err := range objstore.All(ctx, b, "") {
			if err != nil {
				return fp, err
			}
			fp.objects++
			fp.bytes += int(o.Size)
		}
	}
	kvs, _, err := store.List(ctx, "")
	if err != nil {
		return fp, err
	}
	fp.keys = len(kvs)
	return fp, nil
}

// retentionRun is what a simulated day measured: the peak footprint of
// every hour, the records appended and the bytes of their flights, and
// the object requests of each maintenance step.
type retentionRun struct {
	hours   []footprint
	records int
	// flightBytes is the size of one flight object (a record each).
	flightBytes int
	// maintain counts the object requests of the day's maintenance
	// passes (settle.Maintainer.Pass: retention, compaction, trim and
	// collection; retention itself makes none, it moves keys in the
	// metastore). segments, flightsDeleted and collected sum what the
	// passes reported doing.
	maintain                            benchfix.Requests
	segments, flightsDeleted, collected int
}

// maintenance is every request maintenance made.
func (r *retentionRun) maintenance() benchfix.Requests { return r.maintain }

// runRetentionDay appends steadily for a simulated day on a fake clock
// (in-memory zones and metastore) while maintenance compacts the star's
// epoch, trims its rewritten flights, retains each stream by age and
// collects dropped segments, and returns the peak footprint of every
// simulated hour and the requests maintenance made.
func runRetentionDay(ctx context.Context, d retentionDay) (*retentionRun, error) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		return nil, err
	}
	// The writer has zones of its own (it may still send a late copy
	// while maintenance runs); maintenance's are counted; the footprint
	// is listed on the raw zones.
	buckets := memZones()
	var counted []*fault.Bucket
	var views []objstore.Bucket
	for _, b := range buckets {
		f := fault.Wrap(b, fault.Options{})
		counted, views = append(counted, f), append(views, f)
	}
	zones, err := chain.NewZones(views...)
	if err != nil {
		return nil, err
	}
	run := &retentionRun{}
	counting := func(into *benchfix.Requests, f func() error) error {
		benchfix.Reset(counted)
		err := f()
		*into = into.Add(benchfix.Count(counted))
		return err
	}
	x, err := settle.NewRefIndex(store, "", retentionLocate)
	if err != nil {
		return nil, err
	}
	x.WithClock(clk)
	wr, err := newWriter(ctx, m, buckets, window)
	if err != nil {
		return nil, err
	}
	defer wr.Abort()
	ep := wr.Record().Epoch
	fencer, err := fence.New(m, zones, fence.Options{Identity: "bench-fencer"})
	if err != nil {
		return nil, err
	}
	settler, err := settle.New(m, zones, x, settle.Options{Fencer: fencer})
	if err != nil {
		return nil, err
	}
	compactor, err := settle.NewCompactor(m, zones, x, "bench-compactor", settle.CompactorOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, d.streams)
	next := make([]uint64, d.streams)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
	}
	// What a host runs: the library's maintenance pass, over the live
	// epoch (never settled: it has no SettleBefore).
	maint, err := settle.NewMaintainer(settle.MaintainerConfig{
		Store: store, Minter: m, Settler: settler, Compactor: compactor, Refs: x,
		Streams: func(context.Context) ([]string, error) { return names, nil },
	}, settle.MaintainerOptions{Policy: settle.Policy{MaxAge: d.keep}, Clock: clk})
	if err != nil {
		return nil, err
	}
	body := strings.Repeat("x", retentionRecord)
	var peak footprint
	for minute := 1; time.Duration(minute)*time.Minute <= d.day; minute++ {
		placed := make([]settle.Placed, 0, d.perMinute)
		for i := range d.perMinute {
			s := i % d.streams
			p := fmt.Appendf(nil, "%s %d %s", names[s], next[s], body)
			pos, err := wr.Append(ctx, p)
			if err != nil {
				return nil, err
			}
			spans, _ := retentionLocate(p)
			placed = append(placed, settle.Placed{Position: pos, Spans: spans})
			next[s]++
			run.records++
			run.flightBytes = len(wire.EncodeFlight(star, ep, pos.Slot, p))
		}
		if err := x.CoverFlights(ctx, star, placed); err != nil {
			return nil, err
		}
		if _, err := wr.Checkpoint(ctx, placed[len(placed)-1].Position.Slot+1); err != nil {
			return nil, err
		}
		clk.Advance(time.Minute)
		now := time.Duration(minute) * time.Minute
		if now%d.every == 0 {
			if err := counting(&run.maintain, func() error {
				rep, err := maint.Pass(ctx)
				run.segments += rep.Segments
				run.flightsDeleted += rep.FlightsDeleted
				run.collected += rep.Collected
				return err
			}); err != nil {
				return nil, err
			}
		}
		// Measured every minute: flights wait for their stream's page to
		// fill before compaction takes them, so what storage holds is a
		// sawtooth, and an hour's peak is what it must have room for.
		fp, err := measureFootprint(ctx, store, buckets)
		if err != nil {
			return nil, err
		}
		peak = footprint{max(peak.objects, fp.objects), max(peak.bytes, fp.bytes), max(peak.keys, fp.keys)}
		if now%time.Hour == 0 {
			run.hours = append(run.hours, peak)
			peak = footprint{}
		}
	}
	return run, nil
}

// figRetention: a simulated day of steady appends with a retention of one
// hour, maintenance every ten minutes. What storage holds (objects,
// bytes, metastore keys) at its peak in each hour after the first is
// beside its peak in the second, the first hour retention dropped a full
// hour: flat means a ratio near 1. Then what that costs: the bytes and
// objects held all month at that load, beside what a month of appends
// holds kept whole, and the object requests maintenance (compaction,
// trim, collection) spends per record, beside the appends' own.
func figRetention(s *scope, cfg config) ([]Row, error) {
	d := cfg.retentionDay()
	run, err := runRetentionDay(s.Context(), d)
	if err != nil {
		return nil, err
	}
	fps := run.hours
	if len(fps) < 3 {
		return nil, fmt.Errorf("retention: %d hours measured, need 3", len(fps))
	}
	ref := fps[1]
	steady := fps[1:]
	what := fmt.Sprintf("%v at %d records/min over %d streams, retention %v", d.day, d.perMinute, d.streams, d.keep)
	peakOf := func(get func(footprint) int) (int, []int) {
		vals := make([]int, len(steady))
		for i, fp := range steady {
			vals[i] = get(fp)
		}
		return slices.Max(vals), vals
	}
	row := func(id, name, unit string, get func(footprint) int) Row {
		peak, vals := peakOf(get)
		return Row{ID: "retention." + id, Figure: fmt.Sprintf("retention: peak %s stored after the first hour (%s)", name, what),
			Value: float64(peak), Unit: unit, RefLabel: "peak of the second hour", RefValue: float64(get(ref)), RefUnit: unit,
			Ratio: float64(peak) / float64(max(get(ref), 1))}.
			note("hourly peaks from the second hour: %v; in the first: %d", vals, get(fps[0]))
	}
	// A month at the same load: each record is a flight, K copies of it
	// while it is kept whole.
	perMonth := float64(d.perMinute) * month.Minutes()
	load := fmt.Sprintf("%d records/min (%s a month) of about %d bytes, a flight each, over %d streams; retention %v, maintenance every %v",
		d.perMinute, thousands(int64(perMonth)), retentionRecord, d.streams, d.keep, d.every)
	peakBytes, _ := peakOf(func(f footprint) int { return f.bytes })
	peakObjects, _ := peakOf(func(f footprint) int { return f.objects })
	m := run.maintenance()
	perRec := func(n int) string { return num(float64(n) / float64(run.records)) }
	kinds := func(r benchfix.Requests) string {
		return fmt.Sprintf("%s reads, %s creates, %s deletes, %s lists", perRec(r.Reads), perRec(r.Creates), perRec(r.Deletes), perRec(r.Lists))
	}
	return []Row{
		row("objects", "objects", "objects", func(f footprint) int { return f.objects }),
		row("bytes", "bytes", "bytes", func(f footprint) int { return f.bytes }),
		row("keys", "metastore keys", "keys", func(f footprint) int { return f.keys }),
		Row{ID: "retention.month.bytes", Figure: "retention: bytes held all month, steady load", Value: float64(peakBytes), Unit: "bytes"}.
			ref("a month kept whole", perMonth*float64(k*run.flightBytes), "bytes").
			note("%s GB-months a month (the steady peak, every zone); kept whole, a month of appends holds K=%d copies of each %d-byte flight; %s",
				num(float64(peakBytes)/1e9), k, run.flightBytes, load),
		Row{ID: "retention.month.objects", Figure: "retention: objects held all month, steady load", Value: float64(peakObjects), Unit: "objects"}.
			ref("a month kept whole", perMonth*k, "objects").
			note("the steady peak, every zone: flights not yet compacted, segments, poison; %s", load),
		Row{ID: "retention.maintenance", Figure: "retention: maintenance requests per record", Value: float64(m.Total()) / float64(run.records), Unit: "requests"}.
			ref("K creates per append", k, "requests").objects(m).
			note("settle.Maintainer passes (retention, compaction, trim, collection): %s; per record appended, over %s records in %v. A compactor remembers how far it scanned and which pages it left to their holder; a page that crosses the end of a pass has its later flights read twice",
				kinds(run.maintain), thousands(int64(run.records)), d.day),
	}, nil
}
