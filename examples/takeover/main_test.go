package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/internal/testservers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var verdictRE = regexp.MustCompile(`(?m)^acknowledged (\d+), readable (\d+), lost (\d+), duplicated (\d+)$`)

// runDemo runs the demonstration with args and checks its verdict: every
// one of the records acknowledged, readable, none lost, none duplicated.
func runDemo(t *testing.T, records int, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	err := run(t.Context(), args, &out)
	s := out.String()
	require.NoError(t, err, s)
	m := verdictRE.FindStringSubmatch(s)
	require.NotNil(t, m, "no verification line in:\n%s", s)
	want := strconv.Itoa(records)
	require.Equal(t, []string{want, want, "0", "0"}, m[1:], "verification line %q", m[0])
	require.Contains(t, s, "\nok: every acknowledged record is readable exactly once")
	return s
}

// lineWith returns the first line of s that contains sub.
func lineWith(t *testing.T, s, sub string) string {
	t.Helper()
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("no line with %q in:\n%s", sub, s)
	return ""
}

func TestTakeoverEmbedded(t *testing.T) {
	s := runDemo(t, 400)
	// The story the timeline tells, with the numbers that do not depend on
	// timing.
	require.Contains(t, s, "in-memory metastore (metastore/mem)")
	require.Contains(t, s, "3 filesystem buckets (objstore/fs)")
	require.Contains(t, s, "star-a    minted epoch star-a/1 (standard, K=3 W=2 window=64) open")
	require.Contains(t, s, `star-a    opens stream "orders" through the gate (Star.Open): fresh, a new stream, first offset 0`)
	require.Contains(t, s, "acknowledged 200 records, offsets 0–199")
	require.Contains(t, s, "the host absorbed 192 of them (refs written, checkpoint 192); 8 acknowledged records are not absorbed yet")
	require.Contains(t, s, "loses zone-a, zone-b")
	require.Contains(t, s, "24 appends in flight (sequences 200–223, slots 200–223)")
	require.Contains(t, s, "each reached zone-c only: 1 of W=2 copies, not enough to acknowledge; slot 209 reached no zone at all")
	require.Contains(t, s, "DIES mid-flight: writer aborted (no close, no release, no absorb); 24 appends never acknowledged")
	// The gate: refused while star-a's lease lives, admitted once its
	// session has ended, settling star-a's epoch.
	require.Contains(t, s, `star-b    opens stream "orders": deferred: lease held by star-a`)
	require.Contains(t, s, "star-a    its session expires (TTL)")
	require.Contains(t, s, `star-b    opens stream "orders" through the gate: admitted, settled after death`)
	require.Contains(t, s, "the gate judged the last-writer record (star-a, epoch 1, tenure 1): no clean-release mark")
	// Every slot below the hole reached zone-c and was repaired; the hole
	// is the cut.
	require.Contains(t, s, "fenced star-a/1: cut 209")
	require.Contains(t, s, "flight copies repaired: 18")
	require.Contains(t, s, "poison objects written: 2")
	require.Contains(t, s, "deleted 14 garbage flight copies in [209, 273], covered 17 flights in [192, 209)")
	require.Contains(t, s, "8 were acknowledged but not absorbed by star-a, 9 were never acknowledged")
	require.Contains(t, s, `stream "orders" continues at offset 209 (RefIndex.Next); producer state rebuilt from 209 covered records`)
	require.Contains(t, s, "star-b    minted epoch star-b/1")
	require.Contains(t, s, "the last-writer record now names star-b/1, tenure 2")
	require.Less(t, strings.Index(s, "deferred: lease held by star-a"), strings.Index(s, "its session expires (TTL)"))
	require.Less(t, strings.Index(s, "its session expires (TTL)"), strings.Index(s, "admitted, settled after death"))
	require.Less(t, strings.Index(s, "admitted, settled after death"), strings.Index(s, "fenced star-a/1: cut 209"))
	require.Contains(t, s, "9 were in the stream already (settlement covered them): acknowledged at their offsets 200–208, not appended again")
	require.Contains(t, s, "15 appended at offsets 209–223")
	require.Contains(t, s, "acknowledged 176 new records, offsets 224–399")
	require.Contains(t, s, "cut slot 209: poison in 2 zones, a flight in 1: still dead")
	require.Contains(t, s, "14 slots past the cut (210–223) now hold the zombie's flight in at least W=2 zones, yet nothing maps or serves them")
	require.Contains(t, s, "fences star-a/1 again: cut 209, already published, nothing walked")
	require.Contains(t, s, "chain.Reader serves star-a/1 slots [0, 209) and nothing else")
	require.Contains(t, s, "shuts down cleanly: 191 acknowledgements, all absorbed (checkpoint 191), writer closed")
	require.Contains(t, s, `Star.Close let "orders" go through Finish: clean-release mark stamped for tenure 2, next offset 400 (close), lease released`)
	require.Contains(t, s, "the chains of star-a and star-b serve 400 flights; records in more than one flight: 0")
	// The zombie: one held-up PUT per lost zone and in-flight slot (2 × 24)
	// and the hole slot's PUT to zone-c. They land as copies of the slots
	// past the cut (2 × 14) and the hole's flight in zone-c, the one zone
	// without poison; the rest find repair copies or poison.
	require.Contains(t, s, "49 of its PUTs are still in the network: a zombie")
	require.Contains(t, s, "star-a's 49 held-back PUTs land now: 29 created, 20 refused")
	require.Regexp(t, `star-a \(writer; PUTs sent\) +672 ×`, s) // 3 × (200 + 24)
}

