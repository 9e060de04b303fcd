package testservers

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cutline/cutline/internal/testlog"
)

// AzuriteVersion is the Azurite release scripts/install-servers.sh
// installs, and the one FindAzurite looks for.
const AzuriteVersion = "3.37.0"

// AzuriteBinary is the executable of Azurite's Blob service.
const AzuriteBinary = "azurite-blob"

// AzureOptions configures StartAzurite. The zero value works.
type AzureOptions struct {
	// Account is the storage account the server serves. Default
	// "cutline".
	Account string
	// Key is the account's shared key, base64. Default: a random one.
	Key string
}

// AzureServer is a running Azurite Blob service process with one storage
// account, keeping its blobs in one directory. Its fields describe how to
// reach it; they do not change across Stop and Restart. It has no
// container: create them with the client of the package under test.
type AzureServer struct {
	Endpoint string // the account's service URL: "http://127.0.0.1:PORT/<account>"
	Account  string
	Key      string // the shared key, base64: a credential, never logged
	Dir      string // Azurite's workspace (its blobs and metadata)

	t    testing.TB
	bin  string
	addr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    *testlog.Buffer
}

// FindAzurite returns the path of the azurite-blob executable: in the
// cache directory where scripts/install-servers.sh puts it
// (<user cache dir>/cutline/azurite-<AzuriteVersion>), else on PATH.
func FindAzurite() (string, error) {
	var tried []string
	if dir, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(dir, "cutline", "azurite-"+AzuriteVersion, "node_modules", ".bin", AzuriteBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath(AzuriteBinary); err == nil {
		return p, nil
	}
	tried = append(tried, "PATH")
	return "", fmt.Errorf("%s not found in %v", AzuriteBinary, tried)
}

// StartAzurite starts Azurite's Blob service on 127.0.0.1 and a free port
// with its workspace in a temporary directory, serving one account, and
// waits until it accepts connections. The process is killed at the end of
// the test. Without the executable the test is skipped, or fails with
// CI=true (see Unavailable).
func StartAzurite(t testing.TB, opts AzureOptions) *AzureServer {
	t.Helper()
	bin, err := FindAzurite()
	if err != nil {
		Unavailable(t, "Azure Blob emulator: %v", err)
	}
	s := &AzureServer{
		Account: opts.Account,
		Key:     opts.Key,
		Dir:     t.TempDir(),
		t:       t,
		bin:     bin,
		out:     &testlog.Buffer{Limit: 1 << 20},
	}
	if s.Account == "" {
		s.Account = "cutline"
	}
	if s.Key == "" {
		var k [64]byte
		_, _ = rand.Read(k[:])
		s.Key = base64.StdEncoding.EncodeToString(k[:])
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("azurite output:\n%s", s.out.String())
		}
	})
	var startErr error
	for range 3 {
		s.addr, startErr = freeAddr()
		if startErr != nil {
			continue
		}
		if startErr = s.start(); startErr == nil {
			break
		}
	}
	if startErr != nil {
		t.Fatalf("starting azurite: %v\noutput:\n%s", startErr, s.out.String())
	}
	s.Endpoint = "http://" + s.addr + "/" + s.Account
	return s
}

// Stop kills the server process and waits for it to exit, like a zone
// going down. It is a no-op when the server is not running.
func (s *AzureServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts the server again on the same address and workspace,
// after Stop. Azurite saves its metadata every few seconds: blobs written
// shortly before a kill may be gone, as from a zone that lost its disk.
func (s *AzureServer) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("restarting azurite on %s: %v\noutput:\n%s", s.addr, err, s.out.String())
	}
}

// Output returns what the server printed so far.
func (s *AzureServer) Output() string { return s.out.String() }

func (s *AzureServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	host, port, err := splitAddr(s.addr)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin,
		"--blobHost", host,
		"--blobPort", port,
		"--location", s.Dir,
		"--silent",
		"--disableTelemetry",
		// The client speaks a newer service version than the emulator
		// announces; the operations cutline uses are the same.
		"--skipApiVersionCheck",
		// Path-style URLs only: the account is the first path segment.
		"--disableProductStyleUrl")
	// The account and its key reach the process through its environment,
	// never its command line, which other users of the machine can read.
	cmd.Env = append(azuriteEnv(), "AZURITE_ACCOUNTS="+s.Account+":"+s.Key)
	cmd.SysProcAttr = procAttr()
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := waitListening("azurite", s.addr, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// azuriteEnv is the environment without variables that would
// reconfigure Azurite behind the flags' back.
func azuriteEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) >= 8 && kv[:8] == "AZURITE_" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
