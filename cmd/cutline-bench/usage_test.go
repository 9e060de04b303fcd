package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// -h is not an error; a bad flag is a usage error named alone, not
// followed by the whole usage.
func TestUsageExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"-h"}, &out, &errb)
	if !errors.Is(err, flag.ErrHelp) || exitCode(err, &errb) != 0 {
		t.Errorf("-h: %v, exit %d; want flag.ErrHelp, exit 0", err, exitCode(err, &errb))
	}
	if !strings.Contains(errb.String(), "usage: cutline-bench") {
		t.Errorf("-h prints no usage: %q", errb.String())
	}

	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-only", "nothing"}} {
		errb.Reset()
		err = run(t.Context(), args, &out, &errb)
		if code := exitCode(err, &errb); code != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, code, err)
		}
		if strings.Contains(errb.String(), "usage:") || !strings.Contains(errb.String(), "-h lists the flags") {
			t.Errorf("%v: want the error alone and a pointer to -h, got %q", args, errb.String())
		}
	}
}

// The table's rows name their notes by number, with the notes below, and
// the first line names the figures that were skipped.
func TestTableNarrowAndSkippedNamed(t *testing.T) {
	long := strings.Repeat("a long explanation of the figure ", 10)
	res := &Result{Mode: "quick",
		Rows:     []Row{{Figure: "appends-mem", Value: 1000, Unit: "appends/s", Note: long}},
		Failures: []Failure{{Figure: "appends-s3", Skipped: true, Error: "versitygw not found"}},
	}
	var b bytes.Buffer
	res.writeTable(&b)
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "skipped: appends-s3") {
		t.Errorf("the first line does not name the skipped figure: %q", lines[0])
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "| ") && len(l) >= 120 {
			t.Errorf("a table row wider than a terminal: %q", l)
		}
	}
	for _, want := range []string{"[1] " + long, "[2] versitygw not found"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no note %q:\n%s", want, b.String())
		}
	}
}