// Other shapes: one zone (a writer that loses one slot halts), five zones
// with a small window filled by the in-flight appends, no latency.
func TestTakeoverShapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records int
		args    []string
		want    []string
	}{
		{
			name: "K=1 W=1", records: 80,
			args: []string{"-k", "1", "-w", "1", "-records", "80", "-crash-after", "30", "-inflight", "10", "-absorb-every", "7", "-latency", "1ms"},
			want: []string{"loses zone-a", "none reached any zone", "fenced star-a/1: cut 30", "poison objects written: 1",
				"covered 2 flights in [28, 30)", "10 appended at offsets 30–39", "9 slots past the cut (31–39)"},
		},
		{
			name: "K=5 W=3 window 8", records: 60,
			args: []string{"-k", "5", "-w", "3", "-window", "8", "-records", "60", "-crash-after", "20", "-inflight", "8", "-absorb-every", "5", "-latency", "0"},
			want: []string{"loses zone-a, zone-b, zone-c", "8 appends in flight (sequences 20–27, slots 20–27)",
				"each reached zone-d, zone-e only: 2 of W=3 copies", "slot 23 reached no zone at all",
				"fenced star-a/1: cut 23", "poison objects written: 3", "3 were in the stream already", "5 appended at offsets 23–27"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runDemo(t, tc.records, tc.args...)
			for _, w := range tc.want {
				require.Contains(t, s, w)
			}
		})
	}
}

// TestTakeoverVersityGW runs the demonstration on three real S3 servers
// (versitygw, one process per zone) through the flags a user would give.
func TestTakeoverVersityGW(t *testing.T) {
	const access, secret = "takeover-demo", "not-a-real-secret-0123456789"
	var endpoints, buckets []string
	for i := range 3 {
		srv := testservers.StartVersityGW(t, testservers.S3Options{
			Bucket: fmt.Sprintf("orders-zone-%c", 'a'+i), AccessKey: access, SecretKey: secret,
		})
		endpoints = append(endpoints, srv.Endpoint)
		buckets = append(buckets, srv.Bucket)
	}
	args := []string{
		"-s3-endpoint", strings.Join(endpoints, ","),
		"-s3-buckets", strings.Join(buckets, ","),
		"-s3-access-key", access, "-s3-secret-key", secret,
		"-records", "160", "-crash-after", "100", "-inflight", "20",
	}
	s := runDemo(t, 160, args...)
	require.Contains(t, s, "3 S3 buckets (objstore/s3): zone-a="+endpoints[0]+"/orders-zone-a")
	require.Contains(t, s, "no injected latency")
	require.Contains(t, s, "fenced star-a/1: cut 108")
	require.Contains(t, s, "nothing maps or serves them")
	require.NotContains(t, s, secret)

	// A second run on the same buckets writes under its own prefix and
	// meets nothing of the first.
	s2 := runDemo(t, 160, args...)
	require.Contains(t, s2, "fenced star-a/1: cut 108")
	require.NotEqual(t, lineWith(t, s, "cutline takeover demonstration"), lineWith(t, s2, "cutline takeover demonstration"))

	// A cancelled context stops a run before it touches anything.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out bytes.Buffer
	require.Error(t, run(ctx, args, &out))
}

// TestReadmeShowsExampleCompose keeps the README's composition example
// identical to Example_compose, which the tests run.
func TestReadmeShowsExampleCompose(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "```go\n")
	require.True(t, ok, "no Go code block in README.md")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)

	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	// The README shows the imports, then the body.
	_, imports, ok := strings.Cut(string(src), "import (")
	require.True(t, ok)
	imports, _, ok = strings.Cut(imports, ")\n")
	require.True(t, ok)
	_, body, ok := strings.Cut(string(src), "func Example_compose() {\n")
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "\t// Output:")
	require.True(t, ok)
	var lines []string
	for line := range strings.Lines(body) {
		lines = append(lines, strings.TrimPrefix(line, "\t"))
	}
	require.Equal(t, "import ("+imports+")\n\n"+strings.Join(lines, ""), block, "README.md's Go example differs from Example_compose")
}
