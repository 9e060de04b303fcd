package main

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/examples/broker/node"
	"github.com/cutline/cutline/examples/internal/cliflags"
)

// The demonstration's flags (demo.go runs it).

// Bounds of the demonstration's own flags (the backends' are the
// broker's). It keeps state per record in memory, so a huge value is
// refused rather than left to exhaust memory.
const (
	maxRecords    = 1_000_000
	minSessionTTL = time.Second // etcd grants whole seconds
	maxSessionTTL = time.Minute
	maxLatency    = time.Second
	maxTimeout    = 24 * time.Hour
)

// demoProducers bounds the nodes' producer tables: the demonstration has
// one producer.
const demoProducers = 16

// producerLimits bounds node i's producer table. The nodes run different
// windows, as in the middle of a rolling change of -producer-window:
// broker-1 the narrowest, which still spans the appends it has in flight
// at once; the others wide enough for every retry after the failure
// (what broker-1 had in flight and all that follows), broker-3 twice
// broker-2's. A retry is judged by the window its producer's table went
// through, whichever node judges it.
func (c *demoConfig) producerLimits(i int) batch.DedupOptions {
	first := max(batch.DefaultDedupWindow, 4*c.inflight)
	w := first
	if i > 0 {
		w = max(2*first, c.records-c.crashAfter+2*c.inflight) << (i - 1)
	}
	return batch.DedupOptions{Producers: demoProducers, Window: uint64(min(batch.MaxDedupWindow, w))}
}

// streamOptions saves the producer snapshot every -snapshot-every
// records, and never by time: what the successor replays follows from
// the flags alone.
func (c *demoConfig) streamOptions() batch.DedupAppenderOptions {
	return batch.DedupAppenderOptions{SnapshotEvery: cmp.Or(c.snapEvery, -1), SnapshotInterval: -1}
}

// demoConfig is what the demonstration's flags say.
type demoConfig struct {
	be         node.Settings // the backends: -etcd, -dir, -k, -w, -window, the S3 flags
	records    int
	crashAfter int
	inflight   int
	snapEvery  int
	sessionTTL time.Duration
	latency    time.Duration
	seed       uint64
	timeout    time.Duration
	logs       bool
	runID      string
	keyPrefix  string
}

// seedUsage says exactly what -seed seeds.
const seedUsage = "seed of the injected latency, and of nothing else: each node's view of each zone draws its delays from a generator of its own, " +
	"seeded with -seed + 100 × node + zone (both numbered from 0); which request gets which delay follows the order in which requests arrive, which the Go scheduler decides, " +
	"so the times printed, and the counts that follow from timing (requests, what was absorbed before the failure, which node succeeds), " +
	"vary from run to run whatever the seed; the cut and what the fence repaired and poisoned follow from -k, -w, -crash-after and -inflight alone"

