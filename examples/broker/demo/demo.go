package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/examples/broker/node"
	"github.com/cutline/cutline/examples/internal/cliflags"
	"github.com/cutline/cutline/examples/internal/selfsigned"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// errDidNotHold is what the demonstration returns when something it
// checks did not hold.
var errDidNotHold = errors.New("demo: did not hold")

const (
	demoDomain = "brokers"
	demoStream = "orders"
	demoNodes  = 3
	// demoPoll is how often a node compares its star with its grant.
	demoPoll = 20 * time.Millisecond
)

func main() { os.Exit(demoMain(os.Args[1:])) }

func demoMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch err := runDemo(ctx, args, os.Stdout, os.Stderr); {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case cliflags.IsUsage(err):
		// A bad flag broke no guarantee: it is not a failed run.
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 2
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		return 1
	}
	return 0
}

// runDemo runs the demonstration with the flags in args, printing to out
// (and the brokers' logs to logs with -logs). It returns an error if
// anything failed or anything it checks did not hold.
func runDemo(ctx context.Context, args []string, out, logs io.Writer) error {
	cfg, err := parseDemoFlags(args, out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	d := &demo{cfg: cfg, out: out, rec: newRecorder(), net: &network{}, byName: map[string]*demoNode{}}
	inner := slog.DiscardHandler
	if cfg.logs {
		inner = slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	d.log = slog.New(d.rec.handler(inner))
	if !cfg.logs && isTerminal(logs) {
		// A progress line is erased with a carriage return: only a
		// terminal shows that; in a file or a pipe it would stay.
		d.rec.progress = logs
	}
	defer d.close()
	err = d.setup(ctx)
	if err == nil {
		err = d.run(ctx)
	}
	d.report()
	return err
}

// demo is one run of the demonstration.
type demo struct {
	cfg    *demoConfig
	out    io.Writer
	log    *slog.Logger
	rec    *recorder
	net    *network
	be     *node.Backends
	dir    string // the credentials of the run
	ctl    *node.Controller
	nodes  []*demoNode
	byName map[string]*demoNode
	prod   *producer
	hc     *http.Client

	watchStop context.CancelFunc
	watchDone chan struct{}

	streamed           bool      // the timeline went out as it happened
	t0                 time.Time // the failure
	zombie, successor  *demoNode
	verdict            string
	findings, problems []string
}

// demoNode is a broker node of the demonstration, its API and its links.
type demoNode struct {
	*node.Node
	name    string
	url     string
	srv     *http.Server
	store   *storeLink
	zones   []*zoneLink
	started bool
	stopped bool
}

// setup opens the backends, makes the run's credentials, and starts the
// controller, the nodes' APIs and the watch of the grant; it starts no
// node.
func (d *demo) setup(ctx context.Context) error {
	cfg := d.cfg
	var err error
	if d.be, err = node.OpenBackends(ctx, &cfg.be, d.log); err != nil {
		return err
	}
	if d.dir, err = os.MkdirTemp("", "cutline-demo-"); err != nil {
		return err
	}
	cert, token, err := selfsigned.Make(d.dir, "demo")
	if err != nil {
		return err
	}
	sec := &node.Security{Cert: cert, Token: token}
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 2 * cfg.inflight}
	d.hc = &http.Client{Transport: tr}

	suspend := func(s metastore.Session) {
		// Close with an ended context stops the keep-alives and sends no
		// revocation: etcd expires the session one TTL later.
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Close(ended)
	}
	if ms, ok := d.be.Store.(*memstore.Store); ok {
		suspend = ms.Suspend
	}
	d.ctl, err = node.StartController(node.ControllerConfig{Name: "controller", Domain: demoDomain, Store: d.be.Store,
		Lease: authority.DefaultLease, SessionTTL: cfg.sessionTTL, Logger: d.log})
	if err != nil {
		return err
	}
	if err := d.watchGrant(ctx); err != nil {
		return err
	}
	urls := map[string]string{}
	var names []string
	for i := range demoNodes {
		name := fmt.Sprintf("broker-%d", i+1)
		dn := &demoNode{name: name, store: &storeLink{Store: d.be.Store, suspend: suspend,
			cut: func() bool { return d.net.isCut(name, partStore) }}}
		buckets := make([]objstore.Bucket, len(d.be.Zones))
		for j, z := range d.be.Zones {
			if cfg.latency > 0 {
				z = latency.Wrap(z, latency.Options{Seed: cfg.seed + uint64(100*i+j), Default: latency.Uniform(cfg.latency/2, cfg.latency*3/2)})
			}
			dn.zones = append(dn.zones, newZoneLink(ctx, z))
			buckets[j] = dn.zones[j]
		}
		dn.Node, err = node.NewNode(node.NodeConfig{
			Name: name, Domain: demoDomain, Store: dn.store, Buckets: buckets,
			Constants: epoch.Constants{Class: "standard", W: cfg.be.W, Window: cfg.be.Window, Prefix: cfg.keyPrefix},
			Dial: func(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
				if d.net.isCut(node, partControl) {
					return nil, errCutOff
				}
				conn, err := d.ctl.Local.Dial(node, caps, token)
				if err != nil {
					return nil, err
				}
				return newCtrlConn(conn, func() bool { return d.net.isCut(node, partControl) }), nil
			},
			SessionTTL: cfg.sessionTTL, HeartbeatEvery: time.Second, DecisionDelay: authority.DefaultDecisionDelay,
			Poll: demoPoll, Pinger: d.pinger(name), Logger: d.log,
			Producers: cfg.producerLimits(i), Streams: cfg.streamOptions(),
			// The last act runs the holder's lifecycle passes (compaction).
			Lifecycle: node.LifecycleConfig{Interval: -1},
		})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		dn.url = "https://" + ln.Addr().String()
		dn.srv = &http.Server{Handler: node.NewServer(dn.Node, node.ServerOptions{Token: token, Logger: d.log}), TLSConfig: sec.APITLS(),
			ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelWarn)}
		go func() { _ = dn.srv.ServeTLS(ln, "", "") }()
		d.nodes = append(d.nodes, dn)
		d.byName[name], urls[name] = dn, dn.url
		names = append(names, name)
	}
	d.prod = newProducer(d.hc, string(token), demoStream, names, urls)
	return nil
}

