package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease/authority"
	"github.com/cutline/cutline/lease/authority/authhttp"
	"github.com/cutline/cutline/objstore"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "demo" {
		os.Exit(demoMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// run is the whole program: parse, start, serve until SIGTERM or SIGINT,
// shut down. It returns the exit status.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "broker:", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, err := start(ctx, cfg, log)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	status := 0
	select {
	case <-ctx.Done():
		log.Info("signal received: shutting down")
	case err := <-p.serve():
		log.Error("server failed: shutting down", "err", err)
		status = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := p.shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("shut down", "status", status)
	return status
}

// settings are what the flags say.
type settings struct {
	role             string // all, broker or controller
	node, domain     string
	listen           string
	controllerURL    string
	controllerListen string
	operators        []string
	// peers maps the name of every broker of the cluster to the base URL
	// of its API (-peers): the broker runs direct health links with them
	// and votes. Empty: no links, no vote.
	peers map[string]string

	etcd, etcdRoot string
	dir            string
	k, w, window   int
	s3Endpoints    []string
	s3Buckets      []string
	s3Region       string
	s3AccessKey    string
	s3SecretKey    string
	latency        time.Duration

	tlsCert, tlsKey, tlsCA string
	authTokenFile          string
	insecure               bool

	lease, heartbeat, sessionTTL time.Duration
	decisionDelay, poll          time.Duration
	openWait, shutdownTimeout    time.Duration
	maxRecord                    int64
	// producers bounds each stream's producer table; snapshots times the
	// saves of it that a new holder replays from (as the flags say: 0
	// turns a trigger off).
	producers producerLimits
	snapshots snapshotTiming
	logJSON   bool
	logLevel  slog.Level
}

// Roles of a process.
const (
	roleAll        = "all"        // the controller and one broker node, connected in process
	roleBroker     = "broker"     // a broker node of a controller elsewhere (-controller)
	roleController = "controller" // only the controller, served over mutual TLS
)

// flagError refuses the value of one flag, saying what it allows.
type flagError struct {
	Flag, Value, Want string
}

func (e *flagError) Error() string { return fmt.Sprintf("-%s %s: want %s", e.Flag, e.Value, e.Want) }

func refuse(name string, value any, format string, args ...any) error {
	return &flagError{Flag: name, Value: fmt.Sprint(value), Want: fmt.Sprintf(format, args...)}
}

// parseArgs parses args with fs, refuses positional arguments, and
// returns the names of the flags given.
func parseArgs(fs *flag.FlagSet, args []string) (map[string]bool, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set, nil
}

// parseFlags reads the flags, and for every flag not given the
// environment variable CUTLINE_<NAME> (upper case, '-' as '_'): -etcd is
// CUTLINE_ETCD, -s3-secret-key CUTLINE_S3_SECRET_KEY.
func parseFlags(args []string, getenv func(string) string, out io.Writer) (*settings, error) {
	c := &settings{}
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: broker [flags]\n       broker demo [flags]   the takeover demonstration (demo -h lists its flags)\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.role, "role", roleAll, "all (the controller and one broker in this process), broker (a node of the controller at -controller) or controller (only the controller, on -controller-listen)")
	fs.StringVar(&c.node, "node", "broker-1", "this broker's node name, and the star it writes as ([A-Za-z0-9._-]); with -controller, the name in its certificate")
	fs.StringVar(&c.domain, "domain", "brokers", "the authority domain of the broker cluster: one grant for all its streams")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address of the HTTP API and /metrics")
	fs.StringVar(&c.controllerURL, "controller", "", "the controller's URL (https://host:port) for -role broker")
	fs.StringVar(&c.controllerListen, "controller-listen", "", "address the controller serves its nodes on, over mutual TLS (-role controller: default 127.0.0.1:8443; -role all: off unless given)")
	operators := fs.String("operators", "", "identities (certificate names) allowed to request a handoff from the controller, comma-separated")
	peers := fs.String("peers", "", "every broker of the cluster as name=https://host:port (the base URL of its API), comma-separated: this broker runs direct health links with them and votes in the controller's fast fence (default: no links, no vote)")
	fs.StringVar(&c.etcd, "etcd", "", "etcd endpoints, comma-separated (default: an in-memory metastore, for -role all only)")
	fs.StringVar(&c.etcdRoot, "etcd-root", "/cutline-broker/", "key prefix of everything the cluster keeps in etcd, ending in '/'")
	fs.StringVar(&c.dir, "dir", "", "directory of the filesystem zones (default: a temporary directory, removed at exit)")
	fs.IntVar(&c.k, "k", 3, "number of zones K; with -s3-buckets, their number")
	fs.IntVar(&c.w, "w", 2, "copy quorum W, 1 to K")
	fs.IntVar(&c.window, "window", 64, fmt.Sprintf("pipeline window, 1 to %d", epoch.MaxWindow))
	endpoints := fs.String("s3-endpoint", "", "S3 endpoint URL (path-style addressing), or one per zone, comma-separated (default: filesystem zones)")
	buckets := fs.String("s3-buckets", "", "S3 bucket names, one per zone, comma-separated, in zone order")
	fs.StringVar(&c.s3Region, "s3-region", "us-east-1", "S3 region")
	fs.StringVar(&c.s3AccessKey, "s3-access-key", "", "S3 access key")
	fs.StringVar(&c.s3SecretKey, "s3-secret-key", "", "S3 secret key (prefer CUTLINE_S3_SECRET_KEY; never logged)")
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
	fs.IntVar(&c.producers.Max, "producers", defaultProducers, fmt.Sprintf("producers whose retries each stream recognizes, 1 to %d; the least recently active expire first", maxProducers))
	var window uint
	fs.UintVar(&window, "producer-window", defaultProducerWindow, fmt.Sprintf("how far below its highest sequence a producer's retries are recognized, 1 to %d; older ones are refused (409)", maxProducerWindow))
	fs.IntVar(&c.snapshots.Every, "snapshot-every", defaultSnapshotEvery, "records of a stream between saves of its producer snapshot (0: none by count)")
	fs.DurationVar(&c.snapshots.Interval, "snapshot-interval", defaultSnapshotPeriod, "time between saves of a stream's producer snapshot when records came (0: none by time)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight and the streams' departures")
	fs.BoolVar(&c.logJSON, "log-json", false, "log JSON lines instead of text")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	set, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "CUTLINE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && !set[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s: %w", env, err)
			}
			set[f.Name] = true
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	c.decisionDelay, c.poll, c.openWait = authority.DefaultDecisionDelay, 50*time.Millisecond, 10*time.Second
	c.producers.Window = uint64(window)
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, refuse("log-level", *level, "debug, info, warn or error")
	}
	if *operators != "" {
		c.operators = strings.Split(*operators, ",")
	}
	if *peers != "" {
		var err error
		if c.peers, err = parsePeers(*peers); err != nil {
			return nil, err
		}
	}
	if *buckets != "" {
		c.s3Buckets = strings.Split(*buckets, ",")
	}
	if *endpoints != "" {
		c.s3Endpoints = strings.Split(*endpoints, ",")
	}
	awsEnv(c, getenv, set)
	if *gcs != "" {
		return nil, refuse("gcs-buckets", *gcs, "nothing: GCS zones are not supported by this example (package objstore/gcs is its own module); use filesystem or S3 zones")
	}
	if err := c.check(set); err != nil {
		return nil, err
	}
	return c, nil
}

