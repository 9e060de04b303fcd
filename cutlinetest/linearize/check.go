package linearize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// DefaultTimeout bounds one check when Check is given none. A check that
// runs out of time is porcupine.Unknown, which Require fails.
const DefaultTimeout = time.Minute

// Result is a checked history.
type Result struct {
	// Verdict is porcupine's: Ok, Illegal (no linearization exists), or
	// Unknown (the check ran out of time).
	Verdict porcupine.CheckResult
	Stats
	// Elapsed is how long the check took.
	Elapsed time.Duration
	// Info is porcupine's account of the check: the longest linearizable
	// prefixes, for porcupine.Visualize.
	Info porcupine.LinearizationInfo
}

func (r Result) String() string {
	retained := ""
	if r.Retains > 0 || r.Trimmed > 0 {
		retained = fmt.Sprintf("; %d retains, up to %d; %d reads answered trimmed, %d admitted", r.Retains, r.Start, r.Trimmed, r.Admits)
	}
	return fmt.Sprintf("%s: %d operations (%d appends acked, %d unknown, %d absent, %d pending; %d reads, longest %d; %d failed reads left out%s) from %d clients, checked in %v",
		r.Verdict, r.Ops, r.Acked, r.Unknown, r.Absent, r.Pending, r.Reads, r.Longest, r.FailedReads, retained, r.Clients, r.Elapsed.Round(time.Millisecond))
}

// Check checks h against Model with porcupine, within timeout
// (DefaultTimeout when 0).
func Check(h *History, timeout time.Duration) Result {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ops := h.Operations()
	start := time.Now()
	// The verbose check waits for all of its workers, also after a
	// timeout: nothing of it runs on after Check returns.
	verdict, info := porcupine.CheckOperationsVerbose(Model(), ops, timeout)
	return Result{Verdict: verdict, Stats: h.Stats(), Elapsed: time.Since(start), Info: info}
}

// VisualizeEnv names the directory where Require writes porcupine's
// visualization of a history that is not Ok (an HTML file). Unset, it is
// written under os.TempDir.
const VisualizeEnv = "CUTLINE_LINEARIZE_VIZ"

// Require checks h and fails t unless the verdict is Ok: an Illegal
// history and a check that ran out of time (Unknown) both fail. It logs
// the result, and for a history that is not Ok writes porcupine's
// visualization and names the file.
func Require(t testing.TB, h *History, timeout time.Duration) Result {
	t.Helper()
	r := Check(h, timeout)
	t.Logf("linearizability: %v", r)
	if r.Verdict == porcupine.Ok {
		return r
	}
	where := "(not written)"
	if path, err := Visualize(r, t.Name()); err == nil {
		where = path
	} else {
		t.Logf("linearizability: visualization: %v", err)
	}
	t.Fatalf("linearizability: the history is %s (%d operations); porcupine's visualization: %s", r.Verdict, r.Ops, where)
	return r
}

// Visualize writes porcupine's visualization of a checked history to an
// HTML file named after name, under $CUTLINE_LINEARIZE_VIZ or os.TempDir,
// and returns its path.
func Visualize(r Result, name string) (string, error) {
	dir := os.Getenv(VisualizeEnv)
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "linearize-"+strings.NewReplacer("/", "_", " ", "_").Replace(name)+"-*.html")
	if err != nil {
		return "", err
	}
	path := f.Name()
	if err := porcupine.Visualize(Model(), r.Info, f); err != nil {
		_ = f.Close()
		return "", err
	}
	return filepath.Clean(path), f.Close()
}
