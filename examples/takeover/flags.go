package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/cutline/cutline/epoch"
)

// config is what the flags say.
type config struct {
	k, w, window int
	records      int
	crashAfter   int
	inflight     int
	absorbEvery  int
	sessionTTL   time.Duration
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

// Bounds of the flags. The demonstration keeps state per record and per
// slot in flight in memory, so a huge value is refused rather than left to
// exhaust memory.
const (
	maxZones = 26 // zone-a to zone-z
	// maxWindow is the library's bound on an epoch's window: a writer keeps
	// up to a window of flights in memory, and settlement probes window+1
	// slots in every bucket. It bounds -absorb-every too: a lease.Star
	// absorbs at least every epoch.MaxWindow acknowledgements.
	maxWindow = epoch.MaxWindow
	// maxRecords bounds -records and -crash-after: the producer, the
	// broker's deduplication, the meters and the final verification each
	// keep something of every record.
	maxRecords = 1_000_000
	// The bounds of -session-ttl. etcd grants whole seconds and raises a
	// TTL below its minimum (about 2 s).
	minSessionTTL = time.Second
	maxSessionTTL = time.Minute
	// maxLatency is far beyond any zone: a request to one takes
	// milliseconds.
	maxLatency = time.Second
	maxTimeout = 24 * time.Hour
)

// flagError refuses the value of one flag, saying what the flag allows.
type flagError struct {
	Flag  string // the flag's name, without the dash
	Value string // the value given
	Want  string // what the flag allows
}

func (e *flagError) Error() string { return fmt.Sprintf("-%s %s: want %s", e.Flag, e.Value, e.Want) }

func refuse(name string, value any, format string, args ...any) error {
	return &flagError{Flag: name, Value: fmt.Sprint(value), Want: fmt.Sprintf(format, args...)}
}

func parseFlags(args []string, out io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("takeover", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&c.k, "k", 3, fmt.Sprintf("number of zones (buckets) K, 1 to %d; with -s3-buckets, their number", maxZones))
	fs.IntVar(&c.w, "w", 2, "copy quorum W, 1 to K: a slot is committed when W zones hold its flight")
	fs.IntVar(&c.window, "window", 64, fmt.Sprintf("pipeline window, 1 to %d: appends in flight past the acknowledged ones", maxWindow))
	fs.IntVar(&c.records, "records", 400, fmt.Sprintf("records the producer sends in all, at least -crash-after + -inflight, at most %d", maxRecords))
	fs.IntVar(&c.crashAfter, "crash-after", 200, "records star-a acknowledges before it loses zones and dies, 0 or more")
	fs.IntVar(&c.inflight, "inflight", 24, "appends in flight when star-a dies, 1 to -window")
	fs.IntVar(&c.absorbEvery, "absorb-every", 64, fmt.Sprintf("the host's Star covers acknowledged records in batches of this many (lease.Options.AbsorbEvery), 1 to %d", maxWindow))
	fs.DurationVar(&c.sessionTTL, "session-ttl", 2*time.Second, fmt.Sprintf("TTL of each star's metastore session, %v to %v: a dead star's lease and registry entry outlive it by this much (the in-memory metastore expires star-a's at once)", minSessionTTL, maxSessionTTL))
	fs.DurationVar(&c.latency, "latency", 3*time.Millisecond, fmt.Sprintf("mean latency injected into every object request (objstore/latency), 0 to %v; 0 with -s3-endpoint unless given", maxLatency))
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the injected latency, and of nothing else: it fixes the sequence of delays each zone's wrapper draws, not which request gets which (arrival order decides), so times vary from run to run; the counts printed follow from the other flags alone")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, fmt.Sprintf("give up after this long, at most %v", maxTimeout))
	fs.StringVar(&c.dir, "dir", "", "keep the filesystem buckets in this directory (default: a temporary directory, removed at the end)")
	fs.StringVar(&c.etcd, "etcd", "", "etcd endpoints, comma-separated (default: in-memory metastore)")
	endpoints := fs.String("s3-endpoint", "", "S3 endpoint URL with path-style addressing, or one URL per zone, comma-separated (default: filesystem buckets)")
	buckets := fs.String("s3-buckets", "", "S3 bucket names, one per zone, comma-separated, in zone order, each store at most once")
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

	if c.etcd != "" && strings.Contains(","+c.etcd+",", ",,") {
		return nil, refuse("etcd", c.etcd, "endpoints separated by single commas, none empty")
	}
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
	}
	if s3 {
		if err := checkStores(*endpoints, *buckets, c.s3Endpoints, c.s3Buckets); err != nil {
			return nil, err
		}
		if set["k"] && c.k != len(c.s3Buckets) {
			return nil, refuse("k", c.k, "%d, the number of buckets in -s3-buckets", len(c.s3Buckets))
		}
		c.k = len(c.s3Buckets)
		if !set["latency"] {
			c.latency = 0
		}
	}

	// Each flag on its own, then -records against the flags it must hold.
	switch {
	case c.k < 1 || c.k > maxZones:
		return nil, refuse("k", c.k, "1 to %d zones", maxZones)
	case c.w < 1 || c.w > c.k:
		return nil, refuse("w", c.w, "1 ≤ W ≤ K=%d", c.k)
	case c.window < 1 || c.window > maxWindow:
		return nil, refuse("window", c.window, "1 to %d", maxWindow)
	case c.inflight < 1 || c.inflight > c.window:
		// Not clamped: a demonstration that quietly ran with other numbers
		// than the ones asked for would tell a different story.
		return nil, refuse("inflight", c.inflight, "1 to %d, at most -window %d", c.window, c.window)
	case c.records < 1 || c.records > maxRecords:
		return nil, refuse("records", c.records, "1 to %d", maxRecords)
	case c.crashAfter < 0 || c.crashAfter > maxRecords:
		return nil, refuse("crash-after", c.crashAfter, "0 to %d", maxRecords)
	case c.absorbEvery < 1 || c.absorbEvery > maxWindow:
		return nil, refuse("absorb-every", c.absorbEvery, "1 to %d", maxWindow)
	case c.sessionTTL < minSessionTTL || c.sessionTTL > maxSessionTTL:
		return nil, refuse("session-ttl", c.sessionTTL, "%v to %v", minSessionTTL, maxSessionTTL)
	case c.latency < 0 || c.latency > maxLatency:
		return nil, refuse("latency", c.latency, "0 to %v", maxLatency)
	case c.timeout <= 0 || c.timeout > maxTimeout:
		return nil, refuse("timeout", c.timeout, "more than 0, at most %v", maxTimeout)
	case c.records < c.crashAfter+c.inflight:
		return nil, refuse("records", c.records, "at least -crash-after + -inflight = %d", c.crashAfter+c.inflight)
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	c.runID = "run-" + hex.EncodeToString(id[:])
	return c, nil
}

// checkStores refuses S3 flags that do not name one distinct store per
// zone: an endpoint that is not an http or https URL, an empty bucket name,
// more buckets than zone names, or one bucket on one endpoint given for two
// zones. Two zones on one store would count one physical copy as two, so a
// slot acknowledged at W copies could have fewer. endpointsFlag and
// bucketsFlag are the flags as given.
//
// Two names of one server (localhost and 127.0.0.1) look distinct here; a
// probe of the buckets themselves at start-up is what catches those.
func checkStores(endpointsFlag, bucketsFlag string, endpoints, buckets []string) error {
	servers := make([]string, len(endpoints))
	for i, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return refuse("s3-endpoint", endpointsFlag, "http or https URLs, comma-separated; %q is not one", e)
		}
		// Scheme and host are case-insensitive; a trailing slash changes
		// nothing.
		servers[i] = strings.ToLower(u.Scheme+"://"+u.Host) + strings.TrimRight(u.Path, "/")
	}
	if len(buckets) > maxZones {
		return refuse("s3-buckets", bucketsFlag, "1 to %d buckets, one per zone", maxZones)
	}
	zoneOf := make(map[string]int, len(buckets))
	for i, name := range buckets {
		if name == "" {
			return refuse("s3-buckets", bucketsFlag, "one bucket name per zone, none empty")
		}
		server, where := servers[0], fmt.Sprintf("%q", name)
		if len(servers) > 1 {
			server, where = servers[i], fmt.Sprintf("%q at %s", name, endpoints[i])
		}
		store := server + " " + name
		if j, dup := zoneOf[store]; dup {
			return refuse("s3-buckets", bucketsFlag, "one distinct store per zone: bucket %s is given for %s and %s, which would count one physical copy as two",
				where, zoneName(j), zoneName(i))
		}
		zoneOf[store] = i
	}
	return nil
}