// check refuses flags that do not go together.
func (c *settings) check(set map[string]bool) error {
	if err := epoch.ValidateName("node", c.node); err != nil {
		return refuse("node", c.node, "a name of [A-Za-z0-9._-]")
	}
	if err := epoch.ValidateName("domain", c.domain); err != nil {
		return refuse("domain", c.domain, "a name of [A-Za-z0-9._-]")
	}
	switch c.role {
	case roleAll:
		if c.controllerURL != "" {
			return refuse("controller", c.controllerURL, "nothing with -role all, which runs its own controller; use -role broker")
		}
	case roleBroker:
		u, err := url.Parse(c.controllerURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return refuse("controller", c.controllerURL, "the controller's https:// URL with -role broker")
		}
	case roleController:
		if c.controllerListen == "" {
			c.controllerListen = "127.0.0.1:8443"
		}
	default:
		return refuse("role", c.role, "all, broker or controller")
	}
	if len(c.peers) > 0 && c.role == roleController {
		return refuse("role", c.role, "broker or all with -peers: the health links run between brokers")
	}
	if len(c.peers) > 0 && (c.tlsCert == "" || c.tlsCA == "") {
		return errors.New("-peers needs -tls-cert, -tls-key and -tls-ca: the health links are mutual TLS, on the API's listener")
	}
	if c.role != roleAll && c.etcd == "" {
		return refuse("role", c.role, "-etcd too: the controller and its brokers share one metastore")
	}
	if (c.role != roleAll || c.controllerListen != "") && (c.tlsCert == "" || c.tlsKey == "" || c.tlsCA == "") {
		return errors.New("the control plane is mutual TLS: -tls-cert, -tls-key and -tls-ca are required")
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	if c.etcd != "" && !strings.HasSuffix(c.etcdRoot, "/") {
		return refuse("etcd-root", c.etcdRoot, "a key prefix ending in '/'")
	}
	if err := c.checkBackends(set); err != nil {
		return err
	}
	switch {
	case c.lease < 100*time.Millisecond || c.lease > time.Hour:
		return refuse("lease", c.lease, "100ms to 1h")
	case c.heartbeat < time.Millisecond || c.heartbeat > c.lease/3:
		return refuse("heartbeat", c.heartbeat, "1ms to a third of -lease (%v)", c.lease/3)
	case c.sessionTTL < time.Second || c.sessionTTL > time.Minute:
		return refuse("session-ttl", c.sessionTTL, "1s to 1m")
	case c.maxRecord < 1 || c.maxRecord > 64<<20:
		return refuse("max-record", c.maxRecord, "1 byte to 64 MiB")
	case c.shutdownTimeout <= 0:
		return refuse("shutdown-timeout", c.shutdownTimeout, "more than 0")
	case c.latency < 0 || c.latency > 10*time.Second:
		return refuse("latency", c.latency, "0 to 10s")
	case c.producers.Max < 1:
		return refuse("producers", c.producers.Max, "1 to %d", maxProducers)
	case c.producers.Window < 1:
		return refuse("producer-window", c.producers.Window, "1 to %d", maxProducerWindow)
	case c.snapshots.Every < 0:
		return refuse("snapshot-every", c.snapshots.Every, "0 (none by count) or more records")
	case c.snapshots.Interval < 0:
		return refuse("snapshot-interval", c.snapshots.Interval, "0 (none by time) or more")
	}
	if err := c.producers.validate(); err != nil {
		return err
	}
	return nil
}

// snapshotTiming is -snapshot-every and -snapshot-interval in the node's
// terms, where 0 is the default and a negative value turns a trigger off.
func (c *settings) snapshotTiming() snapshotTiming {
	t := c.snapshots
	if t.Every == 0 {
		t.Every = -1
	}
	if t.Interval == 0 {
		t.Interval = -1
	}
	return t
}

// checkBackends refuses backend flags that do not go together: -etcd,
// the zones (-k, or the S3 flags), -w and -window. The demo shares it.
func (c *settings) checkBackends(set map[string]bool) error {
	if c.etcd != "" && strings.Contains(","+c.etcd+",", ",,") {
		return refuse("etcd", c.etcd, "endpoints separated by single commas, none empty")
	}
	if len(c.s3Endpoints) > 0 {
		switch {
		case len(c.s3Buckets) == 0:
			return errors.New("-s3-endpoint needs -s3-buckets, one bucket per zone")
		case len(c.s3Endpoints) > 1 && len(c.s3Endpoints) != len(c.s3Buckets):
			return fmt.Errorf("%d endpoints in -s3-endpoint for %d buckets: give one endpoint, or one per bucket", len(c.s3Endpoints), len(c.s3Buckets))
		}
		if err := checkStores(c.s3Endpoints, c.s3Buckets); err != nil {
			return err
		}
		if set["k"] && c.k != len(c.s3Buckets) {
			return refuse("k", c.k, "%d, the number of buckets in -s3-buckets", len(c.s3Buckets))
		}
		c.k = len(c.s3Buckets)
	} else if len(c.s3Buckets) > 0 || c.s3AccessKey != "" || c.s3SecretKey != "" {
		return errors.New("-s3-buckets and the S3 keys need -s3-endpoint")
	}
	switch {
	case c.k < 1 || c.k > maxZones:
		return refuse("k", c.k, "1 to %d zones", maxZones)
	case c.w < 1 || c.w > c.k:
		return refuse("w", c.w, "1 ≤ W ≤ K=%d", c.k)
	case c.window < 1 || c.window > epoch.MaxWindow:
		return refuse("window", c.window, "1 to %d", epoch.MaxWindow)
	}
	return nil
}

// awsEnv takes the S3 credentials and region from the standard AWS
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION) when
// the zones are S3 buckets and neither the flags nor their CUTLINE_
// variables give them.
func awsEnv(c *settings, getenv func(string) string, set map[string]bool) {
	if len(c.s3Endpoints) == 0 {
		return
	}
	if !set["s3-access-key"] && !set["s3-secret-key"] {
		c.s3AccessKey, c.s3SecretKey = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	}
	if r := getenv("AWS_REGION"); r != "" && !set["s3-region"] {
		c.s3Region = r
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
			return nil, refuse("peers", item, "name=https://host:port, the name of [A-Za-z0-9._-]")
		case err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || u.Fragment != "":
			return nil, refuse("peers", item, "name=https://host:port, the base URL of that broker's API")
		case out[name] != "":
			return nil, refuse("peers", name, "each broker once")
		}
		out[name] = raw
	}
	return out, nil
}

