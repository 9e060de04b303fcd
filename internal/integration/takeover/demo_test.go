package takeover_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/testservers"
)

const demoPackage = "github.com/cutline/cutline/examples/takeover"

// repoRoot is the core module's directory: three levels up from this
// package, checked by its go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(mod), "module github.com/cutline/cutline\n", "%s is not the core module", root)
	return root
}

// goTool finds the go command that builds the demonstration: go test puts
// its own GOROOT/bin first on the test's PATH.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the demonstration")
	return p
}

// buildDemo builds the examples/takeover command into a temporary
// directory, with the race detector when this test runs with it.
func buildDemo(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "takeover")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, demoPackage)
	cmd := exec.CommandContext(ctx, goTool(t), args...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return bin
}

var (
	verdictRE = regexp.MustCompile(`(?m)^acknowledged (\d+), readable (\d+), lost 0, duplicated 0$`)
	runIDRE   = regexp.MustCompile(`(?m)^cutline takeover demonstration \((run-[0-9a-f]+)\)$`)
)

// TestDemoOnEtcdAndS3 builds the takeover demonstration and runs it as its
// own process against the embedded etcd and three versitygw zones, through
// the flags a user gives: it must exit 0 with nothing lost or duplicated,
// keep its metadata in etcd, and never print the secret key.
func TestDemoOnEtcdAndS3(t *testing.T) {
	bin := buildDemo(t)
	cluster := etcdtest.StartCluster(t, 1)
	access, secret := "demo-"+randomID(), "secret-"+randomID()+randomID()
	var endpoints, buckets []string
	for i := range zonesK {
		srv := testservers.StartVersityGW(t, testservers.S3Options{Bucket: "demo-" + zoneName(i), AccessKey: access, SecretKey: secret})
		endpoints = append(endpoints, srv.Endpoint)
		buckets = append(buckets, srv.Bucket)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"-etcd", cluster.Endpoints()[0],
		"-s3-endpoint", strings.Join(endpoints, ","),
		"-s3-buckets", strings.Join(buckets, ","),
		"-s3-access-key", access, "-s3-secret-key", secret,
		"-records", "160", "-crash-after", "100", "-inflight", "20",
		"-timeout", "2m")
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("the demonstration exited with %d\nstdout:\n%s\nstderr:\n%s", exit.ExitCode(), out, stderr.String())
	}
	require.NoError(t, err)
	t.Logf("demonstration output:\n%s", out)

	require.Regexp(t, verdictRE, out)
	require.Equal(t, []string{"160", "160"}, verdictRE.FindStringSubmatch(out)[1:])
	require.Contains(t, out, "lost 0, duplicated 0")
	require.Contains(t, out, "\nok: every acknowledged record is readable exactly once")
	require.Contains(t, out, "etcd at "+cluster.Endpoints()[0]+" (metastore/etcd)")
	require.Contains(t, out, "3 S3 buckets (objstore/s3): zone-a="+endpoints[0]+"/"+buckets[0])
	// The gate on etcd: star-b's first open is deferred while star-a's
	// lease lives, and admitted once star-a's session has run out its TTL.
	require.Contains(t, out, `star-b    opens stream "orders": deferred: lease held by star-a`)
	require.Contains(t, out, "star-a    its session gets no keep-alive: it expires when its TTL")
	require.Contains(t, out, `star-b    opens stream "orders" through the gate: admitted, settled after death`)
	require.Contains(t, out, "fenced star-a/1: cut ")
	require.Contains(t, out, `Star.Close let "orders" go through Finish: clean-release mark stamped for tenure 2, next offset 160 (close)`)
	require.NotContains(t, out, secret, "the secret key is never printed")
	require.NotContains(t, stderr.String(), secret, "the secret key is never printed")

	// The metadata went to etcd, under the run's own root.
	m := runIDRE.FindStringSubmatch(out)
	require.NotNil(t, m, "no run id in the output")
	cli := etcdtest.NewClient(t, cluster.Endpoints()...)
	resp, err := cli.Get(ctx, "/cutline-takeover/"+m[1]+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Positive(t, resp.Count, "the demonstration kept its records in etcd")
}