// pinger is node from's direct health links, in process: what
// authhttp.Pinger and the health route do over mutual TLS. A ping
// completes when neither end is cut off and the peer's links are bound
// to the token the ping names.
func (d *demo) pinger(from string) func(ctx context.Context, peer string, token authority.Token) error {
	return func(_ context.Context, peer string, token authority.Token) error {
		p := d.byName[peer]
		switch {
		case d.net.isCut(from, partPeers) || d.net.isCut(peer, partPeers):
			return errCutOff
		case p == nil:
			return fmt.Errorf("no node %q", peer)
		case p.HealthToken() != token:
			return fmt.Errorf("%s: links bound to token %d, not %d", peer, p.HealthToken(), token)
		}
		return nil
	}
}

// watchGrant records every durable change of the domain's grant, as the
// controller writes it to the metastore.
func (d *demo) watchGrant(ctx context.Context) error {
	key := "authority/" + demoDomain + "/state"
	_, rev, err := d.be.Store.List(ctx, key)
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	d.watchStop, d.watchDone = stop, make(chan struct{})
	go func() {
		defer close(d.watchDone)
		for ev, err := range d.be.Store.Watch(wctx, key, rev+1) {
			if err != nil {
				return
			}
			var st authority.StateRecord
			if ev.Type != metastore.EventPut || json.Unmarshal(ev.KV.Value, &st) != nil {
				continue
			}
			d.rec.add(event{at: time.Now(), who: "controller", msg: "grant state", grant: &st})
		}
	}()
	return nil
}

// start starts a node.
func (d *demo) start(n *demoNode) {
	n.Start()
	n.started = true
}

// stop shuts a node down as SIGTERM does: its star closes (every held
// stream leaves through Finish with its clean-release mark), it says
// goodbye to the controller, its API stops.
func (d *demo) stop(ctx context.Context, n *demoNode) error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	// The producer's idle connections first: the server waits for a
	// connection that never carried a request.
	d.hc.CloseIdleConnections()
	err := n.srv.Shutdown(ctx)
	if n.started {
		err = errors.Join(err, n.Shutdown(ctx))
	}
	return err
}

// close releases everything the run holds.
func (d *demo) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range d.nodes {
		d.net.set(n.name, partControl|partPeers|partStore, false)
		for _, l := range n.zones {
			_, _, _ = l.release(ctx)
		}
		_ = d.stop(ctx, n)
	}
	if d.watchStop != nil {
		d.watchStop()
		<-d.watchDone
	}
	d.ctl.Stop()
	if d.hc != nil {
		d.hc.CloseIdleConnections()
	}
	d.be.Close()
	if d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
}

