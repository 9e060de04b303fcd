package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rowIDs are the rows a full selection prints; zeroOK those whose figure
// may be 0.
var (
	rowIDs = []string{
		"appends.mem", "appends.fs", "appends.s3", "appends.s3.concurrent",
		"pipeline.5ms", "pipeline.20ms",
		"latency.fixed20.p50", "latency.fixed20.p99", "latency.lognormal.p50", "latency.lognormal.p99",
		"allocs.ns", "allocs.allocs",
		"fence.10.rounds", "fence.10.requests", "fence.10.time",
		"fence.1000.rounds", "fence.1000.requests", "fence.1000.time",
		"fence.1000000.rounds", "fence.1000000.requests", "fence.1000000.time",
		"takeover.time", "takeover.requests", "roll.time", "roll.requests",
		"mint.latency",
		"heap.peak",
		"idle.writer", "idle.roller",
	}
	zeroOK = map[string]bool{"heap.peak": true, "idle.writer": true, "idle.roller": true}
)

// TestQuick runs every figure with -quick (the servers too: versitygw and
// embedded etcd; CI=true makes a missing versitygw fail) and checks that
// every row is there with a sane value, and that the table shows them all.
// It asserts nothing about times: they depend on the machine.
func TestQuick(t *testing.T) {
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"-quick", "-json"}, &out, &log)
	t.Logf("progress:\n%s", log.String())
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out.String())
	}
	for _, f := range res.Failures {
		t.Errorf("figure %s: skipped=%v: %s", f.Figure, f.Skipped, f.Error)
	}
	if res.Machine.CPUs < 1 || res.Machine.Go == "" {
		t.Errorf("machine: %+v", res.Machine)
	}
	byID := map[string]Row{}
	for _, r := range res.Rows {
		if _, dup := byID[r.ID]; dup {
			t.Errorf("row %s twice", r.ID)
		}
		byID[r.ID] = r
	}
	for _, id := range rowIDs {
		r, ok := byID[id]
		if !ok {
			t.Errorf("row %s missing", id)
			continue
		}
		if r.Figure == "" || r.Unit == "" {
			t.Errorf("row %s: no figure or unit: %+v", id, r)
		}
		if r.Value < 0 || (r.Value == 0 && !zeroOK[id]) {
			t.Errorf("row %s: value %v", id, r.Value)
		}
		if r.RefLabel != "" && (r.RefValue <= 0 || (r.Ratio <= 0 && !zeroOK[id])) {
			t.Errorf("row %s: reference %v, ratio %v", id, r.RefValue, r.Ratio)
		}
	}
	if len(byID) != len(rowIDs) {
		t.Errorf("%d rows, want %d", len(byID), len(rowIDs))
	}
	// Requests and round trips do not depend on the machine: the fence
	// beats the literal walk in round trips at every size.
	for _, n := range []string{"10", "1000", "1000000"} {
		if r := byID["fence."+n+".rounds"]; r.Ratio >= 1 {
			t.Errorf("fence of %s slots: %v rounds, the literal walk %v", n, r.Value, r.RefValue)
		}
	}

	var table bytes.Buffer
	res.writeTable(&table)
	lines := strings.Split(table.String(), "\n")
	if !strings.Contains(lines[0], "CPUs") || !strings.Contains(lines[0], res.Machine.Go) {
		t.Errorf("first line does not name the machine: %q", lines[0])
	}
	for _, r := range res.Rows {
		if !strings.Contains(table.String(), "| "+r.Figure+" | ") {
			t.Errorf("table lacks %q:\n%s", r.Figure, table.String())
		}
	}
}

func TestFlags(t *testing.T) {
	var out, log bytes.Buffer
	if err := run(t.Context(), []string{"-only", "nosuch"}, &out, &log); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("-only nosuch: %v", err)
	}
	if err := run(t.Context(), []string{"extra"}, &out, &log); err == nil {
		t.Error("an argument is refused")
	}
	for name, want := range map[string]bool{"appends-mem": true, "appends-s3": true, "fence": false} {
		if got := selected([]string{"appends"}, name); got != want {
			t.Errorf("selected(appends, %s) = %v", name, got)
		}
	}
	if !selected(nil, "fence") || !selected([]string{"fence"}, "fence") {
		t.Error("no -only selects everything; a name selects itself")
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 12: "12", 1234567: "1,234,567", 12.34: "12.3", 1.234: "1.23", 0.1234: "0.123", 123.4: "123", -4321: "-4,321"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}
