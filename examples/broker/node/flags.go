package node

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/examples/internal/cliflags"
	"github.com/cutline/cutline/examples/internal/connlimit"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/settle"
)

// Settings are what the flags say.
type Settings struct {
	Role                                          string // all, broker or controller
	node, domain, listen, metricsListen           string
	controllerURL, controllerID, controllerListen string
	operators                                     []string
	peers                                         map[string]string // broker name: its API's base URL
	Etcd, EtcdRoot                                string
	etcdDial                                      etcdstore.DialConfig // how to reach -etcd, never logged
	local                                         localEtcd            // the embedded etcd, or -ephemeral
	Dir                                           string
	zoneFileMode, zoneDirMode                     os.FileMode
	K, W, Window                                  int
	S3Endpoints, S3Buckets                        []string
	S3Region, S3AccessKey, S3SecretKey            string
	azureURLs, azureContainers                    []string
	azureAccount, azureKey                        string
	latency                                       time.Duration
	tlsCert, tlsKey, tlsCA, authTokenFile         string
	insecure                                      bool
	lease, heartbeat, sessionTTL                  time.Duration
	decisionDelay, poll, shutdownTimeout          time.Duration
	maxRecord, maxReadBytes                       int64
	conns                                         connlimit.Limits
	maxReads                                      int
	producers                                     batch.DedupOptions
	streams                                       batch.DedupAppenderOptions // as the flags say: 0 turns a snapshot trigger off
	lifecycle                                     LifecycleConfig            // as the flags say: 0 turns passes off
	logJSON                                       bool
	logLevel                                      slog.Level
}

// Roles of a process.
const (
	RoleAll        = "all"        // the controller and one broker node, connected in process
	roleBroker     = "broker"     // a broker node of a controller elsewhere (-controller)
	roleController = "controller" // only the controller, served over mutual TLS
)

// The flags' usage errors (exit status 2), as package cliflags makes them.
var Refuse, IsUsage = cliflags.Refuse, cliflags.IsUsage

