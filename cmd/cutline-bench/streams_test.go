package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/cutline/cutline"
)

// TestStreamsFlags: the streams figure's flags set the run's sizes and
// say so in its mode; a bad one is refused, naming the flag, before
// anything runs.
func TestStreamsFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-streams-rate", "-1"},
		{"-streams-load", "-1s"},
		{"-streams-counts", "10,x"},
		{"-streams-counts", "0"},
	} {
		var out, log bytes.Buffer
		err := run(t.Context(), append(args, "-only", "streams"), &out, &log)
		if !errors.Is(err, cutline.ErrInvalid) || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%q: %v", args, err)
		}
	}
	var out, log bytes.Buffer
	if err := run(t.Context(), []string{"-only", "streams", "-streams-rate", "1", "-streams-load", "1ms"}, &out, &log); err == nil || !strings.Contains(err.Error(), "less than one record") {
		t.Errorf("a load of less than one record: %v", err)
	}

	fs, cfg, mode := flag.NewFlagSet("cutline-bench", flag.ContinueOnError), fullConfig(), "full"
	apply := streamsFlags(fs)
	if err := fs.Parse([]string{"-streams-rate", "20000", "-streams-load", "1m", "-streams-counts", "1000, 10"}); err != nil {
		t.Fatal(err)
	}
	if err := apply(&cfg, &mode); err != nil {
		t.Fatal(err)
	}
	if cfg.streamsRate != 20_000 || cfg.streamsLoad.Minutes() != 1 || len(cfg.streamCounts) != 2 || cfg.streamCounts[0] != 1000 || cfg.streamCounts[1] != 10 {
		t.Errorf("flags not applied: rate %v, load %v, counts %v", cfg.streamsRate, cfg.streamsLoad, cfg.streamCounts)
	}
	if want := "full, -streams-counts 1000, 10 -streams-load 1m0s -streams-rate 20000"; mode != want {
		t.Errorf("mode %q, want %q", mode, want)
	}
}

// TestStreamsTable: the compact table has a line per stream count, the
// last count's ratios to the first, and a legend; without the figure's
// rows it is not printed.
func TestStreamsTable(t *testing.T) {
	var rows []Row
	for _, n := range []string{"10", "1000"} {
		for i, c := range streamsColumns {
			r := Row{ID: "streams." + n + "." + c.row, Value: float64(i + 1)}
			if n == "1000" {
				r = r.ref("same at 10 streams", float64(i+1)/2, "")
			}
			if c.row == "backlog" {
				r = r.ref("AbsorbEvery + window", 128, "flights")
			}
			rows = append(rows, r)
		}
	}
	var b bytes.Buffer
	writeStreamsTable(&b, rows)
	for _, want := range []string{
		"| streams | rec/s | txn/rec |",
		"| 10 | 1 | 2 | 3 | 4 | 5 | 6 | 7/128 | 8 ms | 9 | 10 ms | 11 |",
		"| 1,000 | 1 | 2 |",
		"1,000 ÷ 10 streams: txn/rec ×2, read/rec ×2, key/rec ×2",
		"- backlog:",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("streams table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	writeStreamsTable(&b, []Row{{ID: "fence.10.rounds"}})
	if b.Len() != 0 {
		t.Errorf("a streams table without the figure:\n%s", b.String())
	}
}
