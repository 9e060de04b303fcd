package node

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/examples/internal/cliflags"
	"github.com/cutline/cutline/examples/internal/connlimit"
)

// Settings are what the flags say.
type Settings struct {
	Role             string // all, broker or controller
	node, domain     string
	listen           string
	controllerURL    string
	controllerID     string
	controllerListen string
	operators        []string
	// peers maps the name of every broker of the cluster to the base URL
	// of its API (-peers): the broker runs direct health links with them
	// and votes. Empty: no links, no vote.
	peers map[string]string

	Etcd, EtcdRoot string
	etcdAuth       etcdAuth
	local          localEtcd // the embedded etcd, or -ephemeral
	azure          azureZones
	Dir            string
	// zoneFileMode and zoneDirMode are the permissions of the filesystem
	// zones' objects and directories.
	zoneFileMode, zoneDirMode os.FileMode
	K, W, Window              int
	S3Endpoints               []string
	S3Buckets                 []string
	S3Region                  string
	S3AccessKey               string
	S3SecretKey               string
	latency                   time.Duration

	tlsCert, tlsKey, tlsCA string
	authTokenFile          string
	insecure               bool

	lease, heartbeat, sessionTTL time.Duration
	decisionDelay, poll          time.Duration
	openWait, shutdownTimeout    time.Duration
	maxRecord                    int64
	// The API's bounds: its connections, the bytes of a read's answer,
	// the reads served at once, and the streams a holder leads.
	conns        connlimit.Limits
	maxReadBytes int64
	maxReads     int
	maxStreams   int
	// metricsListen is the address of a listener of /metrics alone,
	// without the token ("" serves it on the API, behind the token).
	metricsListen string
	// producers bounds each stream's producer table; snapshots times the
	// saves of it that a new holder replays from (as the flags say: 0
	// turns a trigger off).
	producers batch.DedupOptions
	snapshots SnapshotTiming
	// lifecycle is the holder's passes of retention, compaction, trim
	// and collection: -compact-interval and the retention flags.
	lifecycle lifecycleFlags
	logJSON   bool
	logLevel  slog.Level
}

// Roles of a process.
const (
	RoleAll        = "all"        // the controller and one broker node, connected in process
	roleBroker     = "broker"     // a broker node of a controller elsewhere (-controller)
	roleController = "controller" // only the controller, served over mutual TLS
)

// Refuse and IsUsage are the usage errors of the flags (exit status 2),
// as package cliflags makes them.
var (
	Refuse  = cliflags.Refuse
	IsUsage = cliflags.IsUsage
)

