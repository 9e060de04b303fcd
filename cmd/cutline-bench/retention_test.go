package main

import (
	"testing"
	"time"
)

// With a retention of one hour and maintenance every ten minutes, what
// storage holds stops growing after the first hour: each later hour's
// peak is about the second's, though appends go on at the same rate.
func TestRetentionDayIsFlat(t *testing.T) {
	d := retentionDay{day: 5 * time.Hour, keep: time.Hour, every: 10 * time.Minute, perMinute: 12, streams: 3}
	run, err := runRetentionDay(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	fps := run.hours
	if len(fps) != 5 {
		t.Fatalf("%d hours measured, want 5", len(fps))
	}
	ref := fps[1]
	for h, fp := range fps[1:] {
		t.Logf("hour %d: %+v", h+2, fp)
		for _, c := range []struct {
			what     string
			got, ref int
		}{{"objects", fp.objects, ref.objects}, {"bytes", fp.bytes, ref.bytes}, {"keys", fp.keys, ref.keys}} {
			if float64(c.got) > 1.25*float64(c.ref) {
				t.Errorf("hour %d: %d %s, the second hour held %d: storage grows under retention", h+2, c.got, c.what, c.ref)
			}
		}
	}
	if fps[0].objects == 0 || fps[0].keys == 0 {
		t.Fatalf("nothing stored after the first hour: %+v", fps[0])
	}
	// Maintenance reads what it compacts, writes segments, and deletes
	// flights; every record appended is counted once.
	if want := 5 * 60 * d.perMinute; run.records != want {
		t.Errorf("%d records appended, want %d", run.records, want)
	}
	if run.segments == 0 || run.flightsDeleted == 0 || run.collected == 0 {
		t.Errorf("maintenance did not compact, trim and collect: %d segments, %d flights deleted, %d collections", run.segments, run.flightsDeleted, run.collected)
	}
	if m := run.maintain; m.Reads == 0 || m.Creates == 0 || m.Deletes == 0 || m.Lists == 0 {
		t.Errorf("maintenance requests: %v", m)
	}
}
