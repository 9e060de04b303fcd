package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

const (
	// batchRecord is the size of one producer record.
	batchRecord = 100
	// batchFlight is the producer's MaxBytes: the flight's payload bound.
	batchFlight = 1 << 20
)

// batchStar starts a star over buckets (a fresh in-memory metastore, K=3,
// W=2, window 64, a RefIndex over bundles) holding stream, and returns it
// with its shutdown.
func batchStar(ctx context.Context, buckets []objstore.Bucket) (*lease.Star, func(), error) {
	meta := memstore.New(memstore.Options{})
	zones, err := chain.NewZones(buckets...)
	if err != nil {
		return nil, nil, err
	}
	m, err := epoch.NewMinter(meta, epoch.Options{Identity: star})
	if err != nil {
		return nil, nil, err
	}
	f, err := fence.New(m, zones, fence.Options{Identity: star})
	if err != nil {
		return nil, nil, err
	}
	refs, err := settle.NewRefIndex(meta, "", batch.Locate)
	if err != nil {
		return nil, nil, err
	}
	settler, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	if err != nil {
		return nil, nil, err
	}
	sess, err := meta.NewSession(ctx, time.Minute)
	if err != nil {
		return nil, nil, err
	}
	st, err := lease.Start(ctx, lease.Config{Star: star, Store: meta, Session: sess, Minter: m, Settler: settler, Index: refs,
		Constants: constants(buckets, window)}, lease.Options{})
	if err != nil {
		_ = sess.Close(ctx)
		return nil, nil, err
	}
	stop := func() {
		_ = st.Close(ctx)
		_ = sess.Close(ctx)
	}
	if _, err := st.Open(ctx, stream, lease.OpenOptions{}); err != nil {
		stop()
		return nil, nil, err
	}
	return st, stop, nil
}

// batchRound adds 100-byte records through a Producer until the deadline,
// flushes, and returns the records acknowledged, the time from the first
// Add to the last acknowledgement, and the producer's flights and their
// payload bytes.
func batchRound(ctx context.Context, buckets []objstore.Bucket, deadline time.Time) (records int, d time.Duration, st batch.Stats, err error) {
	star, stop, err := batchStar(ctx, buckets)
	if err != nil {
		return 0, 0, st, err
	}
	defer stop()
	p, err := batch.New(star, batch.Options{MaxBytes: batchFlight, MaxBuffered: window * batchFlight})
	if err != nil {
		return 0, 0, st, err
	}
	defer func() {
		if cerr := p.Close(ctx); err == nil {
			err = cerr
		}
	}()
	rec := make([]byte, batchRecord)
	start := time.Now()
	var last *batch.Ack
	for i := 0; i%256 != 0 || time.Now().Before(deadline); i++ {
		if last, err = p.Add(ctx, stream, rec); err != nil {
			return 0, 0, st, err
		}
	}
	if err := p.Flush(ctx); err != nil {
		return 0, 0, st, err
	}
	if _, _, err := last.Wait(ctx); err != nil {
		return 0, 0, st, err
	}
	d = time.Since(start)
	st = p.Stats()
	if st.Failed != 0 || st.Flights == 0 {
		return 0, 0, st, fmt.Errorf("producer: %d records failed, %d flights", st.Failed, st.Flights)
	}
	return int(st.Records), d, st, nil
}

