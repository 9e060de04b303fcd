package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/examples/internal/cliflags"
)

// runDemoOK runs the demonstration in process and requires it to succeed,
// ending with its verdict: every one of the records acknowledged and
// readable, none lost, none duplicated.
func runDemoOK(t *testing.T, records int, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	err := runDemo(t.Context(), append([]string{"-records", fmt.Sprint(records)}, args...), &out, io.Discard)
	s := out.String()
	require.NoError(t, err, s)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	require.Equal(t, fmt.Sprintf("acknowledged %d, readable %d, lost 0, duplicated 0", records, records), lines[len(lines)-1], s)
	require.Contains(t, s, "cutlinetest.Check: every zone read directly, every fenced epoch fenced again, the store's history replayed): 0 violations")
	require.NotContains(t, s, "FAILED")
	return s
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// timelineLine requires a line of the timeline, with its time relative to
// the failure, that matches re.
func timelineLine(t *testing.T, s, re string) {
	t.Helper()
	require.Regexp(t, regexp.MustCompile(`(?m)^ +[+-]\d+\.\d{3}s  \S+ +`+re), s)
}

// The demonstration, small: the holder fails with 16 appends in flight
// after 60 acknowledgements; what follows from the flags is the same
// every run: the first in-flight slot no zone holds (60 + 16·2/5) is the
// cut, the fence completes the 6 in-flight slots below it in the two
// zones the holder lost, and settlement deletes the one copy of each of
// the 9 slots past it.
func TestDemo(t *testing.T) {
	t.Parallel()
	s := runDemoOK(t, 120, "-crash-after", "60", "-inflight", "16", "-latency", "1ms")
	require.Contains(t, s, "3 filesystem zones (objstore/fs)")
	require.Contains(t, s, "in-memory metastore (metastore/memstore)")

	// The timeline: each entry the demonstration is about, timed from the
	// failure.
	timelineLine(t, s, `grant: broker-1 holds token 1`)
	timelineLine(t, s, `gate: "orders" admitted, fresh \(tenure 1, next offset 0`)
	timelineLine(t, s, `16 appends in flight \(slots 60–75\): each reached zone-c only, 1 of W=2 copies; slot 66 reached no zone`)
	timelineLine(t, s, `FAILS: cut off from the controller, its peers and the metastore`)
	timelineLine(t, s, `grant: token 1 ended: the fast fence confirmed the holder unhealthy`)
	timelineLine(t, s, `fence: broker-1/1 cut at slot 66 \(\d+ rounds, \d+ reads, \d+ creates: 12 flight copies repaired, 2 poison written\)`)
	timelineLine(t, s, `settle: broker-1/1 deleted 9 garbage copies at and past the cut, covered \d+ flights below it`)
	timelineLine(t, s, `grant: broker-1 \(token 1\) → broker-[23] \(token 2\)`)
	timelineLine(t, s, `gate: "orders" admitted, already settled \(tenure 2, next offset 66\); producers rebuilt (from the snapshot at offset \d+|with no snapshot): \d+ records read back`)
	// The successor replays only what its predecessor's last snapshot
	// (every 50 records) does not hold.
	m := regexp.MustCompile(`broker-[23] rebuilt the producers of orders (?:from the snapshot at offset (\d+): replayed (\d+) of 66|with no snapshot: replayed all (66)) records`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	if m[3] == "" {
		require.Equal(t, "66", fmt.Sprint(atoi(t, m[1])+atoi(t, m[2])))
		require.GreaterOrEqual(t, atoi(t, m[1]), 50)
	}
	timelineLine(t, s, `broker-1 comes back, a zombie: its 33 held-back PUTs land: 19 created, 14 refused`)
	timelineLine(t, s, `the cut slot 66 holds poison in 2 zones: dead for good; 9 slots past it hold the zombie's flight in W zones, yet none is served`)
	timelineLine(t, s, `grant: lost token 1`)
	timelineLine(t, s, `answers a produce 503: this node does not hold the authority grant; the holder is "broker-[23]"`)
	require.Regexp(t, `broker-1 answered \d+ produces after it failed, none with an acknowledgement`, s)

	// The object requests by kind: the failed holder sent one PUT per
	// zone and slot, 3 × (60 + 16), of which 33 were held back.
	require.Contains(t, s, "object requests by kind")
	require.Regexp(t, `broker-1 \(failed, zombie\) +228 +0 +0 +0 +0 +canceled 33, ok 195`, s)
	require.Regexp(t, `broker-[23] \(successor\) +\d+ +\d+ +\d+ +9 +\d+ +ok \d+`, s)

	// The handoff to the third node, whose producer window is another:
	// every record sent again is a duplicate (the windows span them all).
	timelineLine(t, s, `hands the grant from broker-[23] \(producer window (256|512)\) to broker-[23] \(producer window (256|512)\)`)
	dups, old := resentCounts(t, s, 120)
	require.Equal(t, 120, dups)
	require.Zero(t, old)

	// The last act: the holder's lifecycle passes settle the epoch the
	// handoff left open, compact every flight below a cut into segments
	// and trim it, while the stream is read whole, again and again.
	timelineLine(t, s, `before compaction: zone-a \d+ flights`)
	timelineLine(t, s, `lifecycle pass: settled 1 epoch left open; wrote \d+ segments? \(\d+ ref pages?, \d+ bytes\); trimmed \d+ flight copies; collected \d+ segments?; 0 flights wait for compaction`)
	timelineLine(t, s, `after: zone-a 0 flights.*zone-b 0 flights.*zone-c 0 flights.*index: 120 refs, 120 of them read from segments`)
	timelineLine(t, s, `read "orders" whole \d+ times through broker-[23]'s API while it was compacted and trimmed: each read held all 120 acknowledged records, once each`)
	require.Regexp(t, `compaction rewrote the stream's 120 flights into \d+ segment objects and trimmed them`, s)
}

// resentCounts returns how many of the records sent again after the
// handoff were answered as duplicates and how many were refused as too
// old, and requires that none was appended again.
func resentCounts(t *testing.T, s string, records int) (dups, tooOld int) {
	t.Helper()
	m := regexp.MustCompile(`after the handoff from broker-[23] \(producer window \d+\) to broker-[23] \(window \d+\), the producer sent all (\d+) records again: ` +
		`(\d+) answered as duplicates with their first acknowledgements, (\d+) refused as too old to judge \(409\), 0 appended again`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	require.Equal(t, records, atoi(t, m[1]))
	dups, tooOld = atoi(t, m[2]), atoi(t, m[3])
	require.Equal(t, records, dups+tooOld)
	return dups, tooOld
}

// The producer windows differ by node, as in a rolling change of
// -producer-window: broker-1's (128) lets go of the oldest records before
// it fails, and neither its successor nor the third node, with wider
// windows, judges them fresh: sent again after the handoff, they are
// refused as too old, and nothing is appended twice.
func TestDemoWindowChange(t *testing.T) {
	t.Parallel()
	s := runDemoOK(t, 260, "-crash-after", "200", "-inflight", "8", "-latency", "0", "-snapshot-every", "50")
	require.Contains(t, s, "producer windows, as in a rolling change of -producer-window: broker-1 128, broker-2 256, broker-3 512")
	_, old := resentCounts(t, s, 260)
	// broker-1's snapshot holds at least its records up to 150: its
	// window of 128 let go of at least 150 - 128 of them.
	require.GreaterOrEqual(t, old, 150-128)
}

// Other shapes, and another seed, which changes the injected latency
// only: five zones with a window the in-flight appends fill (the holder
// keeps W−1 = 2 of them), and a single zone (the holder keeps none: the
// first in-flight slot is the cut).
func TestDemoShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		records int
		args    []string
		want    []string
	}{
		{
			name: "K=5 W=3 window 8", records: 40,
			args: []string{"-k", "5", "-w", "3", "-window", "8", "-crash-after", "20", "-inflight", "8", "-latency", "0", "-seed", "7"},
			want: []string{"loses zone-a, zone-b, zone-c", "each reached zone-d, zone-e only, 2 of W=3 copies; slot 23 reached no zone",
				"fence: broker-1/1 cut at slot 23", "3 poison written", "deleted 8 garbage copies"},
		},
		{
			name: "K=1 W=1", records: 30,
			args: []string{"-k", "1", "-w", "1", "-crash-after", "10", "-inflight", "5", "-seed", "8"},
			want: []string{"loses zone-a", "5 appends in flight (slots 10–14): none reached a zone",
				"fence: broker-1/1 cut at slot 10", "1 poison written", "deleted 0 garbage copies"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runDemoOK(t, tc.records, tc.args...)
			for _, w := range tc.want {
				require.Contains(t, s, w)
			}
		})
	}
}

// Every bad flag is refused before anything starts, with an error that
// names the flag, the value and what the flag allows.
func TestDemoFlags(t *testing.T) {
	const s3 = "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-k", "0"}, "-k 0: want 1 to 26 zones"},
		{[]string{"-k", "27"}, "-k 27: want 1 to 26 zones"},
		{[]string{"-w", "0"}, "-w 0: want 1 ≤ W ≤ K=3"},
		{[]string{"-w", "4"}, "-w 4: want 1 ≤ W ≤ K=3"},
		{[]string{"-window", "0"}, "-window 0: want 1 to 65536"},
		{[]string{"-window", "65537"}, "-window 65537: want 1 to 65536"},
		{[]string{"-window", "1000000000000"}, "-window 1000000000000: want 1 to 65536"},
		{[]string{"-inflight", "0"}, "-inflight 0: want 1 to 64, at most -window 64"},
		{[]string{"-inflight", "65"}, "-inflight 65: want 1 to 64, at most -window 64"},
		{[]string{"-window", "8", "-inflight", "10"}, "-inflight 10: want 1 to 8, at most -window 8"},
		{[]string{"-records", "0"}, "-records 0: want 1 to 1000000"},
		{[]string{"-records", "10000000"}, "-records 10000000: want 1 to 1000000"},
		{[]string{"-records", "10"}, "-records 10: want at least -crash-after + -inflight = 224"},
		{[]string{"-crash-after", "-1"}, "-crash-after -1: want 0 to 1000000"},
		{[]string{"-crash-after", "5000000"}, "-crash-after 5000000: want 0 to 1000000"},
		{[]string{"-snapshot-every", "-1"}, "-snapshot-every -1: want 0 to 1000000"},
		{[]string{"-session-ttl", "500ms"}, "-session-ttl 500ms: want 1s to 1m0s"},
		{[]string{"-session-ttl", "2m"}, "-session-ttl 2m0s: want 1s to 1m0s"},
		{[]string{"-latency", "-1ms"}, "-latency -1ms: want 0 to 1s"},
		{[]string{"-latency", "1h"}, "-latency 1h0m0s: want 0 to 1s"},
		{[]string{"-timeout", "0"}, "-timeout 0s: want more than 0, at most 24h0m0s"},
		{[]string{"-timeout", "-1s"}, "-timeout -1s: want more than 0, at most 24h0m0s"},
		{[]string{"-timeout", "1000h"}, "-timeout 1000h0m0s: want more than 0, at most 24h0m0s"},
		{[]string{"-etcd", "127.0.0.1:2379,,127.0.0.1:2380"}, "-etcd 127.0.0.1:2379,,127.0.0.1:2380: want endpoints separated by single commas"},
		{[]string{"-s3-buckets", "a,b,c"}, "need -s3-endpoint"},
		{[]string{"-s3-endpoint", s3}, "needs -s3-buckets"},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "a,b", "-k", "3"}, "-k 3: want 2, the number of buckets in -s3-buckets"},
		{[]string{"-s3-endpoint", s3 + ",http://127.0.0.1:2", "-s3-buckets", "a,b,c"}, "give one endpoint, or one per bucket"},
		{[]string{"-s3-endpoint", "127.0.0.1:7070", "-s3-buckets", "a"}, `-s3-endpoint 127.0.0.1:7070: want http or https URLs, comma-separated; "127.0.0.1:7070" is not one`},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "a,,c"}, "-s3-buckets a,,c: want one bucket name per zone, none empty"},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", strings.Repeat("b,", 26) + "b"}, "want 1 to 26 buckets, one per zone"},
		// One store named twice would count one physical copy as two.
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "b1,b1,b3"},
			`-s3-buckets b1,b1,b3: want one distinct store per zone: bucket "b1" is given for zone-a and zone-b`},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "b1,b2,b3,b2"}, `bucket "b2" is given for zone-b and zone-d`},
		{[]string{"-s3-endpoint", "http://h1:1,http://h2:1,HTTP://H1:1/", "-s3-buckets", "b,b,b"},
			`-s3-buckets b,b,b: want one distinct store per zone: bucket "b" at HTTP://H1:1/ is given for zone-a and zone-c`},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nonsense"}, "flag provided but not defined"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := runDemo(t.Context(), tc.args, &out, io.Discard)
			require.Error(t, err)
			require.Contains(t, err.Error()+out.String(), tc.want)
			require.True(t, cliflags.IsUsage(err), "a usage error (exit 2), not a failed run: %v", err)
			require.NotContains(t, out.String(), "usage:", "the error alone, not the whole usage")
		})
	}
}