// parseFlags reads the flags, and for every flag not given the
// environment variable CUTLINE_<NAME> (upper case, '-' as '_'): -etcd is
// CUTLINE_ETCD, -s3-secret-key CUTLINE_S3_SECRET_KEY.
func parseFlags(args []string, getenv func(string) string, out io.Writer) (*Settings, error) {
	c := &Settings{}
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: broker [flags]\n       broker demo [flags]   the takeover demonstration (demo -h lists its flags)\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Role, "role", RoleAll, "all (the controller and one broker in this process), broker (a node of the controller at -controller) or controller (only the controller, on -controller-listen)")
	fs.StringVar(&c.node, "node", "broker-1", "this broker's node name, and the star it writes as ([A-Za-z0-9._-]); with -controller, the name in its certificate")
	fs.StringVar(&c.domain, "domain", "brokers", "the authority domain of the broker cluster: one grant for all its streams")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address of the HTTP API (and of /metrics, behind the token, without -metrics-listen)")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "address of a plain-HTTP listener of /metrics alone, without the token, for a scraper on a private network (default: none)")
	fs.IntVar(&c.conns.Total, "max-conns", defaultMaxConns, "connections the API keeps open at once, in all; more are closed when accepted (at most a half of the process's file descriptor limit)")
	fs.IntVar(&c.conns.PerAddr, "max-conns-per-addr", defaultMaxConnsPerAddr, "connections the API keeps open at once from one client IP address, 1 to -max-conns")
	fs.Int64Var(&c.maxReadBytes, "max-read-bytes", DefaultMaxReadBytes, "bytes of one read's answer: it stops before the record that would pass them (one record at least) and says where to go on")
	fs.IntVar(&c.maxReads, "max-reads", defaultMaxReads, "reads served at once; more are answered 503")
	fs.IntVar(&c.maxStreams, "max-streams", defaultMaxStreams, "streams a holder leads at once; a produce to one more is refused (429)")
	fs.StringVar(&c.controllerURL, "controller", "", "the controller's URL (https://host:port) for -role broker")
	fs.StringVar(&c.controllerID, "controller-identity", "", "the node name the controller's certificate must carry (-role broker): no other certificate of the CA is taken for the controller")
	fs.StringVar(&c.controllerListen, "controller-listen", "", "address the controller serves its nodes on, over mutual TLS (-role controller: default 127.0.0.1:8443; -role all: off unless given)")
	operators := fs.String("operators", "", "identities (certificate names) allowed to request a handoff from the controller, comma-separated")
	peers := fs.String("peers", "", "every broker of the cluster as name=https://host:port (the base URL of its API), comma-separated: this broker runs direct health links with them and votes in the controller's fast fence (default: no links, no vote)")
	fs.StringVar(&c.Etcd, "etcd", "", "etcd endpoints, comma-separated (default: an etcd embedded in the process, its data under -dir, for -role all only)")
	fs.StringVar(&c.EtcdRoot, "etcd-root", "/cutline-broker/", "key prefix of everything the cluster keeps in etcd, ending in '/'")
	fs.StringVar(&c.etcdAuth.CA, "etcd-ca", "", "PEM CA that verifies etcd's server certificate; the connections to etcd are then TLS (default: plain text, unless -etcd names https:// endpoints)")
	fs.StringVar(&c.etcdAuth.Cert, "etcd-cert", "", "PEM client certificate the process presents to etcd")
	fs.StringVar(&c.etcdAuth.Key, "etcd-key", "", "PEM private key of -etcd-cert")
	fs.StringVar(&c.etcdAuth.User, "etcd-user", "", "etcd user the process authenticates as")
	fs.StringVar(&c.etcdAuth.Password, "etcd-password", "", "password of -etcd-user (prefer CUTLINE_ETCD_PASSWORD; never logged)")
	c.azure.register(fs)
	c.local.register(fs)
	fs.StringVar(&c.Dir, "dir", defaultDataDir, "data directory: the filesystem zones, the embedded etcd's data and the credentials made for the run; a broker started again on it goes on where it stopped")
	c.zoneFileMode, c.zoneDirMode = defaultZoneFileMode, defaultZoneDirMode
	fs.Var(modeFlag{&c.zoneFileMode}, "zone-file-mode", "permission of the filesystem zones' objects, in octal, before the umask")
	fs.Var(modeFlag{&c.zoneDirMode}, "zone-dir-mode", "permission of the filesystem zones' directories, in octal, before the umask")
	fs.IntVar(&c.K, "k", 3, "number of zones K; with -s3-buckets, their number")
	fs.IntVar(&c.W, "w", 2, "copy quorum W, 1 to K")
	fs.IntVar(&c.Window, "window", 64, fmt.Sprintf("pipeline window, 1 to %d", epoch.MaxWindow))
	endpoints := fs.String("s3-endpoint", "", "S3 endpoint URL (path-style addressing), or one per zone, comma-separated (default: filesystem zones)")
	buckets := fs.String("s3-buckets", "", "S3 bucket names, one per zone, comma-separated, in zone order")
	fs.StringVar(&c.S3Region, "s3-region", "us-east-1", "S3 region")
	fs.StringVar(&c.S3AccessKey, "s3-access-key", "", "S3 access key")
	fs.StringVar(&c.S3SecretKey, "s3-secret-key", "", "S3 secret key (prefer CUTLINE_S3_SECRET_KEY; never logged)")
	fs.DurationVar(&c.latency, "latency", 0, "latency injected before every zone request (objstore/latency), a model of remote zones: 20ms, say (default: none)")
	gcs := fs.String("gcs-buckets", "", "GCS zones: not supported by this example")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate of this process: the API's server certificate, and its identity to the controller or its nodes")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM CA that verifies the control plane's peers (mutual TLS between the controller and its nodes)")
	fs.StringVar(&c.authTokenFile, "auth-token-file", "", "file holding the bearer token the API requires")
	fs.BoolVar(&c.insecure, "insecure", false, "serve the API without TLS and without a token unless they are given (logs a warning)")
	fs.DurationVar(&c.lease, "lease", authority.DefaultLease, "how long a grant outlives the holder's last heartbeat")
	fs.DurationVar(&c.heartbeat, "heartbeat", time.Second, "how often the holder heartbeats, well below -lease")
	fs.DurationVar(&c.sessionTTL, "session-ttl", 5*time.Second, "TTL of the metastore sessions (stars, controller election)")
	fs.Int64Var(&c.maxRecord, "max-record", DefaultMaxRecord, "largest record a produce takes, in bytes")
	fs.IntVar(&c.producers.Producers, "producers", batch.DefaultDedupProducers, fmt.Sprintf("producers whose retries each stream recognizes, 1 to %d; the least recently active expire first", batch.MaxDedupProducers))
	fs.Uint64Var(&c.producers.Window, "producer-window", batch.DefaultDedupWindow, fmt.Sprintf("how far below its highest sequence a producer's retries are recognized, 1 to %d; older ones are refused (409)", batch.MaxDedupWindow))
	fs.IntVar(&c.snapshots.Every, "snapshot-every", defaultSnapshotEvery, "records of a stream between saves of its producer snapshot (0: none by count)")
	fs.DurationVar(&c.snapshots.Interval, "snapshot-interval", defaultSnapshotPeriod, "time between saves of a stream's producer snapshot when records came (0: none by time)")
	c.lifecycle.register(fs)
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight and the streams' departures")
	fs.BoolVar(&c.logJSON, "log-json", false, "log JSON lines instead of text")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	set, err := cliflags.Parse(fs, args)
	if err != nil {
		return nil, err
	}
	if err := cliflags.Env(fs, set, "CUTLINE_", getenv); err != nil {
		return nil, err
	}
	c.decisionDelay, c.poll, c.openWait = authority.DefaultDecisionDelay, 50*time.Millisecond, 10*time.Second
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, Refuse("log-level", *level, "debug, info, warn or error")
	}
	c.operators, c.S3Buckets, c.S3Endpoints = cliflags.List(*operators), cliflags.List(*buckets), cliflags.List(*endpoints)
	if *peers != "" {
		var err error
		if c.peers, err = parsePeers(*peers); err != nil {
			return nil, err
		}
	}
	awsEnv(c, getenv, set)
	if *gcs != "" {
		return nil, Refuse("gcs-buckets", *gcs, "nothing: GCS zones are not supported by this example (package objstore/gcs is its own module); use filesystem or S3 zones")
	}
	if err := c.check(set); err != nil {
		return nil, err
	}
	return c, nil
}

