// Command takeover demonstrates a takeover on object storage, end to end,
// with nothing to install:
//
//	go run ./examples/takeover
//
// A tiny broker (the host) serves the stream "orders" from star-a's chain:
// three zones (filesystem buckets in a temporary directory, a few
// milliseconds of injected latency), K=3, W=2, window 64, metadata in an
// in-memory metastore. A producer sends records with its own sequence
// numbers. Star-a acknowledges a few hundred, loses two zones, and dies with
// appends in flight; its PUTs that were held up in the network land later,
// like a zombie's. Star-b fences and settles star-a's epoch, continues the
// stream where settlement says it continues, and serves the producer's
// retries without duplicating anything. The program prints the timeline and
// ends by reading the stream back: every acknowledged record must be
// readable exactly once. It exits with status 1 if anything did not hold.
//
// Flags point it at real services instead of the embedded defaults:
//
//	go run ./examples/takeover -etcd 127.0.0.1:2379 \
//	    -s3-endpoint http://127.0.0.1:7070 -s3-buckets zone-a,zone-b,zone-c \
//	    -s3-access-key KEY -s3-secret-key SECRET
//
// -s3-endpoint takes one URL for all buckets or one per bucket (a server
// per zone). The S3 client uses path-style addressing. Other flags change
// the shape (-k, -w, -window, -records, -crash-after, -inflight,
// -absorb-every, -latency); -h lists them.
//
// Each run writes under its own key prefix and metastore root, which it
// prints, so runs against the same services never meet.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "takeover: FAILED:", err)
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	k, w, window int
	records      int
	crashAfter   int
	inflight     int
	absorbEvery  int
	latency      time.Duration
	seed         uint64
	timeout      time.Duration
	dir          string

	etcd string

	s3Endpoints []string
	s3Buckets   []string
	s3Region    string
	s3AccessKey string
	s3SecretKey string

	runID string
}

func parseFlags(args []string, out io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("takeover", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&c.k, "k", 3, "number of zones (buckets) K; with -s3-buckets, their number")
	fs.IntVar(&c.w, "w", 2, "copy quorum W: a slot is committed when W zones hold its flight")
	fs.IntVar(&c.window, "window", 64, "pipeline window: appends in flight past the acknowledged ones")
	fs.IntVar(&c.records, "records", 400, "records the producer sends in all")
	fs.IntVar(&c.crashAfter, "crash-after", 200, "records star-a acknowledges before it loses zones and dies")
	fs.IntVar(&c.inflight, "inflight", 24, "appends in flight when star-a dies (at most -window)")
	fs.IntVar(&c.absorbEvery, "absorb-every", 64, "the host covers acknowledged records in batches of this many")
	fs.DurationVar(&c.latency, "latency", 3*time.Millisecond, "mean latency injected into every object request (objstore/latency); 0 with -s3-endpoint unless given")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the injected latency draws")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.StringVar(&c.dir, "dir", "", "keep the filesystem buckets in this directory (default: a temporary directory, removed at the end)")
	fs.StringVar(&c.etcd, "etcd", "", "etcd endpoints, comma-separated (default: in-memory metastore)")
	endpoints := fs.String("s3-endpoint", "", "S3 endpoint URL with path-style addressing, or one URL per zone, comma-separated (default: filesystem buckets)")
	buckets := fs.String("s3-buckets", "", "S3 bucket names, one per zone, comma-separated, in zone order")
	fs.StringVar(&c.s3Region, "s3-region", "us-east-1", "S3 region")
	fs.StringVar(&c.s3AccessKey, "s3-access-key", "", "S3 access key")
	fs.StringVar(&c.s3SecretKey, "s3-secret-key", "", "S3 secret key (never printed)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if *buckets != "" {
		c.s3Buckets = strings.Split(*buckets, ",")
	}
	if *endpoints != "" {
		c.s3Endpoints = strings.Split(*endpoints, ",")
	}
	s3 := len(c.s3Endpoints) > 0
	switch {
	case !s3 && (*buckets != "" || c.s3AccessKey != "" || c.s3SecretKey != ""):
		return nil, errors.New("-s3-buckets and the S3 keys need -s3-endpoint")
	case s3 && len(c.s3Buckets) == 0:
		return nil, errors.New("-s3-endpoint needs -s3-buckets, one bucket per zone")
	case len(c.s3Endpoints) > 1 && len(c.s3Endpoints) != len(c.s3Buckets):
		return nil, fmt.Errorf("%d endpoints in -s3-endpoint for %d buckets: give one endpoint, or one per bucket", len(c.s3Endpoints), len(c.s3Buckets))
	case s3 && set["k"] && c.k != len(c.s3Buckets):
		return nil, fmt.Errorf("-k %d but %d buckets in -s3-buckets", c.k, len(c.s3Buckets))
	}
	if s3 {
		c.k = len(c.s3Buckets)
		if !set["latency"] {
			c.latency = 0
		}
	}
	switch {
	case c.k < 1 || c.k > 26:
		return nil, fmt.Errorf("-k %d: want 1 to 26 zones", c.k)
	case c.w < 1 || c.w > c.k:
		return nil, fmt.Errorf("-w %d: want 1 ≤ W ≤ K=%d", c.w, c.k)
	case c.window < 1:
		return nil, fmt.Errorf("-window %d: want at least 1", c.window)
	case c.inflight < 1:
		return nil, fmt.Errorf("-inflight %d: want at least 1", c.inflight)
	case c.crashAfter < 0 || c.absorbEvery < 1 || c.latency < 0 || c.timeout <= 0:
		return nil, errors.New("-crash-after, -latency must not be negative; -absorb-every, -timeout must be positive")
	}
	c.inflight = min(c.inflight, c.window)
	if c.records < c.crashAfter+c.inflight {
		return nil, fmt.Errorf("-records %d: want at least -crash-after + -inflight = %d", c.records, c.crashAfter+c.inflight)
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	c.runID = "run-" + hex.EncodeToString(id[:])
	return c, nil
}

// run runs the demonstration with the flags in args, printing to out. It
// returns an error if the demonstration failed or anything it checks did
// not hold.
func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	be, err := openBackends(ctx, cfg)
	if err != nil {
		return err
	}
	defer be.close()
	d := newDemo(cfg, be, out)
	return d.run(ctx)
}
