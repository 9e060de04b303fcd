package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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
		"pipeline.5ms", "pipeline.20ms", "pipeline.5ms.measured", "pipeline.20ms.measured",
		"latency.fixed20.p50", "latency.fixed20.p99", "latency.lognormal.p50", "latency.lognormal.p99",
		"allocs.ns", "allocs.allocs",
		"fence.10.rounds", "fence.10.requests", "fence.10.time",
		"fence.1000.rounds", "fence.1000.requests", "fence.1000.time",
		"fence.1000000.rounds", "fence.1000000.requests", "fence.1000000.time",
		"takeover.time", "takeover.requests", "roll.time", "roll.requests",
		"mint.latency",
		"heap.peak",
		"idle.writer", "idle.roller", "idle.star", "idle.star.keepalives", "idle.authority",
		"cost.append",
		"retention.objects", "retention.bytes", "retention.keys",
		"retention.month.bytes", "retention.month.objects", "retention.maintenance",
		"catchup.flights", "catchup.flights.gets", "catchup.segments", "catchup.segments.gets",
		"compact.rate", "compact.bytes",
	}
	zeroOK = map[string]bool{"heap.peak": true, "idle.writer": true, "idle.roller": true,
		"idle.star": true, "idle.star.keepalives": true, "idle.authority": true}
	// scaled are the sizes of the takeover-stream and takeover-history
	// figures in a quick run, beside their reference (the first).
	scaled = map[string][]int{"stream": quickConfig().streamSizes, "history": quickConfig().historySizes}
)