// batchThroughput alternates rounds of the producer and of raw
// create-only PUTs of objects of the producer's mean flight size at the
// star's concurrency (window creates at once per zone), each on fresh
// buckets, and returns the producer's records/s, the raw bytes/s, and
// the mean flight's payload bytes.
func batchThroughput(ctx context.Context, zones func() ([]objstore.Bucket, error), rounds int, round time.Duration) (recRate, rawBytes, flight float64, err error) {
	var recs, rawData float64
	var recTime, rawTime time.Duration
	var flights, flightBytes float64
	for r := range rounds {
		b, err := zones()
		if err != nil {
			return 0, 0, 0, err
		}
		n, d, st, err := batchRound(ctx, b, time.Now().Add(round))
		if err != nil {
			return 0, 0, 0, fmt.Errorf("producer: %w", err)
		}
		recs += float64(n)
		recTime += d
		flights += float64(st.Flights)
		flightBytes += float64(st.Bytes)
		size := int(st.Bytes / st.Flights)

		if b, err = zones(); err != nil {
			return 0, 0, 0, err
		}
		slots, rd, err := rawConcurrent(ctx, b, rawEpoch+uint64(r), make([]byte, size), window, time.Now().Add(round))
		if err != nil {
			return 0, 0, 0, fmt.Errorf("raw creates: %w", err)
		}
		rawData += slots * float64(size)
		rawTime += rd
	}
	return recs / recTime.Seconds(), rawData / rawTime.Seconds(), flightBytes / flights, nil
}

func batchRow(id, backend string, recRate, rawBytes, flight float64, rounds int, round time.Duration) Row {
	r := Row{ID: id, Figure: fmt.Sprintf("records/s through batch.Producer, %s (100 B records, ≤ 1 MiB flights, K=3, W=2, window 64)", backend), Value: recRate, Unit: "records/s"}.
		ref(fmt.Sprintf("raw create-only PUTs of the mean flight (%s), 64 at once per zone", batchSize(flight)), rawBytes, "bytes/s")
	// The ratio is in bytes: the records' bytes per second ÷ the raw PUTs'.
	r.Ratio = recRate * batchRecord / rawBytes
	return r.note("ratio in bytes: the records' %s/s ÷ the raw PUTs' bytes/s; %d alternating rounds of %v each", batchSize(recRate*batchRecord), rounds, round)
}

// batchSize prints a byte count.
func batchSize(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// figBatch: 100-byte records through a batching producer (batch)
// on a star, on mem, fs and versitygw, each beside raw create-only PUTs
// of the producer's mean flight size at the writer's concurrency. The
// versitygw row is left out, and said so in the other rows' notes, when
// versitygw cannot be started (CI=true makes that fail the figure).
func figBatch(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	var rows []Row
	a, r, f, err := batchThroughput(ctx, func() ([]objstore.Bucket, error) { return memZones(), nil }, cfg.memRounds, cfg.memRound)
	if err != nil {
		return nil, fmt.Errorf("mem: %w", err)
	}
	rows = append(rows, batchRow("batch.mem", "mem", a, r, f, cfg.memRounds, cfg.memRound))

	if a, r, f, err = batchThroughput(ctx, fsZonesOf(s), cfg.fsRounds, cfg.fsRound); err != nil {
		return nil, fmt.Errorf("fs: %w", err)
	}
	rows = append(rows, batchRow("batch.fs", "fs (fsync on)", a, r, f, cfg.fsRounds, cfg.fsRound))

	row, skipped, err := batchS3(s, cfg)
	switch {
	case err != nil:
		return nil, fmt.Errorf("versitygw: %w", err)
	case skipped != "":
		for i := range rows {
			rows[i].Note += "; the versitygw row was skipped: " + skipped
		}
	default:
		rows = append(rows, row)
	}
	return rows, nil
}

// batchS3 measures the versitygw row. A Skip from starting the servers (no
// versitygw, CI unset) comes back as its message; a Fatal goes on up.
func batchS3(s *scope, cfg config) (row Row, skipped string, err error) {
	defer func() {
		if p := recover(); p != nil {
			if a, ok := p.(abort); ok && a.skip {
				skipped = a.msg
				return
			}
			panic(p)
		}
	}()
	zones, err := s3Zones(s, k)
	if err != nil {
		return Row{}, "", err
	}
	a, r, f, err := batchThroughput(s.Context(), zones, cfg.s3Rounds, cfg.s3Round)
	if err != nil {
		return Row{}, "", err
	}
	if a == 0 {
		return Row{}, "", errors.New("no record acknowledged")
	}
	return batchRow("batch.s3", "versitygw (3 local processes)", a, r, f, cfg.s3Rounds, cfg.s3Round), "", nil
}