func parseDemoFlags(args []string, out io.Writer) (*demoConfig, error) {
	c := &demoConfig{be: node.Settings{Role: node.RoleAll}}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: go -C examples/broker run ./demo [flags]\n\n"+
			"A broker cluster in one process; its holder fails, a successor takes over, the old holder comes back as a zombie.\n\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&c.be.K, "k", 3, fmt.Sprintf("number of zones K, 1 to %d; with -s3-buckets, their number", node.MaxZones))
	fs.IntVar(&c.be.W, "w", 2, "copy quorum W, 1 to K: a slot is committed when W zones hold its flight")
	fs.IntVar(&c.be.Window, "window", 64, fmt.Sprintf("pipeline window, 1 to %d", epoch.MaxWindow))
	fs.IntVar(&c.records, "records", 400, fmt.Sprintf("records the producer sends in all, at least -crash-after + -inflight, at most %d", maxRecords))
	fs.IntVar(&c.crashAfter, "crash-after", 200, "records the first holder acknowledges before it fails, 0 or more")
	fs.IntVar(&c.inflight, "inflight", 24, "appends in flight when the holder fails, 1 to -window; the producer keeps as many records in flight")
	fs.IntVar(&c.snapEvery, "snapshot-every", 50, "records between the holder's saves of its producer snapshot, which the successor replays the stream's tail from (0: none, it replays the whole stream)")
	fs.DurationVar(&c.sessionTTL, "session-ttl", 2*time.Second, fmt.Sprintf("TTL of the metastore sessions, %v to %v: a failed holder's stream leases outlive it by this much", minSessionTTL, maxSessionTTL))
	fs.DurationVar(&c.latency, "latency", 3*time.Millisecond, fmt.Sprintf("mean latency injected into every object request (objstore/latency, uniform from half to 1.5 times), 0 to %v; 0 with -s3-endpoint unless given", maxLatency))
	fs.Uint64Var(&c.seed, "seed", 1, seedUsage)
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, fmt.Sprintf("give up after this long, at most %v", maxTimeout))
	fs.StringVar(&c.be.Dir, "dir", "", "keep the filesystem zones in this directory (default: a temporary directory, removed at the end)")
	fs.StringVar(&c.be.Etcd, "etcd", "", "etcd endpoints, comma-separated (default: an in-memory metastore)")
	endpoints := fs.String("s3-endpoint", "", "S3 endpoint URL with path-style addressing, or one URL per zone, comma-separated (default: filesystem zones)")
	buckets := fs.String("s3-buckets", "", "S3 bucket names, one per zone, comma-separated, in zone order, each store at most once")
	fs.StringVar(&c.be.S3Region, "s3-region", "us-east-1", "S3 region")
	fs.StringVar(&c.be.S3AccessKey, "s3-access-key", "", "S3 access key")
	fs.StringVar(&c.be.S3SecretKey, "s3-secret-key", "", "S3 secret key (never printed)")
	fs.BoolVar(&c.logs, "logs", false, "print the brokers' logs to stderr")
	set, err := cliflags.Parse(fs, args)
	if err != nil {
		return nil, err
	}
	if *buckets != "" {
		c.be.S3Buckets = strings.Split(*buckets, ",")
	}
	if *endpoints != "" {
		c.be.S3Endpoints = strings.Split(*endpoints, ",")
	}
	if err := c.be.CheckBackends(set); err != nil {
		if !cliflags.IsUsage(err) {
			err = &cliflags.UsageError{Err: err}
		}
		return nil, err
	}
	if len(c.be.S3Endpoints) > 0 && !set["latency"] {
		c.latency = 0
	}
	switch {
	case c.inflight < 1 || c.inflight > c.be.Window:
		// Not clamped: a demonstration that quietly ran with other
		// numbers than the ones asked for would tell another story.
		return nil, cliflags.Refuse("inflight", c.inflight, "1 to %d, at most -window %d", c.be.Window, c.be.Window)
	case c.records < 1 || c.records > maxRecords:
		return nil, cliflags.Refuse("records", c.records, "1 to %d", maxRecords)
	case c.crashAfter < 0 || c.crashAfter > maxRecords:
		return nil, cliflags.Refuse("crash-after", c.crashAfter, "0 to %d", maxRecords)
	case c.snapEvery < 0 || c.snapEvery > maxRecords:
		return nil, cliflags.Refuse("snapshot-every", c.snapEvery, "0 to %d", maxRecords)
	case c.sessionTTL < minSessionTTL || c.sessionTTL > maxSessionTTL:
		return nil, cliflags.Refuse("session-ttl", c.sessionTTL, "%v to %v", minSessionTTL, maxSessionTTL)
	case c.latency < 0 || c.latency > maxLatency:
		return nil, cliflags.Refuse("latency", c.latency, "0 to %v", maxLatency)
	case c.timeout <= 0 || c.timeout > maxTimeout:
		return nil, cliflags.Refuse("timeout", c.timeout, "more than 0, at most %v", maxTimeout)
	case c.records < c.crashAfter+c.inflight:
		return nil, cliflags.Refuse("records", c.records, "at least -crash-after + -inflight = %d", c.crashAfter+c.inflight)
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	c.runID = "run-" + hex.EncodeToString(id[:])
	// Each run keeps its metadata under its own root and its objects
	// under its own prefix, so that runs against the same services never
	// meet.
	c.be.EtcdRoot = "/cutline-demo/" + c.runID + "/"
	c.keyPrefix = "demo-" + c.runID
	return c, nil
}