// quickRowIDs are the rows a quick run of every figure prints.
func quickRowIDs() []string {
	ids := slices.Clone(rowIDs)
	for _, what := range []string{"stream", "history"} {
		for _, n := range scaled[what] {
			for _, m := range []string{"time", "keys", "requests"} {
				ids = append(ids, fmt.Sprintf("takeover.%s.%d.%s", what, n, m))
			}
		}
	}
	if slices.Contains(figureNames(), "batch") {
		ids = append(ids, "batch.mem", "batch.fs", "batch.s3")
	}
	for _, n := range quickConfig().streamCounts {
		for _, c := range streamsColumns {
			ids = append(ids, fmt.Sprintf("streams.%d.%s", n, c.row))
		}
	}
	return ids
}

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
	want := quickRowIDs()
	for _, id := range want {
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
	if len(byID) != len(want) {
		t.Errorf("%d rows, want %d", len(byID), len(want))
	}
	// Requests and round trips do not depend on the machine: the fence
	// beats the literal walk in round trips at every size.
	for _, n := range []string{"10", "1000", "1000000"} {
		if r := byID["fence."+n+".rounds"]; r.Ratio >= 1 {
			t.Errorf("fence of %s slots: %v rounds, the literal walk %v", n, r.Value, r.RefValue)
		}
	}

	// A takeover reads as many metastore keys and makes as many object
	// requests whatever the stream's length and the star's history: each
	// size is beside the smallest, with its ratio.
	for what, sizes := range scaled {
		for i, n := range sizes {
			for _, m := range []string{"time", "keys", "requests"} {
				id := fmt.Sprintf("takeover.%s.%d.%s", what, n, m)
				r := byID[id]
				if i == 0 {
					if r.RefLabel != "" || !strings.Contains(r.Note, "reference size") {
						t.Errorf("row %s is the reference, yet has one: %+v", id, r)
					}
					continue
				}
				if r.RefLabel == "" || r.Ratio <= 0 {
					t.Errorf("row %s: no reference or ratio: %+v", id, r)
				}
				if m != "time" && r.Ratio > 1.2 {
					t.Errorf("row %s: %v %s, %v× the %d reference", id, r.Value, r.Unit, r.Ratio, sizes[0])
				}
			}
		}
	}
	// Each stream count is beside the first, but for the rate (beside the
	// rate offered) and the absorb backlog, which the star keeps within
	// AbsorbEvery + window whatever the machine.
	for i, n := range quickConfig().streamCounts {
		for _, c := range streamsColumns {
			id := fmt.Sprintf("streams.%d.%s", n, c.row)
			r := byID[id]
			switch {
			case c.row == "rate" || c.row == "backlog":
				if r.RefLabel == "" || r.RefValue <= 0 {
					t.Errorf("row %s: no reference: %+v", id, r)
				}
			case i == 0:
				if r.RefLabel != "" || !strings.Contains(r.Note, "reference count") {
					t.Errorf("row %s is the reference, yet has one: %+v", id, r)
				}
			case r.RefLabel == "" || r.Ratio <= 0:
				t.Errorf("row %s: no reference or ratio: %+v", id, r)
			}
		}
		if r := byID[fmt.Sprintf("streams.%d.backlog", n)]; r.Value > r.RefValue {
			t.Errorf("%d streams: an absorb backlog of %v flights, past AbsorbEvery + window (%v)", n, r.Value, r.RefValue)
		}
	}
	// The writer creates W to K copies of a flight (it skips a zone whose
	// turn comes after the slot was decided), and reads nothing.
	if r, n := byID["cost.append"], quickConfig().costAppends; r.Objects == nil || r.Objects.Creates < w*n || r.Objects.Creates > k*n+k || r.Objects.Reads != 0 {
		t.Errorf("cost.append: %+v, want W to K creates per append and no reads", r)
	}
	// A consumer of one stream reads a flight per record before
	// compaction and one segment range for the whole stream after; the
	// raw reads of the same bytes make as many requests.
	if before, after := byID["catchup.flights.gets"], byID["catchup.segments.gets"]; before.Value < 0.9 || after.Value*8 > 1 {
		t.Errorf("catch-up GETs per record: %v from flights, %v from segments", before.Value, after.Value)
	}
	if r := byID["retention.maintenance"]; r.Objects == nil || r.Objects.Reads == 0 || r.Objects.Creates == 0 || r.Objects.Deletes == 0 {
		t.Errorf("retention.maintenance: %+v, want reads, creates and deletes", r)
	}
	for _, id := range []string{"idle.writer", "idle.roller", "idle.star", "idle.authority"} {
		if r := byID[id]; r.Objects == nil || r.Objects.Total() != 0 {
			t.Errorf("%s: object requests while idle: %+v", id, r)
		}
	}

	// The cost model prices every line at both classes.
	if res.Cost == nil {
		t.Fatal("no cost model")
	}
	costLines := map[string]CostLine{}
	for _, l := range res.Cost.Lines {
		costLines[l.ID] = l
		if len(l.USD) != len(res.Cost.Classes) {
			t.Errorf("cost line %s: %d prices for %d classes", l.ID, len(l.USD), len(res.Cost.Classes))
		}
	}
	q := quickConfig()
	for _, id := range []string{"cost.append", "cost.append.measured", "cost.takeover", "cost.roll",
		fmt.Sprintf("cost.takeover.stream.%d", q.streamSizes[len(q.streamSizes)-1]),
		fmt.Sprintf("cost.takeover.history.%d", q.historySizes[len(q.historySizes)-1]),
		"cost.idle.writer", "cost.idle.roller", "cost.idle.star", "cost.idle.authority", "cost.retention.maintenance"} {
		l, ok := costLines[id]
		if !ok {
			t.Errorf("cost line %s missing", id)
			continue
		}
		if strings.HasPrefix(id, "cost.idle.") {
			continue // zero, as the idle rows
		}
		for i, usd := range l.USD {
			if usd <= 0 || l.Put <= 0 {
				t.Errorf("cost line %s: %v PUT-class requests, %v USD at %s", id, l.Put, usd, res.Cost.Classes[i].Name)
			}
		}
	}
	if l := costLines["cost.append"]; l.Put != k*1e6 {
		t.Errorf("a million appends: %v PUT-class requests, want K per append", l.Put)
	}
	if l := costLines["cost.append.measured"]; l.Put < w*1e6 || l.Put > k*1e6+k*1e3 {
		t.Errorf("a million appends as measured: %v PUT-class requests, want W to K per append", l.Put)
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
	for _, l := range res.Cost.Lines {
		if !strings.Contains(table.String(), "| "+l.What+" | ") {
			t.Errorf("cost table lacks %q:\n%s", l.What, table.String())
		}
	}
	if !strings.Contains(table.String(), "| streams | rec/s |") {
		t.Errorf("no table of the streams figure:\n%s", table.String())
	}
	if !strings.Contains(table.String(), "| object-store request cost |") || !strings.Contains(table.String(), "check the current") {
		t.Errorf("no cost table, or no word on its prices:\n%s", table.String())
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