// Values at the edges of their ranges are taken as given, never
// adjusted; -h lists every flag and says exactly what -seed seeds.
func TestDemoFlagsAccepted(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(t *testing.T, c *demoConfig)
	}{
		{[]string{"-inflight", "64"}, func(t *testing.T, c *demoConfig) { require.Equal(t, 64, c.inflight) }},
		{[]string{"-window", "65536", "-inflight", "65536", "-records", "1000000", "-crash-after", "0"}, func(t *testing.T, c *demoConfig) {
			require.Equal(t, 65536, c.be.Window)
			require.Equal(t, 65536, c.inflight)
		}},
		{[]string{"-crash-after", "0", "-inflight", "1", "-records", "1", "-latency", "0", "-timeout", "24h"}, func(t *testing.T, c *demoConfig) {
			require.Equal(t, 1, c.records)
		}},
		{[]string{"-session-ttl", "1s"}, func(t *testing.T, c *demoConfig) { require.Equal(t, "1s", c.sessionTTL.String()) }},
		{[]string{"-session-ttl", "1m"}, func(t *testing.T, c *demoConfig) { require.Equal(t, "1m0s", c.sessionTTL.String()) }},
		// One bucket name on distinct servers is distinct stores.
		{[]string{"-s3-endpoint", "http://h1:1,http://h2:1,http://h3:1", "-s3-buckets", "b,b,b"}, func(t *testing.T, c *demoConfig) {
			require.Equal(t, 3, c.be.K)
			require.Zero(t, c.latency, "no injected latency on real services unless asked for")
		}},
		// Each run keeps its metadata and its objects apart.
		{nil, func(t *testing.T, c *demoConfig) {
			require.Regexp(t, `^/cutline-demo/run-[0-9a-f]{8}/$`, c.be.EtcdRoot)
			require.Equal(t, "demo-"+c.runID, c.keyPrefix)
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := parseDemoFlags(tc.args, io.Discard)
			require.NoError(t, err)
			tc.check(t, c)
		})
	}

	var out bytes.Buffer
	require.ErrorIs(t, runDemo(t.Context(), []string{"-h"}, &out, io.Discard), flag.ErrHelp)
	help := strings.Join(strings.Fields(out.String()), " ")
	for _, f := range []string{"-etcd", "-s3-endpoint", "-s3-buckets", "-records", "-crash-after", "-inflight", "-seed"} {
		require.Contains(t, help, f+" ")
	}
	require.Contains(t, help, "seed of the injected latency, and of nothing else")
	require.Contains(t, help, "vary from run to run whatever the seed")
}