// run is the story, from the first grant to the verification.
func (d *demo) run(ctx context.Context) error {
	cfg, rec, p := d.cfg, d.rec, d.prod
	d.header()
	fmt.Fprintf(d.out, "timeline, as it happens (seconds from the start):\n")
	rec.streamTo(d.out, time.Now(), demoStream)
	d.streamed = true
	first := d.nodes[0]
	d.start(first)
	if _, err := rec.wait(ctx, first.name+"'s star", logged(first.name, "star started")); err != nil {
		return err
	}
	for _, n := range d.nodes[1:] {
		d.start(n)
	}

	// The producer's load, before the failure.
	start := time.Now()
	p.start(ctx, seqRange(0, uint64(cfg.crashAfter)), cfg.inflight)
	if err := p.wait(); err != nil {
		return err
	}
	for seq, a := range p.acknowledgements() {
		if a.peer != first.name {
			return fmt.Errorf("%w: record %d was acknowledged by %s, not by the holder %s", errDidNotHold, seq, a.peer, first.name)
		}
	}
	if cfg.crashAfter > 0 {
		rec.note(time.Now(), "producer", "%d records acknowledged by %s over HTTP, offsets 0–%d (%v)",
			cfg.crashAfter, first.name, cfg.crashAfter-1, time.Since(start).Round(time.Millisecond))
	}
	if err := d.waitLinks(ctx, first); err != nil {
		return err
	}

	// The holder loses all zones but W−1, with appends in flight.
	h, err := d.holding(ctx, first)
	if err != nil {
		return err
	}
	ep, from, n := h.Star.Epoch().Epoch, h.Star.Stats().Submitted, uint64(cfg.inflight)
	keys := wire.Keys{Prefix: cfg.keyPrefix}
	keep := cfg.be.W - 1
	hole := from // the first in-flight slot that reaches no zone at all
	if keep > 0 {
		hole = from + n*2/5
	}
	lost := d.be.Zones[:cfg.be.K-keep]
	var inflight []string
	for s := from; s < from+n; s++ {
		inflight = append(inflight, keys.Slot(first.name, ep, s))
	}
	for i, l := range first.zones {
		if i < len(lost) {
			l.hold(func(op, key string) bool {
				s, ok := keys.ParseSlot(first.name, ep, key)
				return op != "create" || (ok && s >= from)
			})
		} else {
			l.hold(func(op, key string) bool { return op == "create" && key == inflight[hole-from] })
		}
	}
	rec.note(time.Now(), "network", "%s loses %s: its requests there are held back", first.name, zoneList(lost))
	p.start(ctx, seqRange(uint64(cfg.crashAfter), uint64(cfg.crashAfter)+n), int(n))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, l := range first.zones {
		if err := l.waitSeen(wctx, inflight); err != nil {
			return err
		}
	}
	line := fmt.Sprintf("%d appends in flight (slots %s): ", n, span(from, from+n-1))
	if keep > 0 {
		line += fmt.Sprintf("each reached %s only, %d of W=%d copies; slot %d reached no zone", zoneList(d.be.Zones[len(lost):]), keep, cfg.be.W, hole)
	} else {
		line += "none reached a zone"
	}
	rec.note(time.Now(), first.name, "%s", line)

	// The failure.
	d.zombie, d.t0 = first, time.Now()
	d.net.set(first.name, partControl|partPeers|partStore, true)
	first.store.cutSessions()
	rec.note(d.t0, first.name, "FAILS: cut off from the controller, its peers and the metastore (its session gets no keep-alives); its held-back PUTs wait in the network")
	p.start(ctx, seqRange(uint64(cfg.crashAfter)+n, uint64(cfg.records)), cfg.inflight)

	// The others detect it; the controller grants a successor.
	ev, err := rec.wait(ctx, "a successor's grant", func(e event) bool {
		return e.grant != nil && e.grant.Phase == authority.Granted && e.grant.Holder != first.name
	})
	if err != nil {
		return err
	}
	d.successor = d.byName[ev.grant.Holder]
	at, err := p.waitAck(ctx, d.successor.name)
	if err != nil {
		return err
	}
	rec.note(at, "producer", "first acknowledgement by %s", d.successor.name)
	if rb, ok := d.successor.LastRebuild(demoStream); ok {
		d.findings = append(d.findings, describeRebuild(rb, d.successor.name))
	}

	if err := d.release(ctx, keys, ep, hole, from+n); err != nil {
		return err
	}
	if err := p.wait(); err != nil {
		return err
	}
	rec.note(time.Now(), "producer", "all %d records acknowledged", cfg.records)
	ans := p.answersOf(first.name, d.t0)
	if ans[http.StatusOK] > 0 {
		return fmt.Errorf("%w: the failed holder %s acknowledged %d produces after it failed", errDidNotHold, first.name, ans[http.StatusOK])
	}
	d.findings = append(d.findings, fmt.Sprintf("%s answered %d produces after it failed, none with an acknowledgement (by status: %s)",
		first.name, total(ans), byStatus(ans)))
	holder, err := d.handoff(ctx)
	if err != nil {
		return err
	}
	if err := d.compaction(ctx, holder); err != nil {
		return err
	}
	return d.verify(ctx)
}

