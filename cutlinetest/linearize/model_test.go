package linearize_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cutline/cutline/cutlinetest/linearize"
)

// script builds a history step by step, one logical tick per call or
// return, so that a test states exactly what overlapped what.
type script struct {
	h       linearize.History
	appends map[string]*linearize.PendingAppend
	reads   map[string]*linearize.PendingRead
}

func newScript() *script {
	return &script{appends: map[string]*linearize.PendingAppend{}, reads: map[string]*linearize.PendingRead{}}
}

// call starts an append of v at offset off by client c.
func (s *script) call(c int, v string, off uint64) *script {
	s.appends[v] = s.h.Append(c, v, off)
	return s
}

func (s *script) acked(v string) *script { s.appends[v].Acked(); return s }
func (s *script) unknown(v string) *script {
	s.appends[v].Unknown(errors.New("lost"))
	return s
}
func (s *script) absent(v string) *script {
	s.appends[v].Absent(errors.New("refused"))
	return s
}

// read starts a read named name by client c.
func (s *script) read(c int, name string) *script {
	s.reads[name] = s.h.Read(c)
	return s
}

// saw ends read name with the log given as space-separated values.
func (s *script) saw(name, log string) *script {
	s.reads[name].Done(strings.Fields(log))
	return s
}

func (s *script) verdict() porcupine.CheckResult {
	return linearize.Check(&s.h, 10*time.Second).Verdict
}

// TestModel runs the model on small histories, legal and planted ones: the
// checker must find every planted one illegal.
func TestModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *script
		want porcupine.CheckResult
	}{
		{"sequential appends and a read", newScript().
			call(0, "a", 0).acked("a").call(0, "b", 1).acked("b").
			read(1, "r").saw("r", "a b"), porcupine.Ok},
		{"a read concurrent with an append may miss it", newScript().
			call(0, "a", 0).read(1, "r").acked("a").saw("r", ""), porcupine.Ok},
		{"a read concurrent with an append may see it", newScript().
			call(0, "a", 0).read(1, "r").saw("r", "a").acked("a"), porcupine.Ok},
		{"concurrent appends linearize in offset order", newScript().
			call(0, "a", 0).call(1, "b", 1).acked("b").acked("a").
			read(2, "r").saw("r", "a b"), porcupine.Ok},
		{"an unknown append that never took effect", newScript().
			call(0, "a", 0).unknown("a").call(1, "b", 0).acked("b").
			read(2, "r").saw("r", "b"), porcupine.Ok},
		{"an unknown append that took effect", newScript().
			call(0, "a", 0).unknown("a").call(1, "b", 1).acked("b").
			read(2, "r").saw("r", "a b"), porcupine.Ok},
		{"an unknown append seen late", newScript().
			call(0, "a", 0).unknown("a").read(1, "r1").saw("r1", "").
			read(1, "r2").saw("r2", "a"), porcupine.Ok},
		{"an absent append is a no-op", newScript().
			call(0, "a", 0).absent("a").call(1, "b", 0).acked("b").
			read(2, "r").saw("r", "b"), porcupine.Ok},

		// Planted: none of these has a linearization.
		{"planted: a read misses an acknowledged append", newScript().
			call(0, "a", 0).acked("a").call(0, "b", 1).acked("b").
			read(1, "r").saw("r", "a"), porcupine.Illegal},
		{"planted: two appends acknowledged at one offset", newScript().
			call(0, "a", 0).acked("a").call(1, "b", 0).acked("b"), porcupine.Illegal},
		{"planted: a read sees an absent append", newScript().
			call(0, "a", 0).absent("a").read(1, "r").saw("r", "a"), porcupine.Illegal},
		{"planted: a value at another offset than its host gave it", newScript().
			call(0, "a", 1).acked("a").read(1, "r").saw("r", "a"), porcupine.Illegal},
		{"planted: a value read twice", newScript().
			call(0, "a", 0).acked("a").read(1, "r").saw("r", "a a"), porcupine.Illegal},
		{"planted: reads go back (an unknown append seen, then gone)", newScript().
			call(0, "a", 0).unknown("a").read(1, "r1").saw("r1", "a").
			read(1, "r2").saw("r2", ""), porcupine.Illegal},
		{"planted: acknowledged in the wrong order", newScript().
			call(0, "b", 1).acked("b").read(1, "r").saw("r", "").
			call(0, "a", 0).acked("a"), porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.verdict(); got != tc.want {
				t.Fatalf("verdict %s, want %s", got, tc.want)
			}
		})
	}
}

// fakeT records what Require does to a test.
type fakeT struct {
	testing.TB
	name   string
	failed string
	logs   []string
}

func (f *fakeT) Helper()                        {}
func (f *fakeT) Name() string                   { return f.name }
func (f *fakeT) Logf(format string, a ...any)   { f.logs = append(f.logs, fmt.Sprintf(format, a...)) }
func (f *fakeT) Fatalf(format string, a ...any) { f.failed = fmt.Sprintf(format, a...) }

// TestRequireFails: Require fails a test on an Illegal history, and on a
// check that ran out of time (porcupine.Unknown), writing porcupine's
// visualization of the history.
func TestRequireFails(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(linearize.VisualizeEnv, dir)

	illegal := newScript().call(0, "a", 0).acked("a").read(1, "r").saw("r", "")
	ft := &fakeT{name: "TestRequireFails/illegal"}
	r := linearize.Require(ft, &illegal.h, time.Minute)
	if r.Verdict != porcupine.Illegal || !strings.Contains(ft.failed, "Illegal") {
		t.Fatalf("verdict %s, failure %q", r.Verdict, ft.failed)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "linearize-*.html"))
	if len(files) != 1 {
		t.Fatalf("visualizations written: %v", files)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Size() == 0 {
		t.Fatalf("visualization %s: %v", files[0], err)
	}

	// A history whose check is exponential: 24 appends of unknown
	// outcome, all concurrent, and a read of a value nobody appended. To
	// call it Illegal the checker must try every subset of the appends;
	// in a millisecond it cannot, and Unknown fails.
	hard := newScript()
	for i := range 24 {
		v := fmt.Sprint("v", i)
		hard.call(i, v, uint64(i))
	}
	for i := range 24 {
		hard.unknown(fmt.Sprint("v", i))
	}
	hard.read(24, "r").saw("r", "x")
	ft = &fakeT{name: "TestRequireFails/timeout"}
	r = linearize.Require(ft, &hard.h, time.Millisecond)
	if r.Verdict != porcupine.Unknown || !strings.Contains(ft.failed, "Unknown") {
		t.Fatalf("verdict %s, failure %q", r.Verdict, ft.failed)
	}
}

// TestStats counts outcomes; an append that never returned is checked as
// unknown, and a failed read is left out.
func TestStats(t *testing.T) {
	s := newScript().call(0, "a", 0).acked("a").call(1, "b", 1).unknown("b").
		call(2, "c", 1).absent("c").call(3, "d", 1)
	s.read(4, "r").saw("r", "a")
	s.h.Read(5).Failed(errors.New("zone down"))
	got := s.h.Stats()
	want := linearize.Stats{Ops: 5, Acked: 1, Unknown: 1, Absent: 1, Pending: 1, Reads: 1, FailedReads: 1, Clients: 6, Longest: 1}
	if got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if v := s.verdict(); v != porcupine.Ok {
		t.Fatalf("verdict %s", v)
	}
}