// The report shows no Go formatting: times just before the origin read
// +0.000s, answers by status name their statuses.
func TestDemoReportFormatting(t *testing.T) {
	require.Equal(t, "   +0.000s", timelineOffset(-400*time.Microsecond))
	require.Equal(t, "   -1.250s", timelineOffset(-1250*time.Millisecond))
	require.Equal(t, "409 Conflict 2, 503 Service Unavailable 424", byStatus(map[int]int{503: 424, 409: 2}))
	require.Equal(t, "none", byStatus(nil))
}

// A wait shows what it waits for while it lasts, and erases the line.
func TestDemoProgressLine(t *testing.T) {
	r := newRecorder()
	var progress bytes.Buffer
	r.progress = &progress
	go r.add(event{who: "broker-2", msg: "grant gained"})
	_, err := r.wait(t.Context(), "broker-2 to be granted", logged("broker-2", "grant gained"))
	require.NoError(t, err)
	require.Contains(t, progress.String(), "waiting for broker-2 to be granted")
	require.True(t, strings.HasSuffix(progress.String(), "\r"), "the line is erased")
}

// The demonstration's help shows no credential given by a flag.
func TestDemoHelpShowsNoSecret(t *testing.T) {
	var out bytes.Buffer
	err := runDemo(context.Background(), []string{"-s3-secret-key", "s3-secret-for-tests", "-s3-access-key", "AKIA-FOR-TESTS", "-h"}, &out, &out)
	require.True(t, errors.Is(err, flag.ErrHelp), "%v", err)
	require.Contains(t, out.String(), "-s3-secret-key")
	require.NotContains(t, out.String(), "s3-secret-for-tests")
	require.NotContains(t, out.String(), "AKIA-FOR-TESTS")
}