// holding returns the star n runs under its grant, once it runs.
func (d *demo) holding(ctx context.Context, n *demoNode) (*node.Holding, error) {
	tick := time.NewTicker(demoPoll)
	defer tick.Stop()
	for {
		if h := n.Current(); h != nil {
			return h, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s's star: %w", n.name, ctx.Err())
		}
	}
}

// waitLinks waits until every direct health link of the holder's grant
// completed a round trip: the voters' concerns count only then.
func (d *demo) waitLinks(ctx context.Context, holder *demoNode) error {
	for _, n := range d.nodes {
		if n == holder {
			continue
		}
		for _, pair := range [][2]string{{holder.name, n.name}, {n.name, holder.name}} {
			if _, err := d.rec.wait(ctx, "the health link "+pair[0]+" → "+pair[1], func(e event) bool {
				return e.who == pair[0] && e.msg == "authority: health link up" && e.attrs["peer"] == pair[1]
			}); err != nil {
				return err
			}
		}
	}
	d.rec.note(time.Now(), "network", "every health link of %s's grant is up", holder.name)
	return nil
}

// release lets the failed holder back as a zombie: its held-back PUTs
// land, its control channel comes back (it learns its grant is gone),
// then its metastore and its peers. A produce sent to it now is refused.
func (d *demo) release(ctx context.Context, keys wire.Keys, ep, hole, end uint64) error {
	z, rec := d.zombie, d.rec
	var created, refused int
	for _, l := range z.zones {
		c, r, err := l.release(ctx)
		if err != nil {
			return err
		}
		created, refused = created+c, refused+r
	}
	rec.note(time.Now(), "network", "%s comes back, a zombie: its %d held-back PUTs land: %d created, %d refused (poison, a repair copy)",
		z.name, created+refused, created, refused)
	// What the zones hold at the cut and past it now.
	minter, err := epoch.NewMinter(d.be.Store, epoch.Options{})
	if err != nil {
		return err
	}
	er, err := minter.Get(ctx, z.name, ep)
	if err != nil {
		return err
	}
	if er.State != epoch.StateSettled || er.Cut != hole {
		return fmt.Errorf("%w: %s/%d is %s with cut %d; want settled at cut %d, the first slot no zone held", errDidNotHold, z.name, ep, er.State, er.Cut, hole)
	}
	poison, complete := 0, 0
	for s := er.Cut; s < end; s++ {
		flights := 0
		for _, zone := range d.be.Zones {
			switch wire.ObserveHeader(ctx, zone, wire.Addr{Keys: keys, Star: z.name, Epoch: ep, Slot: s}).State {
			case wire.SlotFlight:
				flights++
			case wire.SlotPoison:
				if s == er.Cut {
					poison++
				}
			}
		}
		if s > er.Cut && flights >= d.cfg.be.W {
			complete++
		}
	}
	zones, err := chain.NewZones(d.be.Zones...)
	if err != nil {
		return err
	}
	reader, err := chain.NewReader(minter, zones, chain.ReaderOptions{})
	if err != nil {
		return err
	}
	if _, err := reader.Read(ctx, z.name, chain.Position{Epoch: ep, Slot: er.Cut + 1}); !errors.Is(err, chain.ErrNotCommitted) {
		return fmt.Errorf("%w: read %s/%d/%d past the cut: %v, want %v", errDidNotHold, z.name, ep, er.Cut+1, err, chain.ErrNotCommitted)
	}
	rec.note(time.Now(), "network", "the cut slot %d holds poison in %d zones: dead for good; %d slots past it hold the zombie's flight in W zones, yet none is served (%v)",
		er.Cut, poison, complete, chain.ErrNotCommitted)

	d.net.set(z.name, partControl, false)
	if _, err := rec.wait(ctx, z.name+" learning its grant is gone", logged(z.name, "grant lost")); err != nil {
		return err
	}
	d.net.set(z.name, partPeers|partStore, false)
	code, _, e, err := d.prod.post(ctx, z.name, "zombie-probe", 0, []byte("a produce to the zombie"))
	switch {
	case err != nil:
		return err
	case code == http.StatusOK:
		return fmt.Errorf("%w: the zombie %s acknowledged a produce", errDidNotHold, z.name)
	}
	rec.note(time.Now(), z.name, "answers a produce %d: %s; the holder is %q", code, e.Error, e.Holder)
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
