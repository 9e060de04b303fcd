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

// brokerDir is the directory of the examples/broker module, whose demo
// subcommand is the demonstration: three levels up from this package,
// then examples/broker, checked by its go.mod.
func brokerDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "broker"))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(mod), "module github.com/cutline/cutline/examples/broker\n", "%s is not the broker's module", dir)
	return dir
}

// goTool finds the go command that builds the demonstration: go test puts
// its own GOROOT/bin first on the test's PATH.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the demonstration")
	return p
}

// buildDemo builds the broker command, whose demo subcommand is the
// demonstration, into a temporary directory, with the race detector when
// this test runs with it.
func buildDemo(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "broker")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, goTool(t), args...)
	cmd.Dir = brokerDir(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return bin
}

var (
	verdictRE = regexp.MustCompile(`(?m)^acknowledged (\d+), readable (\d+), lost 0, duplicated 0$`)
	runIDRE   = regexp.MustCompile(`(?m)^cutline broker demonstration \((run-[0-9a-f]+)\)$`)
)

// TestDemoOnEtcdAndS3 builds the broker and runs its takeover
// demonstration (broker demo) as its own process against the embedded
// etcd and three versitygw zones, through the flags a user gives: it must
// exit 0 with nothing lost or duplicated, its last line the verdict, keep
// its metadata in etcd, and never print the secret key.
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
	cmd := exec.CommandContext(ctx, bin, "demo",
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
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		t.Fatalf("the demonstration exited with %d\nstdout:\n%s\nstderr:\n%s", exit.ExitCode(), out, stderr.String())
	}
	require.NoError(t, err)
	t.Logf("demonstration output:\n%s", out)

	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Regexp(t, verdictRE, lines[len(lines)-1], "the last line is the verdict")
	require.Equal(t, []string{"160", "160"}, verdictRE.FindStringSubmatch(out)[1:])
	require.Contains(t, out, "etcd at "+cluster.Endpoints()[0]+" (metastore/etcd)")
	require.Contains(t, out, "3 S3 buckets (objstore/s3): zone-a="+endpoints[0]+"/"+buckets[0])
	require.Contains(t, out, "no injected latency")
	// The takeover on etcd: the fast fence ends the cut-off holder's
	// grant, a successor fences and settles its epoch at the first
	// in-flight slot no zone holds (100 + 20·2/5), its gate admits the
	// stream, and the zombie never acknowledges.
	require.Contains(t, out, "grant: token 1 ended: the fast fence confirmed the holder unhealthy")
	require.Contains(t, out, "fence: broker-1/1 cut at slot 108")
	require.Regexp(t, `settle: broker-1/1 deleted 11 garbage copies at and past the cut, covered \d+ flights`, out)
	require.Regexp(t, `grant: broker-1 \(token 1\) → broker-[23] \(token 2\)`, out)
	require.Contains(t, out, `gate: "orders" admitted, already settled (tenure 2, next offset 108`)
	require.Regexp(t, `broker-1 answered \d+ produces after it failed, none with an acknowledgement`, out)
	require.Contains(t, out, "): 0 violations")
	require.NotContains(t, out, secret, "the secret key is never printed")
	require.NotContains(t, stderr.String(), secret, "the secret key is never printed")

	// The metadata went to etcd, under the run's own root.
	m := runIDRE.FindStringSubmatch(out)
	require.NotNil(t, m, "no run id in the output")
	cli := etcdtest.NewClient(t, cluster.Endpoints()...)
	resp, err := cli.Get(ctx, "/cutline-demo/"+m[1]+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Positive(t, resp.Count, "the demonstration kept its records in etcd")
}