// embedded reports whether the process runs on everything it makes
// itself: the in-memory metastore, temporary zones, its own controller.
func (c *settings) embedded() bool { return c.role == roleAll && c.etcd == "" }

func newLogger(c *settings, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// process is one running broker process: what its role runs.
type process struct {
	cfg  *settings
	log  *slog.Logger
	be   *backends
	ctl  *controller // nil for -role broker
	node *node       // nil for -role controller
	api  *server     // nil for -role controller
	sec  *security

	servers []*http.Server
}

// start builds and starts everything the role runs, without listening
// yet (serve listens).
func start(ctx context.Context, cfg *settings, log *slog.Logger) (_ *process, err error) {
	p := &process{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			p.be.close()
		}
	}()
	if p.be, err = openBackends(ctx, cfg, log); err != nil {
		return nil, err
	}
	if p.sec, err = loadSecurity(cfg, p.be.dir, log); err != nil {
		return nil, err
	}
	var dial dialFunc
	if cfg.role != roleBroker {
		p.ctl, err = startController(controllerConfig{
			Name: cfg.node, Domain: cfg.domain, Store: p.be.store, Lease: cfg.lease, SessionTTL: cfg.sessionTTL,
			Serve: cfg.controllerListen != "", Operators: cfg.operators, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		dial = func(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
			return p.ctl.local.Dial(node, caps, token)
		}
	} else {
		var closeIdle func()
		dial, closeIdle = remoteDialer(cfg.controllerURL, p.sec)
		p.be.closers = append(p.be.closers, closeIdle)
	}
	if cfg.role == roleController {
		return p, nil
	}
	var pinger func(context.Context, string, authority.Token) error
	if len(cfg.peers) > 0 {
		var closeIdle func()
		pinger, closeIdle = healthPinger(cfg.peers, p.sec)
		p.be.closers = append(p.be.closers, closeIdle)
		log.Info("health links: this broker votes", "peers", len(cfg.peers))
	}
	p.node, err = newNode(nodeConfig{
		Name: cfg.node, Domain: cfg.domain, Store: p.be.store, Buckets: p.be.zones,
		Constants: epoch.Constants{Class: "standard", W: cfg.w, Window: cfg.window, Prefix: "streams"},
		Dial:      dial, SessionTTL: cfg.sessionTTL, HeartbeatEvery: cfg.heartbeat, DecisionDelay: cfg.decisionDelay,
		OpenWait: cfg.openWait, Poll: cfg.poll, Pinger: pinger, Producers: cfg.producers, Snapshots: cfg.snapshotTiming(), Logger: log,
	})
	if err != nil {
		p.ctl.stop()
		return nil, err
	}
	p.node.start()
	p.api = newServer(p.node, serverOptions{Token: p.sec.token, MaxRecord: cfg.maxRecord, Logger: log})
	return p, nil
}

// dialFunc opens a node's control channel, declaring its capabilities
// and the token of the grant it holds.
type dialFunc func(ctx context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error)

// remoteDialer returns how a node dials the controller served at url,
// over mutual TLS (authhttp), and what closes the client's idle
// connections.
func remoteDialer(url string, sec *security) (dialFunc, func()) {
	tr := &http.Transport{
		TLSClientConfig:       authhttp.ClientTLS(sec.ca, sec.cert),
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}
	hc := &http.Client{Transport: tr}
	return func(ctx context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
		return authhttp.Dial(ctx, url, node, caps, token, hc)
	}, tr.CloseIdleConnections
}

// healthPinger returns the node's Pinger (authority.AgentOptions.Pinger)
// and what closes its idle connections: a ping is one POST to the health
// route of the peer's API at the URL peers gives, over mutual TLS with
// the process's certificate (authhttp.Pinger, which checks that the
// answering certificate names that peer). A ping answers within a ping
// period, or fails.
func healthPinger(peers map[string]string, sec *security) (func(context.Context, string, authority.Token) error, func()) {
	tr := &http.Transport{
		TLSClientConfig:       authhttp.ClientTLS(sec.ca, sec.cert),
		DialContext:           (&net.Dialer{Timeout: authority.PingEvery}).DialContext,
		TLSHandshakeTimeout:   authority.PingEvery,
		ResponseHeaderTimeout: authority.PingEvery,
		IdleConnTimeout:       time.Minute,
	}
	lookup := func(node string) (string, bool) {
		u, ok := peers[node]
		return u, ok
	}
	return authhttp.Pinger(lookup, &http.Client{Transport: tr, Timeout: authority.PingEvery}), tr.CloseIdleConnections
}

// serve listens: the API (over TLS unless -insecure without a
// certificate) and the controller's transport (mutual TLS). The channel
// yields the first server that fails.
func (p *process) serve() <-chan error {
	errc := make(chan error, 2)
	listen := func(addr string, h http.Handler, tc *tls.Config) {
		// The timeouts bound a request (a produce waits at most 30 s);
		// the controller's streams clear them for themselves.
		srv := &http.Server{Addr: addr, Handler: h, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: time.Minute,
			ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn)}
		p.servers = append(p.servers, srv)
		go func() {
			var err error
			if tc != nil {
				err = srv.ListenAndServeTLS("", "")
			} else {
				err = srv.ListenAndServe()
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", addr, err)
			}
		}()
	}
	if p.api != nil {
		listen(p.cfg.listen, p.api, p.sec.apiTLS())
		p.log.Info("API listening", "addr", p.cfg.listen, "tls", p.sec.apiTLS() != nil, "auth", p.sec.token != nil)
	}
	if p.ctl != nil && p.ctl.srv != nil {
		listen(p.cfg.controllerListen, p.ctl.srv, authhttp.ServerTLS(p.sec.ca, p.sec.cert))
		p.servers[len(p.servers)-1].RegisterOnShutdown(p.ctl.srv.Close)
		p.log.Info("controller listening", "addr", p.cfg.controllerListen)
	}
	return errc
}

// shutdown is SIGTERM: the servers stop taking requests and finish those
// in flight; the node closes its star (every held stream leaves through
// Finish with its clean-release mark) and says goodbye; the controller
// resigns; the backends close.
func (p *process) shutdown(ctx context.Context) error {
	var errs []error
	for _, srv := range p.servers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	if p.node != nil {
		errs = append(errs, p.node.shutdown(ctx))
	}
	if p.ctl != nil {
		p.ctl.stop()
	}
	p.be.close()
	return errors.Join(errs...)
}

// verifyZones checks the zones at start-up: each one create-only, and K
// distinct stores.
func verifyZones(ctx context.Context, zones []objstore.Bucket) error {
	for _, b := range zones {
		if err := objstore.Verify(ctx, b); err != nil {
			return err
		}
	}
	return objstore.VerifyDistinct(ctx, zones...)
}
