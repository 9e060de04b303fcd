package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// scope lends the test-server helpers (internal/testservers) and the
// embedded etcd (startEtcd) the part of testing.TB they use, outside a test: cleanups run
// when the figure that opened the scope ends, temporary directories are
// removed, and Fatal or Skip ends the figure (a panic that runFigure
// recovers), not the program. Methods it does not define are those of a nil
// testing.TB and must not be called.
type scope struct {
	testing.TB

	name string
	log  io.Writer
	ctx  context.Context

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// abort ends a figure: a Fatal (skip false) or a Skip.
type abort struct {
	skip bool
	msg  string
}

func newScope(ctx context.Context, name string, log io.Writer) *scope {
	return &scope{name: name, log: log, ctx: ctx}
}

func (s *scope) Helper()                  {}
func (s *scope) Name() string             { return s.name }
func (s *scope) Context() context.Context { return s.ctx }

func (s *scope) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *scope) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *scope) fail() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

func (s *scope) Log(args ...any)                 { fmt.Fprintln(s.log, args...) }
func (s *scope) Logf(format string, args ...any) { fmt.Fprintf(s.log, format+"\n", args...) }
func (s *scope) Error(args ...any)               { s.fail(); s.Log(args...) }
func (s *scope) Errorf(format string, args ...any) {
	s.fail()
	s.Logf(format, args...)
}
func (s *scope) Fail()    { s.fail() }
func (s *scope) FailNow() { s.fail(); panic(abort{msg: "failed"}) }
func (s *scope) Fatal(args ...any) {
	s.fail()
	panic(abort{msg: fmt.Sprint(args...)})
}
func (s *scope) Fatalf(format string, args ...any) {
	s.fail()
	panic(abort{msg: fmt.Sprintf(format, args...)})
}
func (s *scope) Skip(args ...any) { panic(abort{skip: true, msg: fmt.Sprint(args...)}) }
func (s *scope) Skipf(format string, args ...any) {
	panic(abort{skip: true, msg: fmt.Sprintf(format, args...)})
}
func (s *scope) SkipNow()      { panic(abort{skip: true, msg: "skipped"}) }
func (s *scope) Skipped() bool { return false }

// TempDir returns a fresh directory, removed when the scope closes.
func (s *scope) TempDir() string {
	dir, err := os.MkdirTemp("", "cutline-bench-")
	if err != nil {
		s.Fatalf("temporary directory: %v", err)
	}
	s.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// close runs the cleanups, last registered first.
func (s *scope) close() {
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
}
