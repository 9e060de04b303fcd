package linearizestore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest/linearize"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/s3"
)

// historiesEnv sets how many histories run (a long mode); each history
// kills and restarts one zone. Default 2.
const historiesEnv = "CUTLINE_LINEARIZE_HISTORIES"

func zoneName(i int) string { return fmt.Sprintf("zone-%c", 'a'+i) }

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TestLinearizableEtcdS3 records histories on embedded etcd and three
// versitygw zones (K=3, W=2): three clients append to a stream through
// the serving lease.Star, two read it back through another process's
// index and chain reader, and mid-history one zone's server process is
// killed; with it down the serving star crashes and a new star takes the
// stream over through the open gate (which fences and settles the crashed
// star's epoch on the two zones left), the chain rolls, the zone is
// restarted, and the stream is handed off cleanly. Every history is
// checked with porcupine; an Unknown verdict fails.
func TestLinearizableEtcdS3(t *testing.T) {
	n := 2
	if v := os.Getenv(historiesEnv); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, historiesEnv)
	}
	cli := etcdtest.Start(t)
	var servers []*testservers.S3Server
	for i := range 3 {
		servers = append(servers, testservers.StartVersityGW(t, testservers.S3Options{Bucket: zoneName(i)}))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var buckets []objstore.Bucket
	for i, srv := range servers {
		// No SDK retries: a zone whose server is down answers at once
		// (connection refused), and the library's retries are the ones
		// under test.
		b, err := s3.New(srv.NewClient(hc, func(o *awss3.Options) { o.RetryMaxAttempts = 1 }), srv.Bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: zoneName(i)}})
		require.NoError(t, err)
		require.NoError(t, objstore.Verify(t.Context(), b))
		buckets = append(buckets, b)
	}
	require.NoError(t, objstore.VerifyDistinct(t.Context(), buckets...))

	start := time.Now()
	var ops []string
	for h := range n {
		killed := servers[(h+2)%len(servers)] // zone-c first, then zone-a, …
		t.Run(fmt.Sprintf("history=%d", h), func(t *testing.T) {
			id := randomID()
			store, err := etcd.New(cli, etcd.Options{Root: "/cutline-lin/" + id + "/", RequestTimeout: 2 * time.Second})
			require.NoError(t, err)
			c := epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 16, Prefix: "lin-" + id}
			c2 := c
			c2.Window = 8
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			defer killed.Restart() // a no-op unless a step failed before the restart
			const appends = 120
			hist, rep, err := linearize.Run(ctx, linearize.Config{Store: store, Zones: buckets, Constants: c}, linearize.Options{
				Rolls: []epoch.Constants{c2, c}, Appends: appends, Appenders: 3, Readers: 2, ReadEvery: 10 * time.Millisecond,
				Backoff: clock.Backoff{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond},
				Steps: []linearize.Step{
					{After: 15, Kind: linearize.Hook, Name: "kill " + killed.Bucket, Do: func(context.Context) error { killed.Stop(); return nil }},
					{After: 30, Kind: linearize.Crash},
					{After: 50, Kind: linearize.Roll},
					{After: 70, Kind: linearize.Hook, Name: "restart " + killed.Bucket, Do: func(context.Context) error { killed.Restart(); return nil }},
					{After: 85, Kind: linearize.Handoff},
					{After: 100, Kind: linearize.Restart},
				},
				// Compaction, trimming, retention and collection run
				// beside the appends and reads, through the kill, the
				// crash, the roll and the handoff.
				Maintenance: linearize.Maintenance{Every: 20 * time.Millisecond, Keep: appends / 2, PassSlots: 16},
				Logf:        t.Logf,
			})
			t.Logf("%d stars in %v; %s", rep.Stars, rep.Elapsed.Round(time.Millisecond), strings.Join(rep.Steps, "; "))
			t.Logf("maintenance: %+v", rep.Maintenance)
			require.NoError(t, err)
			r := linearize.Require(t, hist, time.Minute)
			require.GreaterOrEqual(t, r.Acked, appends)
			require.Positive(t, r.Reads)
			require.Positive(t, rep.Maintenance.Rounds, "the maintenance process ran")
			ops = append(ops, strconv.Itoa(r.Ops))
		})
	}
	t.Logf("%d histories checked in %v, operations per history: %s", len(ops), time.Since(start).Round(time.Millisecond), strings.Join(ops, ", "))
}
