package takeover_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/integration/stacktest"
)

var (
	verdictRE = regexp.MustCompile(`(?m)^acknowledged (\d+), readable (\d+), lost 0, duplicated 0$`)
	runIDRE   = regexp.MustCompile(`(?m)^cutline broker demonstration \((run-[0-9a-f]+)\)$`)
)

// TestDemoOnEtcdAndS3 builds the broker's takeover demonstration
// (examples/broker/demo) and runs it as its own process against the embedded
// etcd and three versitygw zones, through the flags a user gives: it must
// exit 0 with nothing lost or duplicated, its last line the verdict, keep
// its metadata in etcd, and never print the secret key.
func TestDemoOnEtcdAndS3(t *testing.T) {
	bin := stacktest.BuildDemo(t)
	cluster := etcdtest.StartCluster(t, 1)
	zones := stacktest.StartZones(t, zonesK, "demo-")

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"-etcd", cluster.Endpoints()[0],
		"-s3-endpoint", zones.Endpoints(),
		"-s3-buckets", zones.Buckets(),
		"-s3-access-key", zones.AccessKey, "-s3-secret-key", zones.Secret,
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
	require.Contains(t, out, "3 S3 buckets (objstore/s3): zone-a="+zones.Servers[0].Endpoint+"/"+zones.Servers[0].Bucket)
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
	require.NotContains(t, out, zones.Secret, "the secret key is never printed")
	require.NotContains(t, stderr.String(), zones.Secret, "the secret key is never printed")

	// The metadata went to etcd, under the run's own root.
	m := runIDRE.FindStringSubmatch(out)
	require.NotNil(t, m, "no run id in the output")
	cli := etcdtest.NewClient(t, cluster.Endpoints()...)
	resp, err := cli.Get(ctx, "/cutline-demo/"+m[1]+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Positive(t, resp.Count, "the demonstration kept its records in etcd")
}
