//go:build unix

package brokerproc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bounds of the waits on processes.
const (
	buildTimeout = 5 * time.Minute
	readyTimeout = 30 * time.Second
	pollEvery    = 20 * time.Millisecond
)

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// proc is one process of the cluster: its command line, the file its
// output goes to (across restarts), and the running command.
type proc struct {
	t    testing.TB
	name string
	bin  string
	args []string
	env  []string
	out  string // the output file

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// newProc describes a process; start runs it. Its output is printed when
// the test fails (or always, with BROKERPROC_LOGS set; when that names a
// directory, the output is copied there instead), and it is killed when
// the test ends.
func newProc(t testing.TB, dir, name, bin string, env []string, args ...string) *proc {
	p := &proc{t: t, name: name, bin: bin, args: args, env: env, out: filepath.Join(dir, name+".log")}
	t.Cleanup(func() {
		p.kill()
		if keep := os.Getenv("BROKERPROC_LOGS"); keep != "" {
			if st, err := os.Stat(keep); err == nil && st.IsDir() {
				if b, err := os.ReadFile(p.out); err == nil {
					_ = os.WriteFile(filepath.Join(keep, p.name+".log"), b, 0o600)
				}
				return
			}
		}
		if t.Failed() || os.Getenv("BROKERPROC_LOGS") != "" {
			t.Logf("=== %s output (%s):\n%s", p.name, p.out, tail(p.out, 256<<10))
		}
	})
	return p
}

// start runs the process; its output is appended to its file.
func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Nil(p.t, p.cmd, "%s runs already", p.name)
	f, err := os.OpenFile(p.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(p.t, err)
	fmt.Fprintf(f, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	if err != nil {
		_ = f.Close()
		require.NoError(p.t, err, "start %s", p.name)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
}

// signal sends sig to the running process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NotNil(p.t, p.cmd, "%s does not run", p.name)
	require.NoError(p.t, p.cmd.Process.Signal(sig), "%s: %v", p.name, sig)
}

// kill kills the process (kill -9, which also ends a stopped one) and
// waits for it; a no-op when it does not run.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

// gone reports whether the process exited, and how.
func (p *proc) gone() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return true, "not started"
	}
	select {
	case <-p.exited:
		return true, p.cmd.ProcessState.String()
	default:
		return false, ""
	}
}

// waitReady polls ready until it is true, failing the test when the
// process exits first or readyTimeout passes.
func (p *proc) waitReady(ctx context.Context, what string, ready func(context.Context) bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return
		}
		if gone, how := p.gone(); gone {
			p.t.Fatalf("%s exited before %s (%s); output:\n%s", p.name, what, how, tail(p.out, 64<<10))
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("%s: not %s within %v; output:\n%s", p.name, what, readyTimeout, tail(p.out, 64<<10))
		case <-tick.C:
		}
	}
}

// listening reports whether addr accepts TCP connections.
func listening(ctx context.Context, addr string) bool {
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// tail returns the last max bytes of a file.
func tail(file string, max int64) string {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if int64(len(raw)) > max {
		raw = raw[int64(len(raw))-max:]
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			raw = raw[i+1:]
		}
		return "...\n" + string(raw)
	}
	return string(raw)
}

// raceReports returns the data race reports in a process's output.
func raceReports(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if i := bytes.Index(raw, []byte("WARNING: DATA RACE")); i >= 0 {
		end := min(len(raw), i+8<<10)
		return errors.New(string(raw[i:end]))
	}
	return nil
}

// processEnv is the test's environment without the broker's variables,
// which would configure it behind the flags' back, plus extra.
func processEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CUTLINE_") || strings.HasPrefix(kv, "GORACE=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