// check refuses flags that do not go together.
func (c *Settings) check(set map[string]bool) error {
	if err := epoch.ValidateName("node", c.node); err != nil {
		return Refuse("node", c.node, "a name of [A-Za-z0-9._-]")
	}
	if err := epoch.ValidateName("domain", c.domain); err != nil {
		return Refuse("domain", c.domain, "a name of [A-Za-z0-9._-]")
	}
	switch c.Role {
	case RoleAll:
		if c.controllerURL != "" {
			return Refuse("controller", c.controllerURL, "nothing with -role all, which runs its own controller; use -role broker")
		}
	case roleBroker:
		u, err := url.Parse(c.controllerURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return Refuse("controller", c.controllerURL, "the controller's https:// URL with -role broker")
		}
		// Every node's certificate chains to the same CA: without a name
		// to check, any node could pose as the controller and send it
		// revocations and releases.
		if err := epoch.ValidateName("controller-identity", c.controllerID); err != nil {
			return Refuse("controller-identity", c.controllerID, "the controller's node name, as its certificate carries it, with -role broker")
		}
	case roleController:
		if c.controllerListen == "" {
			c.controllerListen = "127.0.0.1:8443"
		}
	default:
		return Refuse("role", c.Role, "all, broker or controller")
	}
	if len(c.peers) > 0 && c.Role == roleController {
		return Refuse("role", c.Role, "broker or all with -peers: the health links run between brokers")
	}
	if len(c.peers) > 0 && (c.tlsCert == "" || c.tlsCA == "") {
		return errors.New("-peers needs -tls-cert, -tls-key and -tls-ca: the health links are mutual TLS, on the API's listener")
	}
	if c.Role != RoleAll && c.Etcd == "" {
		return Refuse("role", c.Role, "-etcd too: the controller and its brokers share one metastore")
	}
	if (c.Role != RoleAll || c.controllerListen != "") && (c.tlsCert == "" || c.tlsKey == "" || c.tlsCA == "") {
		return errors.New("the control plane is mutual TLS: -tls-cert, -tls-key and -tls-ca are required")
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	if c.Etcd != "" && !strings.HasSuffix(c.EtcdRoot, "/") {
		return Refuse("etcd-root", c.EtcdRoot, "a key prefix ending in '/'")
	}
	if err := c.local.check(c, set); err != nil {
		return err
	}
	if err := c.CheckBackends(set); err != nil {
		return err
	}
	if err := c.checkZoneModes(); err != nil {
		return err
	}
	switch {
	case c.lease < 100*time.Millisecond || c.lease > time.Hour:
		return Refuse("lease", c.lease, "100ms to 1h")
	case c.heartbeat < time.Millisecond || c.heartbeat > c.lease/3:
		return Refuse("heartbeat", c.heartbeat, "1ms to a third of -lease (%v)", c.lease/3)
	case c.sessionTTL < time.Second || c.sessionTTL > time.Minute:
		return Refuse("session-ttl", c.sessionTTL, "1s to 1m")
	case c.maxRecord < 1 || c.maxRecord > 64<<20:
		return Refuse("max-record", c.maxRecord, "1 byte to 64 MiB")
	case c.maxReadBytes < 1<<10 || c.maxReadBytes > 1<<30:
		return Refuse("max-read-bytes", c.maxReadBytes, "1 KiB to 1 GiB")
	case c.maxReads < 1 || c.maxReads > 1<<10:
		return Refuse("max-reads", c.maxReads, "1 to 1024")
	case c.maxStreams < 1 || c.maxStreams > 1<<20:
		return Refuse("max-streams", c.maxStreams, "1 to %d", 1<<20)
	case c.conns.Total < 1:
		return Refuse("max-conns", c.conns.Total, "1 or more")
	case c.conns.PerAddr < 1 || c.conns.PerAddr > c.conns.Total:
		return Refuse("max-conns-per-addr", c.conns.PerAddr, "1 to -max-conns (%d)", c.conns.Total)
	case c.shutdownTimeout <= 0:
		return Refuse("shutdown-timeout", c.shutdownTimeout, "more than 0")
	case c.latency < 0 || c.latency > 10*time.Second:
		return Refuse("latency", c.latency, "0 to 10s")
	case c.producers.Producers < 1:
		return Refuse("producers", c.producers.Producers, "1 to %d", batch.MaxDedupProducers)
	case c.producers.Window < 1:
		return Refuse("producer-window", c.producers.Window, "1 to %d", batch.MaxDedupWindow)
	case c.snapshots.Every < 0:
		return Refuse("snapshot-every", c.snapshots.Every, "0 (none by count) or more records")
	case c.snapshots.Interval < 0:
		return Refuse("snapshot-interval", c.snapshots.Interval, "0 (none by time) or more")
	}
	if _, err := batch.NewDedup(c.producers); err != nil {
		return &cliflags.UsageError{Err: err}
	}
	if err := c.lifecycle.check(); err != nil {
		return err
	}
	return c.checkDescriptors(set)
}

// checkDescriptors keeps the connections of the listeners within a half
// of the process's file descriptor limit, so that its zones, its
// metastore and its peers always have descriptors left: -max-conns given
// past it is refused, and its default is lowered to fit.
func (c *Settings) checkDescriptors(set map[string]bool) error {
	limit, ok := fileLimit()
	if !ok {
		return nil
	}
	return c.fitDescriptors(limit, set)
}

// fitDescriptors is checkDescriptors with the limit given.
func (c *Settings) fitDescriptors(limit uint64, set map[string]bool) error {
	// The API and the controller's listener take -max-conns each; the
	// metrics listener its own bound.
	shared, fixed := 0, uint64(0)
	if c.Role != roleController {
		shared++
	}
	if c.controllerListen != "" {
		shared++
	}
	if c.metricsListen != "" {
		fixed += uint64(metricsConnLimits.Total)
	}
	budget := limit / 2
	if uint64(shared)*uint64(c.conns.Total)+fixed <= budget {
		return nil
	}
	if set["max-conns"] || budget < fixed+uint64(shared) {
		return Refuse("max-conns", c.conns.Total, "at most %d: a half of the file descriptor limit (%d), over %d listeners", (budget-min(budget, fixed))/uint64(max(shared, 1)), limit, shared)
	}
	c.conns.Total = int((budget - fixed) / uint64(shared))
	c.conns.PerAddr = min(c.conns.PerAddr, c.conns.Total)
	return nil
}

// snapshotTiming is -snapshot-every and -snapshot-interval in the node's
// terms, where 0 is the default and a negative value turns a trigger off.
func (c *Settings) snapshotTiming() SnapshotTiming {
	t := c.snapshots
	if t.Every == 0 {
		t.Every = -1
	}
	if t.Interval == 0 {
		t.Interval = -1
	}
	return t
}

// CheckBackends refuses backend flags that do not go together: -etcd,
// the zones (-k, or the S3 flags), -w and -window. The demo shares it.
func (c *Settings) CheckBackends(set map[string]bool) error {
	if c.Etcd != "" && strings.Contains(","+c.Etcd+",", ",,") {
		return Refuse("etcd", c.Etcd, "endpoints separated by single commas, none empty")
	}
	if err := c.etcdAuth.check(c.Etcd); err != nil {
		return err
	}
	if len(c.S3Endpoints) > 0 {
		switch {
		case len(c.S3Buckets) == 0:
			return errors.New("-s3-endpoint needs -s3-buckets, one bucket per zone")
		case len(c.S3Endpoints) > 1 && len(c.S3Endpoints) != len(c.S3Buckets):
			return fmt.Errorf("%d endpoints in -s3-endpoint for %d buckets: give one endpoint, or one per bucket", len(c.S3Endpoints), len(c.S3Buckets))
		}
		if err := checkStores(c.S3Endpoints, c.S3Buckets); err != nil {
			return err
		}
		if set["k"] && c.K != len(c.S3Buckets) {
			return Refuse("k", c.K, "%d, the number of buckets in -s3-buckets", len(c.S3Buckets))
		}
		c.K = len(c.S3Buckets)
	} else if len(c.S3Buckets) > 0 || c.S3AccessKey != "" || c.S3SecretKey != "" {
		return errors.New("-s3-buckets and the S3 keys need -s3-endpoint")
	}
	if err := c.azure.check(len(c.S3Endpoints) > 0, set, &c.K); err != nil {
		return err
	}
	switch {
	case c.K < 1 || c.K > MaxZones:
		return Refuse("k", c.K, "1 to %d zones", MaxZones)
	case c.W < 1 || c.W > c.K:
		return Refuse("w", c.W, "1 ≤ W ≤ K=%d", c.K)
	case c.Window < 1 || c.Window > epoch.MaxWindow:
		return Refuse("window", c.Window, "1 to %d", epoch.MaxWindow)
	}
	return nil
}

// awsEnv takes the S3 credentials and region from the standard AWS
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION) when
// the zones are S3 buckets and neither the flags nor their CUTLINE_
// variables give them.
func awsEnv(c *Settings, getenv func(string) string, set map[string]bool) {
	if len(c.S3Endpoints) == 0 {
		return
	}
	if !set["s3-access-key"] && !set["s3-secret-key"] {
		c.S3AccessKey, c.S3SecretKey = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	}
	if r := getenv("AWS_REGION"); r != "" && !set["s3-region"] {
		c.S3Region = r
	}
}

// parsePeers reads -peers: name=https://host:port, comma-separated.
func parsePeers(v string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		name, raw, ok := strings.Cut(strings.TrimSpace(item), "=")
		u, err := url.Parse(raw)
		switch {
		case !ok || epoch.ValidateName("node", name) != nil:
			return nil, Refuse("peers", item, "name=https://host:port, the name of [A-Za-z0-9._-]")
		case err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || u.Fragment != "":
			return nil, Refuse("peers", item, "name=https://host:port, the base URL of that broker's API")
		case out[name] != "":
			return nil, Refuse("peers", name, "each broker once")
		}
		out[name] = raw
	}
	return out, nil
}

// embedded reports whether the process runs on everything it makes
// itself: its own metastore (the embedded etcd, or -ephemeral's in
// memory) and its own controller.
func (c *Settings) embedded() bool { return c.Role == RoleAll && c.Etcd == "" }
