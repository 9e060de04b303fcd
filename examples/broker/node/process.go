package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/examples/internal/connlimit"
)

// Run is the whole broker program: parse args, start, serve until
// SIGTERM or SIGINT, shut down. It returns the exit status.
func Run(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		fmt.Fprintln(stderr, "broker:", err)
		return 2
	}
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel})
	if cfg.logJSON {
		h = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel})
	}
	log := slog.New(h)
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

// process is one running broker process: what its role runs.
type process struct {
	cfg  *Settings
	log  *slog.Logger
	be   *Backends
	sec  *Security
	ctl  *Controller // nil for -role broker
	node *Node       // nil for -role controller
	api  *server     // nil for -role controller

	servers []*http.Server
	addrs   map[string]net.Addr // by listener: "api", "metrics", "controller"
}

// start builds and starts everything the role runs; serve listens.
func start(ctx context.Context, cfg *Settings, log *slog.Logger) (_ *process, err error) {
	p := &process{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			p.be.Close()
		}
	}()
	if cfg.etcdDial.Username != "" && !cfg.etcdDial.TLS() && !strings.HasPrefix(cfg.Etcd, "https://") {
		log.Warn("the etcd password goes to etcd in plain text: give -etcd-ca (or https:// endpoints)")
	}
	if p.be, err = OpenBackends(ctx, cfg, log); err != nil {
		return nil, err
	}
	if p.sec, err = loadSecurity(cfg, p.be.Dir, log); err != nil {
		return nil, err
	}
	var dial dialFunc
	if cfg.Role != roleBroker {
		p.ctl, err = StartController(ControllerConfig{
			Name: cfg.node, Domain: cfg.domain, Store: p.be.Store, Lease: cfg.lease, SessionTTL: cfg.sessionTTL,
			Serve: cfg.controllerListen != "", Operators: cfg.operators, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		dial = func(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
			return p.ctl.Local.Dial(node, caps, token)
		}
	} else {
		var closeIdle func()
		dial, closeIdle = remoteDialer(cfg.controllerURL, cfg.controllerID, p.sec)
		p.be.closers = append(p.be.closers, closeIdle)
	}
	if cfg.Role == roleController {
		return p, nil
	}
	var pinger func(context.Context, string, authority.Token) error
	if len(cfg.peers) > 0 {
		var closeIdle func()
		pinger, closeIdle = healthPinger(cfg.peers, p.sec)
		p.be.closers = append(p.be.closers, closeIdle)
		log.Info("health links: this broker votes", "peers", len(cfg.peers))
	}
	p.node, err = NewNode(NodeConfig{
		Name: cfg.node, Domain: cfg.domain, Store: p.be.Store, Buckets: p.be.Zones,
		Constants: epoch.Constants{Class: "standard", W: cfg.W, Window: cfg.Window, Prefix: "streams"},
		Dial:      dial, SessionTTL: cfg.sessionTTL, HeartbeatEvery: cfg.heartbeat, DecisionDelay: cfg.decisionDelay,
		Poll: cfg.poll, Pinger: pinger, Producers: cfg.producers, Streams: cfg.streamOptions(),
		Lifecycle: cfg.lifecycleConfig(), Logger: log,
	})
	if err != nil {
		p.ctl.Stop()
		return nil, err
	}
	p.node.Start()
	p.api = NewServer(p.node, ServerOptions{Token: p.sec.Token, MaxRecord: cfg.maxRecord, MaxReadBytes: cfg.maxReadBytes,
		MaxReads: cfg.maxReads, Logger: log})
	return p, nil
}

// dialFunc opens a node's control channel, declaring its capabilities
// and the token of the grant it holds.
type dialFunc func(ctx context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error)

// mutualTLS is a transport that presents the process's certificate and
// verifies the peer's against its CA, within the given timeouts.
func mutualTLS(sec *Security, connect, answer time.Duration) *http.Transport {
	return &http.Transport{TLSClientConfig: authhttp.ClientTLS(sec.ca, sec.Cert), DialContext: (&net.Dialer{Timeout: connect}).DialContext,
		TLSHandshakeTimeout: connect, ResponseHeaderTimeout: answer, IdleConnTimeout: time.Minute}
}

// remoteDialer returns how a node dials the controller served at url
// (authhttp), taking orders only from the certificate that names
// controller, and what closes the client's idle connections.
func remoteDialer(url, controller string, sec *Security) (dialFunc, func()) {
	tr := mutualTLS(sec, 5*time.Second, 10*time.Second)
	d := &authhttp.Dialer{Base: url, Client: &http.Client{Transport: tr}, Controller: controller}
	return d.Dial, tr.CloseIdleConnections
}

// healthPinger returns the node's Pinger and what closes its idle
// connections: a ping is one POST to the health route of the peer's API,
// at the URL peers gives, answered within a ping period (authhttp.Pinger
// checks that the answering certificate names that peer).
func healthPinger(peers map[string]string, sec *Security) (func(context.Context, string, authority.Token) error, func()) {
	tr := mutualTLS(sec, authority.PingEvery, authority.PingEvery)
	lookup := func(node string) (string, bool) { u, ok := peers[node]; return u, ok }
	return authhttp.Pinger(lookup, &http.Client{Transport: tr, Timeout: authority.PingEvery}), tr.CloseIdleConnections
}

// serve listens, each listener within its connection bounds: the API
// (over TLS unless -insecure without a certificate), the metrics (with
// -metrics-listen) and the controller's transport (mutual TLS). The
// channel yields the first server that fails.
func (p *process) serve() <-chan error {
	errc := make(chan error, 3)
	p.addrs = map[string]net.Addr{}
	// listen reports whether it bound: what is logged as listening
	// listens.
	listen := func(name, addr string, lim connlimit.Limits, cnt connlimit.Counter, srv *http.Server) bool {
		ln, err := connlimit.Listen(addr, lim, cnt, srv)
		if err != nil {
			errc <- &listenError{Name: name, Addr: addr, Err: err}
			return false
		}
		p.addrs[name] = ln.Addr()
		p.servers = append(p.servers, srv)
		go func() {
			var err error
			if srv.TLSConfig != nil {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", addr, err)
			}
		}()
		return true
	}
	if p.api != nil && listen("api", p.cfg.listen, p.cfg.conns, p.node.Metrics.connCounter(), connlimit.NewServer(p.api, p.sec.APITLS(), apiTimeouts, p.log)) {
		p.log.Info("API listening", "addr", p.addrs["api"], "tls", p.sec.APITLS() != nil, "auth", p.sec.Token != nil,
			"max_conns", p.cfg.conns.Total, "max_conns_per_addr", p.cfg.conns.PerAddr)
		p.logCommands(p.addrs["api"])
	}
	if p.node != nil && p.cfg.metricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metricsHandler(p.node))
		if listen("metrics", p.cfg.metricsListen, metricsConnLimits, connlimit.Counter{}, connlimit.NewServer(mux, nil, apiTimeouts, p.log)) {
			p.log.Info("metrics listening", "addr", p.addrs["metrics"])
		}
	}
	if p.ctl != nil && p.ctl.srv != nil {
		// The controller's streams clear the request timeouts for
		// themselves; its nodes keep their connections.
		to := connlimit.Timeouts{ReadHeader: apiTimeouts.ReadHeader, Idle: time.Minute, Request: time.Minute}
		srv := connlimit.NewServer(p.ctl.srv, authhttp.ServerTLS(p.sec.ca, p.sec.Cert), to, p.log)
		srv.RegisterOnShutdown(p.ctl.srv.Close)
		if listen("controller", p.cfg.controllerListen, p.cfg.conns, connlimit.Counter{}, srv) {
			p.log.Info("controller listening", "addr", p.addrs["controller"])
		}
	}
	return errc
}

