package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/s3"
)

// throughput alternates rounds of raw creates and of appends (a fresh
// writer on a fresh epoch each round, on fresh buckets from zones), so that
// a load that comes and goes weighs on both alike, and returns both rates
// in slots per second.
func throughput(ctx context.Context, zones func() ([]objstore.Bucket, error), rounds int, round time.Duration, raw func(ctx context.Context, b []objstore.Bucket, ep uint64, deadline time.Time) (float64, time.Duration, error)) (appendRate, rawRate float64, err error) {
	m, err := newMinter()
	if err != nil {
		return 0, 0, err
	}
	data := make([]byte, payload)
	var appends, raws float64
	var appendTime, rawTime time.Duration
	for r := range rounds {
		b, err := zones()
		if err != nil {
			return 0, 0, err
		}
		n, d, err := raw(ctx, b, rawEpoch+uint64(r), time.Now().Add(round))
		if err != nil {
			return 0, 0, fmt.Errorf("raw creates: %w", err)
		}
		raws += n
		rawTime += d

		b, err = zones()
		if err != nil {
			return 0, 0, err
		}
		wr, err := newWriter(ctx, m, b, window)
		if err != nil {
			return 0, 0, err
		}
		an, ad, err := pipeline(ctx, wr, data, pipe{deadline: time.Now().Add(round)})
		if cerr := wr.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, 0, fmt.Errorf("appends: %w", err)
		}
		appends += float64(an)
		appendTime += ad
	}
	return appends / appendTime.Seconds(), raws / rawTime.Seconds(), nil
}

func sequential(ctx context.Context, b []objstore.Bucket, ep uint64, deadline time.Time) (float64, time.Duration, error) {
	n, d, err := rawLoop(ctx, b, ep, make([]byte, payload), 0, deadline)
	return float64(n), d, err
}

func appendsRow(id, backend string, appendRate, rawRate float64, rounds int, round time.Duration) Row {
	return Row{ID: id, Figure: fmt.Sprintf("appends/s, %s (K=3, W=2, 1 KiB, window 64)", backend), Value: appendRate, Unit: "appends/s"}.
		ref("sequential raw create loop", rawRate, "slots/s").
		note("%d alternating rounds of %v each", rounds, round)
}

func figAppendsMem(s *scope, cfg config) ([]Row, error) {
	zones := func() ([]objstore.Bucket, error) { return memZones(), nil }
	a, r, err := throughput(s.Context(), zones, cfg.memRounds, cfg.memRound, sequential)
	if err != nil {
		return nil, err
	}
	return []Row{appendsRow("appends.mem", "mem", a, r, cfg.memRounds, cfg.memRound)}, nil
}

// fsZonesOf returns a maker of K fresh filesystem zones in s's temporary
// directories, closed when s ends.
func fsZonesOf(s *scope) func() ([]objstore.Bucket, error) {
	var open []*fs.Bucket
	s.Cleanup(func() {
		for _, b := range open {
			_ = b.Close()
		}
	})
	return func() ([]objstore.Bucket, error) {
		out := make([]objstore.Bucket, k)
		for i := range out {
			b, err := fs.New(s.TempDir(), fs.Options{Name: zoneName(i)})
			if err != nil {
				return nil, err
			}
			open = append(open, b)
			out[i] = b
		}
		return out, nil
	}
}

func figAppendsFS(s *scope, cfg config) ([]Row, error) {
	a, r, err := throughput(s.Context(), fsZonesOf(s), cfg.fsRounds, cfg.fsRound, sequential)
	if err != nil {
		return nil, err
	}
	return []Row{appendsRow("appends.fs", "fs (fsync on)", a, r, cfg.fsRounds, cfg.fsRound)}, nil
}

// s3Zones starts one versitygw per zone and returns a function that makes
// a fresh bucket in each, through clients sized for the window.
func s3Zones(s *scope, n int) (func() ([]objstore.Bucket, error), error) {
	servers := make([]*testservers.S3Server, n)
	for i := range servers {
		servers[i] = testservers.StartVersityGW(s, testservers.S3Options{})
	}
	hc := s3.NewHTTPClient(2 * window)
	s.Cleanup(hc.CloseIdleConnections)
	return func() ([]objstore.Bucket, error) {
		out := make([]objstore.Bucket, n)
		for i, srv := range servers {
			cli, err := s3.NewClient(s.Context(), s3.ClientConfig{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: true, HTTPClient: hc})
			if err != nil {
				return nil, err
			}
			b, err := s3.New(cli, srv.NewBucketName(s), s3.Options{RemoteOptions: objstore.RemoteOptions{Name: zoneName(i)}})
			if err != nil {
				return nil, err
			}
			out[i] = b
		}
		return out, nil
	}, nil
}

func figAppendsS3(s *scope, cfg config) ([]Row, error) {
	zones, err := s3Zones(s, k)
	if err != nil {
		return nil, err
	}
	ctx := s.Context()
	a, r, err := throughput(ctx, zones, cfg.s3Rounds, cfg.s3Round, sequential)
	if err != nil {
		return nil, err
	}
	concurrent := func(ctx context.Context, b []objstore.Bucket, ep uint64, deadline time.Time) (float64, time.Duration, error) {
		return rawConcurrent(ctx, b, ep, make([]byte, payload), window, deadline)
	}
	a2, r2, err := throughput(ctx, zones, cfg.s3Rounds, cfg.s3Round, concurrent)
	if err != nil {
		return nil, err
	}
	return []Row{
		appendsRow("appends.s3", "versitygw (3 local processes)", a, r, cfg.s3Rounds, cfg.s3Round),
		Row{ID: "appends.s3.concurrent", Figure: "appends/s, versitygw, against PUTs at the writer's concurrency", Value: a2, Unit: "appends/s"}.
			ref("raw create-only PUTs, 64 at once per zone", r2, "slots/s").
			note("%d alternating rounds of %v each", cfg.s3Rounds, cfg.s3Round),
	}, nil
}
