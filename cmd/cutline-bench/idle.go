package main

import (
	"fmt"
	"time"

	"github.com/cutline/cutline/epoch"
	metamem "github.com/cutline/cutline/metastore/mem"
)

// figIdle: a Writer and a Roller (in-memory zones and metastore, counted)
// append a window of records, which are acknowledged (and, for the
// Roller, covered and checkpointed); then nothing is appended for the
// idle period, during which every request they make is counted. Both idle
// at once.
func figIdle(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	wmeta := &countingStore{Store: metamem.New(metamem.Options{})}
	m, err := epoch.NewMinter(wmeta, epoch.Options{})
	if err != nil {
		return nil, err
	}
	_, wcounted, wzones := countedZones(0)
	wr, err := newWriter(ctx, m, wzones, window)
	if err != nil {
		return nil, err
	}
	defer func() { _ = wr.Close(ctx) }()
	if _, _, err := pipeline(ctx, wr, make([]byte, payload), pipe{n: window}); err != nil {
		return nil, err
	}
	if _, err := wr.Checkpoint(ctx, window); err != nil {
		return nil, err
	}

	h, err := openRoller(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = h.r.Close(ctx) }()
	if err := h.appendCovered(ctx, window); err != nil {
		return nil, err
	}

	// The background creates of decided slots end within a moment.
	time.Sleep(100 * time.Millisecond)
	resetCounts(wcounted)
	wmeta.reset()
	resetCounts(h.counted)
	h.meta.reset()
	select {
	case <-time.After(cfg.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	wo, wm := count(wcounted), wmeta.total()
	ro, rm := count(h.counted), h.meta.total()
	period := fmt.Sprintf("%v", cfg.idle)
	return []Row{
		Row{ID: "idle.writer", Figure: "requests while idle for " + period + ": chain.Writer", Value: float64(wo.total()) + float64(wm), Unit: "requests", Zero: true}.
			note("%s; %d metastore requests", wo, wm),
		Row{ID: "idle.roller", Figure: "requests while idle for " + period + ": settle.Roller", Value: float64(ro.total()) + float64(rm), Unit: "requests", Zero: true}.
			note("%s; %d metastore requests", ro, rm),
	}, nil
}
