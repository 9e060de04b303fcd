//go:build cutline_planted

package planted

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Check is one of the checks that should catch planted variants: a
// scenario, a table of them, a run of simulator seeds. Run fails t when
// the check finds something wrong, exactly as it fails a test.
type Check struct {
	Name string
	// Catches lists the variants the check is run against (nil: all of
	// them); every check also runs with nothing planted, where it must
	// pass.
	Catches []Bug
	Run     func(t testing.TB)
}

// Outcome is what one check did under one variant.
type Outcome struct {
	Failed bool   // the check failed: it caught the variant
	Hung   bool   // the check did not end within its bound
	Msg    string // the first failure, on one line
	Took   time.Duration
}

// probe is a testing.TB that records failures instead of failing the test
// it runs in: FailNow and SkipNow end the check's goroutine, as they do in
// a test. Everything else (Helper, TempDir, Context, Name) is the real
// test's.
type probe struct {
	testing.TB
	mu       sync.Mutex
	step     string
	failed   bool
	msgs     []string
	cleanups []func()
}

func (p *probe) fail(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = true
	if msg != "" && p.step != "" {
		msg = p.step + ": " + msg
	}
	if msg != "" {
		p.msgs = append(p.msgs, msg)
	}
}

// Step names the part of a check that runs from now on (a scenario, a
// seed), so that a failure says where it happened. Outside Probe it does
// nothing.
func Step(t testing.TB, format string, args ...any) {
	if p, ok := t.(*probe); ok {
		p.mu.Lock()
		p.step = fmt.Sprintf(format, args...)
		p.mu.Unlock()
	}
}

func (p *probe) Fail()                     { p.fail("") }
func (p *probe) FailNow()                  { p.fail(""); runtime.Goexit() }
func (p *probe) Error(args ...any)         { p.fail(fmt.Sprint(args...)) }
func (p *probe) Errorf(f string, a ...any) { p.fail(fmt.Sprintf(f, a...)) }
func (p *probe) Fatal(args ...any)         { p.Error(args...); runtime.Goexit() }
func (p *probe) Fatalf(f string, a ...any) { p.Errorf(f, a...); runtime.Goexit() }
func (p *probe) Log(args ...any)           {}
func (p *probe) Logf(string, ...any)       {}
func (p *probe) Skip(args ...any)          { p.fail("skipped: " + fmt.Sprint(args...)); runtime.Goexit() }
func (p *probe) Skipf(f string, a ...any) {
	p.fail("skipped: " + fmt.Sprintf(f, a...))
	runtime.Goexit()
}
func (p *probe) SkipNow()      { p.fail("skipped"); runtime.Goexit() }
func (p *probe) Skipped() bool { return false }

func (p *probe) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

func (p *probe) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// Probe runs check under the variant planted now, in a goroutine of its
// own, and reports whether it failed. A check that does not end within
// bound is reported hung and left running: it must bound itself.
func Probe(t testing.TB, bound time.Duration, check func(testing.TB)) Outcome {
	p := &probe{TB: t}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			// Cleanups run last first, as a test's do, after the check
			// ended however it ended.
			p.mu.Lock()
			cs := p.cleanups
			p.cleanups = nil
			p.mu.Unlock()
			for i := len(cs) - 1; i >= 0; i-- {
				cs[i]()
			}
		}()
		defer func() {
			if r := recover(); r != nil {
				p.fail(fmt.Sprint("panic: ", r))
			}
		}()
		check(p)
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return Outcome{Hung: true, Msg: fmt.Sprintf("did not end within %v", bound), Took: time.Since(start)}
	}
	o := Outcome{Failed: p.Failed(), Took: time.Since(start)}
	if len(p.msgs) > 0 {
		o.Msg = oneLine(p.msgs[0])
	}
	return o
}

// oneLine squeezes a testify message onto one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, "Error Trace:"); i >= 0 {
		if j := strings.Index(s[i:], " Error: "); j >= 0 {
			s = s[:i] + s[i+j+1:] // the stack of files, not the failure
		}
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Hunt runs every check with nothing planted (each must pass, which shows
// the checks are sound), then plants each variant of bugs in turn and runs
// the checks that name it; a variant is caught when at least one of them
// fails. It logs one line per variant with the checks that caught it, and
// "caught N of M planted", and fails t unless every variant was caught
// and no check hung.
func Hunt(t *testing.T, bugs []Bug, checks []Check, bound time.Duration) {
	t.Helper()
	if Active() != None {
		t.Fatalf("variant %v is planted for the whole run (CUTLINE_PLANTED): the hunt plants each in turn", Active())
	}
	for _, c := range checks {
		o := Probe(t, bound, c.Run)
		if o.Failed || o.Hung {
			t.Errorf("check %s fails with nothing planted: %s", c.Name, o.Msg)
			continue
		}
		t.Logf("nothing planted: %s passes (%.1fs)", c.Name, o.Took.Seconds())
	}
	if t.Failed() {
		return
	}
	caught := 0
	for _, b := range bugs {
		restore := Set(b)
		var by []string
		var first string
		var took time.Duration
		for _, c := range checks {
			if c.Catches != nil && !lists(c.Catches, b) {
				continue
			}
			o := Probe(t, bound, c.Run)
			took += o.Took
			switch {
			case o.Hung:
				t.Errorf("planted %v: check %s hung (%s): checks must fail fast", b, c.Name, o.Msg)
			case o.Failed:
				by = append(by, c.Name)
				if first == "" {
					first = fmt.Sprintf("%s: %s", c.Name, o.Msg)
				}
			}
		}
		restore()
		if len(by) == 0 {
			t.Errorf("planted %v: not caught by any check", b)
			continue
		}
		caught++
		t.Logf("planted %v: caught by %s (%.1fs); %s", b, strings.Join(by, ", "), took.Seconds(), first)
	}
	t.Logf("caught %d of %d planted", caught, len(bugs))
}

func lists(bugs []Bug, b Bug) bool {
	for _, x := range bugs {
		if x == b {
			return true
		}
	}
	return false
}