// parseFlags reads the flags, and for every flag not given its variable
// (cliflags.Env): -s3-secret-key is CUTLINE_S3_SECRET_KEY.
func parseFlags(args []string, getenv func(string) string, out io.Writer) (*Settings, error) {
	c := &Settings{zoneFileMode: 0o600, zoneDirMode: 0o700, // the records are the producers' data
		decisionDelay: authority.DefaultDecisionDelay, poll: 50 * time.Millisecond}
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: broker [flags]\n       broker demo [flags]   the takeover demonstration (demo -h lists its flags)\n\n")
		fs.PrintDefaults()
	}
	str, dur, num := fs.StringVar, fs.DurationVar, fs.IntVar
	list := func(dst *[]string, name, usage string) {
		fs.Func(name, usage, func(v string) error { *dst = cliflags.List(v); return nil })
	}
	str(&c.Role, "role", RoleAll, "all (the controller and one broker in this process), broker (a node of the controller at -controller) or controller (only the controller, on -controller-listen)")
	str(&c.node, "node", "broker-1", "this broker's node name, and the star it writes as ([A-Za-z0-9._-]); with -controller, the name in its certificate")
	str(&c.domain, "domain", "brokers", "the authority domain of the broker cluster: one grant for all its streams")
	str(&c.listen, "listen", "127.0.0.1:8080", "address of the HTTP API (and of /metrics, behind the token, without -metrics-listen)")
	str(&c.metricsListen, "metrics-listen", "", "address of a plain-HTTP listener of /metrics alone, without the token, for a scraper on a private network (default: none)")
	num(&c.conns.Total, "max-conns", defaultMaxConns, "connections the API keeps open at once, in all; more are closed when accepted (at most a half of the process's file descriptor limit)")
	num(&c.conns.PerAddr, "max-conns-per-addr", defaultMaxConnsPerAddr, "connections the API keeps open at once from one client IP address, 1 to -max-conns")
	fs.Int64Var(&c.maxReadBytes, "max-read-bytes", DefaultMaxReadBytes, "bytes of one read's answer: it stops before the record that would pass them (one record at least) and says where to go on")
	num(&c.maxReads, "max-reads", defaultMaxReads, "reads served at once; more are answered 503")
	num(&c.streams.MaxStreams, "max-streams", batch.DefaultAppenderStreams, "streams a holder leads at once; a produce to one more is refused (429)")
	str(&c.controllerURL, "controller", "", "the controller's URL (https://host:port) for -role broker")
	str(&c.controllerID, "controller-identity", "", "the node name the controller's certificate must carry (-role broker): no other certificate of the CA is taken for the controller")
	str(&c.controllerListen, "controller-listen", "", "address the controller serves its nodes on, over mutual TLS (-role controller: default 127.0.0.1:8443; -role all: off unless given)")
	list(&c.operators, "operators", "identities (certificate names) allowed to request a handoff from the controller, comma-separated")
	peers := fs.String("peers", "", "every broker of the cluster as name=https://host:port (the base URL of its API), comma-separated: this broker runs direct health links with them and votes in the controller's fast fence (default: no links, no vote)")
	str(&c.Etcd, "etcd", "", "etcd endpoints, comma-separated (default: an etcd embedded in the process, its data under -dir, for -role all only)")
	str(&c.EtcdRoot, "etcd-root", "/cutline-broker/", "key prefix of everything the cluster keeps in etcd, ending in '/'")
	str(&c.etcdDial.CAFile, "etcd-ca", "", "PEM CA that verifies etcd's server certificate; the connections to etcd are then TLS (default: plain text, unless -etcd names https:// endpoints)")
	str(&c.etcdDial.CertFile, "etcd-cert", "", "PEM client certificate the process presents to etcd")
	str(&c.etcdDial.KeyFile, "etcd-key", "", "PEM private key of -etcd-cert")
	str(&c.etcdDial.Username, "etcd-user", "", "etcd user the process authenticates as")
	str(&c.etcdDial.Password, "etcd-password", "", "password of -etcd-user (prefer CUTLINE_ETCD_PASSWORD; never logged)")
	fs.BoolVar(&c.local.Ephemeral, "ephemeral", false, "keep the metastore in memory and the filesystem zones in a temporary directory, both gone at exit (default: an embedded etcd, and the zones, under -dir)")
	str(&c.local.Listen, "etcd-listen", defaultEtcdListen, "loopback address of the embedded etcd the broker runs without -etcd, where cutline -etcd reaches it")
	str(&c.Dir, "dir", defaultDataDir, "data directory: the filesystem zones, the embedded etcd's data and the credentials made for the run; a broker started again on it goes on where it stopped")
	fs.Var(modeFlag{&c.zoneFileMode}, "zone-file-mode", "permission of the filesystem zones' objects, in octal, before the umask")
	fs.Var(modeFlag{&c.zoneDirMode}, "zone-dir-mode", "permission of the filesystem zones' directories, in octal, before the umask")
	num(&c.K, "k", 3, "number of zones K; with -s3-buckets, their number")
	num(&c.W, "w", 2, "copy quorum W, 1 to K")
	num(&c.Window, "window", 64, fmt.Sprintf("pipeline window, 1 to %d", epoch.MaxWindow))
	list(&c.S3Endpoints, "s3-endpoint", "S3 endpoint URL (path-style addressing), or one per zone, comma-separated (default: filesystem zones)")
	list(&c.S3Buckets, "s3-buckets", "S3 bucket names, one per zone, comma-separated, in zone order")
	str(&c.S3Region, "s3-region", "us-east-1", "S3 region")
	str(&c.S3AccessKey, "s3-access-key", "", "S3 access key")
	str(&c.S3SecretKey, "s3-secret-key", "", "S3 secret key (prefer CUTLINE_S3_SECRET_KEY; never logged)")
	list(&c.azureURLs, "azure-url", "Azure Blob service URL (https://ACCOUNT.blob.core.windows.net/), or one per zone, comma-separated (default: no Azure zones)")
	list(&c.azureContainers, "azure-containers", "Azure containers, one per zone, comma-separated, in zone order")
	str(&c.azureAccount, "azure-account", "", "Azure storage account of -azure-key")
	str(&c.azureKey, "azure-key", "", "Azure storage account key, base64 (prefer CUTLINE_AZURE_KEY; never logged; none: a SAS in -azure-url)")
	dur(&c.latency, "latency", 0, "latency injected before every zone request (objstore/latency), a model of remote zones: 20ms, say (default: none)")
	gcs := fs.String("gcs-buckets", "", "GCS zones: not supported by this example")
	str(&c.tlsCert, "tls-cert", "", "PEM certificate of this process: the API's server certificate, and its identity to the controller or its nodes")
	str(&c.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	str(&c.tlsCA, "tls-ca", "", "PEM CA that verifies the control plane's peers (mutual TLS between the controller and its nodes)")
	str(&c.authTokenFile, "auth-token-file", "", "file holding the bearer token the API requires")
	fs.BoolVar(&c.insecure, "insecure", false, "serve the API without TLS and without a token unless they are given (logs a warning)")
	dur(&c.lease, "lease", authority.DefaultLease, "how long a grant outlives the holder's last heartbeat")
	dur(&c.heartbeat, "heartbeat", time.Second, "how often the holder heartbeats, well below -lease")
	dur(&c.sessionTTL, "session-ttl", 5*time.Second, "TTL of the metastore sessions (stars, controller election)")
	fs.Int64Var(&c.maxRecord, "max-record", DefaultMaxRecord, "largest record a produce takes, in bytes")
	num(&c.producers.Producers, "producers", batch.DefaultDedupProducers, fmt.Sprintf("producers whose retries each stream recognizes, 1 to %d; the least recently active expire first", batch.MaxDedupProducers))
	fs.Uint64Var(&c.producers.Window, "producer-window", batch.DefaultDedupWindow, fmt.Sprintf("how far below its highest sequence a producer's retries are recognized, 1 to %d; older ones are refused (409)", batch.MaxDedupWindow))
	num(&c.streams.SnapshotEvery, "snapshot-every", batch.DefaultSnapshotEvery, "records of a stream between saves of its producer snapshot (0: none by count)")
	dur(&c.streams.SnapshotInterval, "snapshot-interval", batch.DefaultSnapshotInterval, "time between saves of a stream's producer snapshot when records came (0: none by time)")
	lc := &c.lifecycle
	dur(&lc.Interval, "compact-interval", settle.DefaultMaintainInterval, fmt.Sprintf("time between the holder's passes that apply retention, compact flights into per-stream segments, trim them and collect garbage, %v to %v (0: none; the zones and the index then keep every flight and ref)", settle.MinMaintainInterval, settle.MaxMaintainInterval))
	dur(&lc.Policy.MaxAge, "retention-age", 0, "drop a stream's records once they joined the index longer ago than this, a ref page (64 records) at a time, 1m to 100 years (0: no limit by age)")
	fs.Int64Var(&lc.Policy.MaxBytes, "retention-bytes", 0, "keep at most this many bytes of each stream's records, the newest, 1 KiB or more (0: no limit by size)")
	fs.Uint64Var(&lc.Policy.MaxRecords, "retention-records", 0, "keep at most this many of each stream's records, the newest (0: no limit by count)")
	dur(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight and the streams' departures")
	fs.BoolVar(&c.logJSON, "log-json", false, "log JSON lines instead of text")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
	set, err := cliflags.Parse(fs, args)
	if err != nil {
		return nil, err
	}
	if err := cliflags.Env(fs, set, "CUTLINE_", getenv); err != nil {
		return nil, err
	}
	if *peers != "" {
		if c.peers, err = parsePeers(*peers); err != nil {
			return nil, err
		}
	}
	// The S3 credentials and region come from the AWS environment when
	// the flags (or their variables) do not give them.
	if len(c.S3Endpoints) > 0 && !set["s3-access-key"] && !set["s3-secret-key"] {
		c.S3AccessKey, c.S3SecretKey = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	}
	if r := getenv("AWS_REGION"); len(c.S3Endpoints) > 0 && r != "" && !set["s3-region"] {
		c.S3Region = r
	}
	if *gcs != "" {
		return nil, Refuse("gcs-buckets", *gcs, "nothing: GCS zones are not supported by this example (package objstore/gcs is its own module); use filesystem or S3 zones")
	}
	if err := c.check(fs, set); err != nil {
		return nil, err
	}
	return c, nil
}

// check refuses flags that do not go together, and values out of bounds.
func (c *Settings) check(fs *flag.FlagSet, set map[string]bool) error {
	for name, v := range map[string]string{"node": c.node, "domain": c.domain} {
		if epoch.ValidateName(name, v) != nil {
			return Refuse(name, v, "a name of [A-Za-z0-9._-]")
		}
	}
	switch c.Role {
	case RoleAll:
		if c.controllerURL != "" {
			return Refuse("controller", c.controllerURL, "nothing with -role all, which runs its own controller; use -role broker")
		}
	case roleBroker:
		if u, err := url.Parse(c.controllerURL); err != nil || u.Scheme != "https" || u.Host == "" {
			return Refuse("controller", c.controllerURL, "the controller's https:// URL with -role broker")
		}
		// Every node's certificate chains to the same CA: without a name
		// to check, any node could pose as the controller and send it
		// revocations and releases.
		if err := epoch.ValidateName("controller-identity", c.controllerID); err != nil {
			return Refuse("controller-identity", c.controllerID, "the controller's node name, as its certificate carries it, with -role broker")
		}
	case roleController:
		c.controllerListen = cmp.Or(c.controllerListen, "127.0.0.1:8443")
	default:
		return Refuse("role", c.Role, "all, broker or controller")
	}
	switch {
	case len(c.peers) > 0 && c.Role == roleController:
		return Refuse("role", c.Role, "broker or all with -peers: the health links run between brokers")
	case len(c.peers) > 0 && (c.tlsCert == "" || c.tlsCA == ""):
		return errors.New("-peers needs -tls-cert, -tls-key and -tls-ca: the health links are mutual TLS, on the API's listener")
	case c.Role != RoleAll && c.Etcd == "":
		return Refuse("role", c.Role, "-etcd too: the controller and its brokers share one metastore")
	case (c.Role != RoleAll || c.controllerListen != "") && (c.tlsCert == "" || c.tlsKey == "" || c.tlsCA == ""):
		return errors.New("the control plane is mutual TLS: -tls-cert, -tls-key and -tls-ca are required")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return errors.New("-tls-cert and -tls-key go together")
	case c.Etcd != "" && !strings.HasSuffix(c.EtcdRoot, "/"):
		return Refuse("etcd-root", c.EtcdRoot, "a key prefix ending in '/'")
	}
	if err := c.checkLocal(set); err != nil {
		return err
	}
	if err := c.CheckBackends(set); err != nil {
		return err
	}
	lc := c.lifecycle
	for _, b := range []struct {
		name string
		ok   bool
		want string
	}{
		{"zone-file-mode", c.zoneFileMode&0o600 == 0o600, "read and write for the owner at least (0600)"},
		{"zone-dir-mode", c.zoneDirMode&0o700 == 0o700, "read, write and search for the owner at least (0700)"},
		{"lease", c.lease >= 100*time.Millisecond && c.lease <= time.Hour, "100ms to 1h"},
		{"heartbeat", c.heartbeat >= time.Millisecond && c.heartbeat <= c.lease/3, fmt.Sprintf("1ms to a third of -lease (%v)", c.lease/3)},
		{"session-ttl", c.sessionTTL >= time.Second && c.sessionTTL <= time.Minute, "1s to 1m"},
		{"max-record", c.maxRecord >= 1 && c.maxRecord <= 64<<20, "1 byte to 64 MiB"},
		{"max-read-bytes", c.maxReadBytes >= 1<<10 && c.maxReadBytes <= 1<<30, "1 KiB to 1 GiB"},
		{"max-reads", c.maxReads >= 1 && c.maxReads <= 1<<10, "1 to 1024"},
		{"max-streams", c.streams.MaxStreams >= 1 && c.streams.MaxStreams <= batch.MaxAppenderStreams, fmt.Sprintf("1 to %d", batch.MaxAppenderStreams)},
		{"max-conns", c.conns.Total >= 1, "1 or more"},
		{"max-conns-per-addr", c.conns.PerAddr >= 1 && c.conns.PerAddr <= c.conns.Total, fmt.Sprintf("1 to -max-conns (%d)", c.conns.Total)},
		{"shutdown-timeout", c.shutdownTimeout > 0, "more than 0"},
		{"latency", c.latency >= 0 && c.latency <= 10*time.Second, "0 to 10s"},
		{"producers", c.producers.Producers >= 1, fmt.Sprintf("1 to %d", batch.MaxDedupProducers)},
		{"producer-window", c.producers.Window >= 1, fmt.Sprintf("1 to %d", batch.MaxDedupWindow)},
		{"snapshot-every", c.streams.SnapshotEvery >= 0, "0 (none by count) or more records"},
		{"snapshot-interval", c.streams.SnapshotInterval == 0 || c.streams.SnapshotInterval >= batch.MinSnapshotInterval && c.streams.SnapshotInterval <= batch.MaxSnapshotInterval,
			fmt.Sprintf("0 (none by time) or %v to %v", batch.MinSnapshotInterval, batch.MaxSnapshotInterval)},
		{"compact-interval", lc.Interval == 0 || lc.Interval >= settle.MinMaintainInterval && lc.Interval <= settle.MaxMaintainInterval,
			fmt.Sprintf("0 (none) or %v to %v", settle.MinMaintainInterval, settle.MaxMaintainInterval)},
		{"retention-age", lc.Policy.MaxAge == 0 || lc.Policy.MaxAge >= time.Minute && lc.Policy.MaxAge <= maxRetentionAge, fmt.Sprintf("0 (no limit) or 1m to %v", maxRetentionAge)},
		{"retention-bytes", lc.Policy.MaxBytes == 0 || lc.Policy.MaxBytes >= minRetentionBytes, fmt.Sprintf("0 (no limit) or %d bytes or more", minRetentionBytes)},
		{"compact-interval", lc.Interval != 0 || lc.Policy == (settle.Policy{}),
			"more than 0 with -retention-age, -retention-bytes or -retention-records: the holder's passes apply them"},
	} {
		if !b.ok {
			return Refuse(b.name, fs.Lookup(b.name).Value, "%s", b.want)
		}
	}
	if _, err := batch.NewDedup(c.producers); err != nil {
		return &cliflags.UsageError{Err: err}
	}
	if limit, ok := fileLimit(); ok {
		return c.fitDescriptors(limit, set)
	}
	return nil
}

// fitDescriptors keeps the listeners' connections (-max-conns each for
// the API and the controller, a bound of its own for the metrics) within
// a half of the file descriptor limit, leaving the rest to the zones, the
// metastore and the peers: -max-conns given past it is refused, and its
// default is lowered to fit.
func (c *Settings) fitDescriptors(limit uint64, set map[string]bool) error {
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

// fileLimit returns the process's soft limit of open file descriptors
// (Go raises it to the hard one at start), unless unknown or unlimited.
func fileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur >= 1<<62 {
		return 0, false
	}
	return rl.Cur, true
}

// streamOptions is the flags in the appender's terms, where 0 is the
// default and a negative value turns a snapshot trigger off.
func (c *Settings) streamOptions() batch.DedupAppenderOptions {
	o := c.streams
	o.SnapshotEvery, o.SnapshotInterval = cmp.Or(o.SnapshotEvery, -1), cmp.Or(o.SnapshotInterval, -1)
	return o
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

// embedded reports whether the process runs its own metastore and its
// own controller.
func (c *Settings) embedded() bool { return c.Role == RoleAll && c.Etcd == "" }
