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
	retains map[string]*linearize.PendingRetain
}

func newScript() *script {
	return &script{appends: map[string]*linearize.PendingAppend{}, reads: map[string]*linearize.PendingRead{},
		retains: map[string]*linearize.PendingRetain{}}
}

// readFrom starts a read from offset off named name by client c.
func (s *script) readFrom(c int, name string, off uint64) *script {
	s.reads[name] = s.h.ReadFrom(c, off)
	return s
}

// admitted records that read name passed the retention check.
func (s *script) admitted(name string) *script { s.reads[name].Admitted(); return s }

// trimmed ends read name with a trimmed answer naming start.
func (s *script) trimmed(name string, start uint64) *script {
	s.reads[name].Trimmed(start)
	return s
}

// retain starts a retain named name by client c up to offset off.
func (s *script) retain(c int, name string, off uint64) *script {
	s.retains[name] = s.h.Retain(c, off)
	return s
}

func (s *script) retained(name string) *script { s.retains[name].Acked(); return s }
func (s *script) retainLost(name string) *script {
	s.retains[name].Unknown(errors.New("lost"))
	return s
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

// ab is a history where a and b were appended at offsets 0 and 1.
func ab() *script {
	return newScript().call(0, "a", 0).acked("a").call(0, "b", 1).acked("b")
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

		{"a read below the retention point is answered trimmed", ab().
			retain(2, "p", 1).retained("p").
			readFrom(1, "r", 0).trimmed("r", 1), porcupine.Ok},
		{"a read from the retention point sees the rest", ab().
			retain(2, "p", 1).retained("p").
			readFrom(1, "r", 1).admitted("r").saw("r", "b"), porcupine.Ok},
		{"a read concurrent with a retain may pass the old point", ab().
			readFrom(1, "r", 0).retain(2, "p", 1).admitted("r").retained("p").saw("r", "a b"), porcupine.Ok},
		{"a read admitted before a retain ends after it", ab().
			readFrom(1, "r", 0).admitted("r").retain(2, "p", 2).retained("p").
			call(0, "c", 2).acked("c").saw("r", "a b c"), porcupine.Ok},
		{"a read concurrent with a retain may be answered trimmed", ab().
			retain(2, "p", 1).readFrom(1, "r", 0).trimmed("r", 1).retained("p"), porcupine.Ok},
		{"a retain of unknown outcome seen by a trimmed answer", ab().
			retain(2, "p", 2).retainLost("p").readFrom(1, "r", 1).trimmed("r", 2), porcupine.Ok},
		{"a retain of unknown outcome that never took effect", ab().
			retain(2, "p", 2).retainLost("p").readFrom(1, "r", 0).admitted("r").saw("r", "a b"), porcupine.Ok},
		{"the retention point never moves down", ab().
			retain(2, "p", 2).retained("p").retain(2, "q", 1).retained("q").
			readFrom(1, "r", 1).trimmed("r", 2), porcupine.Ok},
		{"an empty read at the end of the log", ab().
			readFrom(1, "r", 2).admitted("r").saw("r", ""), porcupine.Ok},

		// Planted: none of these has a linearization.
		{"planted: a trimmed answer at the retention point", ab().
			retain(2, "p", 1).retained("p").readFrom(1, "r", 1).trimmed("r", 1), porcupine.Illegal},
		{"planted: a trimmed answer with no retention point", ab().
			readFrom(1, "r", 0).trimmed("r", 0), porcupine.Illegal},
		{"planted: a trimmed answer naming another point", ab().
			retain(2, "p", 1).retained("p").readFrom(1, "r", 0).trimmed("r", 2), porcupine.Illegal},
		{"planted: a read admitted below the retention point", ab().
			retain(2, "p", 1).retained("p").readFrom(1, "r", 0).admitted("r").saw("r", "a b"), porcupine.Illegal},
		{"planted: the retention point moved down", ab().
			retain(2, "p", 2).retained("p").retain(2, "q", 1).retained("q").
			readFrom(1, "r", 1).admitted("r").saw("r", "b"), porcupine.Illegal},
		{"planted: a retention point past the end of the log", ab().
			retain(2, "p", 3).retained("p"), porcupine.Illegal},
		{"planted: a read from the point misses a value", ab().
			retain(2, "p", 1).retained("p").readFrom(1, "r", 1).admitted("r").saw("r", ""), porcupine.Illegal},
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