// listenError is a listener that could not bind: the process cannot
// serve, and says which listener.
type listenError struct {
	Name, Addr string
	Err        error
}

func (e *listenError) Error() string {
	return fmt.Sprintf("the %s listener cannot listen on %s: %v", e.Name, e.Addr, e.Err)
}

func (e *listenError) Unwrap() error { return e.Err }

// shutdown is SIGTERM: the servers finish the requests in flight; the
// node closes its star (every held stream leaves with its clean-release
// mark) and says goodbye; the controller resigns; the backends close.
func (p *process) shutdown(ctx context.Context) error {
	var errs []error
	for _, srv := range p.servers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	if p.node != nil {
		errs = append(errs, p.node.Shutdown(ctx))
	}
	if p.ctl != nil {
		p.ctl.Stop()
	}
	p.be.Close()
	return errors.Join(errs...)
}

// The API's connection bounds by default, and the metrics listener's (a
// few scrapers).
const (
	defaultMaxConns        = 1024
	defaultMaxConnsPerAddr = 64
)

var metricsConnLimits = connlimit.Limits{Total: 16, PerAddr: 4}

// The API's timeouts: short, so that an idle connection does not hold a
// descriptor for long; a produce waits at most produceTimeout.
var apiTimeouts = connlimit.Timeouts{ReadHeader: 5 * time.Second, Idle: 5 * time.Second, Request: time.Minute}
