package testservers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cutline/cutline/internal/testlog"
)

// VersityGWBinary is the executable StartVersityGW looks for.
const VersityGWBinary = "versitygw"

// readyTimeout bounds how long a started server may take to accept
// connections.
const readyTimeout = 30 * time.Second

// S3Options configures StartVersityGW. The zero value works.
type S3Options struct {
	// Bucket is created at start. Default "cutline".
	Bucket string
	// AccessKey and SecretKey default to random values.
	AccessKey string
	SecretKey string
	// Region defaults to "us-east-1".
	Region string
}

// S3Server is a running versitygw process serving one posix root
// directory. Its fields describe how to reach it; they do not change across
// Stop and Restart.
type S3Server struct {
	Endpoint  string // "http://127.0.0.1:PORT"
	Region    string
	AccessKey string
	SecretKey string
	Bucket    string        // created at start
	Client    *awss3.Client // path-style, static credentials, SDK default retries
	Dir       string        // the posix root; each bucket is a subdirectory

	t         testing.TB
	bin       string
	addr      string
	transport *http.Transport

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	out     *testlog.Buffer
	buckets int
}

// FindVersityGW returns the path of the versitygw binary: on PATH, else in
// $(go env GOPATH)/bin, else in $HOME/go/bin.
func FindVersityGW() (string, error) {
	if p, err := exec.LookPath(VersityGWBinary); err == nil {
		return p, nil
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(d, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, VersityGWBinary)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH nor in %s", VersityGWBinary, strings.Join(dirs, ", "))
}

// Unavailable ends the test when a real server cannot be used: t.Fatal when
// CI=true, t.Skip otherwise.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: real backends are required)", msg)
	}
	t.Skipf("%s; run scripts/install-servers.sh to install the test servers", msg)
}

// StartVersityGW starts versitygw with a posix backend in a temporary
// directory, waits until it accepts connections, creates opts.Bucket and
// returns the server. The process is killed at the end of the test.
func StartVersityGW(t testing.TB, opts S3Options) *S3Server {
	t.Helper()
	bin, err := FindVersityGW()
	if err != nil {
		Unavailable(t, "S3 server: %v", err)
	}
	s := &S3Server{
		Region:    opts.Region,
		AccessKey: opts.AccessKey,
		SecretKey: opts.SecretKey,
		Bucket:    opts.Bucket,
		Dir:       t.TempDir(),
		t:         t,
		bin:       bin,
		out:       &testlog.Buffer{Limit: 1 << 20}, // the last MiB at most
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	if s.AccessKey == "" {
		s.AccessKey = "AK" + randomHex(8)
	}
	if s.SecretKey == "" {
		s.SecretKey = "SK" + randomHex(16)
	}
	if s.Bucket == "" {
		s.Bucket = "cutline"
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", s.out.String())
		}
	})

	// A free port can be taken by someone else between the probe and the
	// server's bind: try a few ports.
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
		t.Fatalf("starting versitygw: %v\noutput:\n%s", startErr, s.out.String())
	}
	s.Endpoint = "http://" + s.addr
	s.transport = http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(s.transport.CloseIdleConnections)
	s.Client = s.NewClient(nil)
	s.CreateBucket(t, s.Bucket)
	return s
}

// NewClient returns a path-style client for this server using hc, or the
// server's own HTTP transport when hc is nil (its idle connections are
// closed at cleanup). optFns adjust the options, e.g. the retry policy.
func (s *S3Server) NewClient(hc *http.Client, optFns ...func(*awss3.Options)) *awss3.Client {
	if hc == nil {
		hc = &http.Client{Transport: s.transport}
	}
	return awss3.New(awss3.Options{
		Region:                     s.Region,
		BaseEndpoint:               aws.String(s.Endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:                 hc,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}, optFns...)
}

// CreateBucket creates a bucket on the server, failing the test on error.
func (s *S3Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("creating bucket %q on versitygw: %v", name, err)
	}
}

// NewBucketName creates a fresh bucket with a unique name and returns the
// name. Useful for a conformance suite that wants an empty bucket per test.
func (s *S3Server) NewBucketName(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	s.buckets++
	name := "b" + strconv.Itoa(s.buckets) + "-" + randomHex(4)
	s.mu.Unlock()
	s.CreateBucket(t, name)
	return name
}

// Output returns what the server printed so far.
func (s *S3Server) Output() string { return s.out.String() }

// Stop kills the server process and waits for it to exit, like a zone
// going down. It is a no-op when the server is not running.
func (s *S3Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// Restart starts the server again on the same address and directory,
// after Stop. Objects written before the stop are still there.
func (s *S3Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("restarting versitygw on %s: %v\noutput:\n%s", s.addr, err, s.out.String())
	}
}

// start runs the process and waits until it accepts connections.
func (s *S3Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin,
		"--port", s.addr,
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--region", s.Region,
		"--keep-alive",
		"--quiet",
		"posix", s.Dir)
	cmd.Env = serverEnv()
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
	if err := waitListening("versitygw", s.addr, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// waitListening polls addr until it accepts a TCP connection, the process
// (the server called name) exits, or readyTimeout passes. Polling is how
// one waits for another process to bind a port; the number of attempts is
// bounded.
func waitListening(name, addr string, exited <-chan struct{}) error {
	const interval = 20 * time.Millisecond
	for range int(readyTimeout / interval) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited before accepting connections", name)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, interval)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before accepting connections", name)
		case <-time.After(interval):
		}
	}
	return fmt.Errorf("%s did not accept connections on %s within %v", name, addr, readyTimeout)
}

// serverEnv is the environment without variables that would reconfigure
// versitygw behind the flags' back.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VGW_") || strings.HasPrefix(kv, "ROOT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// splitAddr splits "host:port".
func splitAddr(addr string) (host, port string, err error) {
	return net.SplitHostPort(addr)
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
