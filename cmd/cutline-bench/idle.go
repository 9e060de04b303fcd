package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/settle"
)

// idleStreams is how many streams the idle lease.Star holds open.
const idleStreams = 3

// keepAliveMethod is the etcd RPC of a session's keep-alives.
const keepAliveMethod = "/etcdserverpb.Lease/LeaseKeepAlive"

// figIdle: a Writer and a Roller (in-memory zones and metastore, counted),
// and a lease.Star holding open streams (in-memory zones, embedded etcd)
// append a window of records, which are acknowledged (and, for the Roller
// and the Star, covered and checkpointed); then nothing is appended for
// the idle period, during which every request they make is counted. All
// three idle at once. The Star's session keep-alives, which a session
// needs to stay alive, are counted apart, on the wire.
func figIdle(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	wmeta := &countingStore{Store: memstore.New(memstore.Options{})}
	m, err := epoch.NewMinter(wmeta, epoch.Options{})
	if err != nil {
		return nil, err
	}
	_, wcounted, wzones := countedZones(0)
	wr, err := newWriter(ctx, m, wzones, window)
	if err != nil {
		return nil, err
	}
	defer func() { _ = wr.Close(ctx) }()
	if _, _, err := pipeline(ctx, wr, make([]byte, payload), pipe{n: window}); err != nil {
		return nil, err
	}
	if _, err := wr.Checkpoint(ctx, window); err != nil {
		return nil, err
	}

	h, err := openRoller(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = h.r.Close(ctx) }()
	if err := h.appendCovered(ctx, window); err != nil {
		return nil, err
	}

	sh, err := openStar(s, cfg.idleTTL)
	if err != nil {
		return nil, err
	}
	defer sh.close(ctx)
	if err := sh.appendAbsorbed(ctx, window); err != nil {
		return nil, err
	}

	// The background creates of decided slots end within a moment.
	time.Sleep(100 * time.Millisecond)
	benchfix.Reset(wcounted)
	wmeta.reset()
	benchfix.Reset(h.counted)
	h.meta.reset()
	benchfix.Reset(sh.counted)
	sh.meta.reset()
	sh.wire.reset()
	select {
	case <-time.After(cfg.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	wo, wm := benchfix.Count(wcounted), wmeta.total()
	ro, rm := benchfix.Count(h.counted), h.meta.total()
	so, sm := benchfix.Count(sh.counted), sh.meta.total()
	keepalives, others := sh.wire.split(keepAliveMethod)
	auth, err := measureAuthorityIdle(ctx, cfg.idle)
	if err != nil {
		return nil, err
	}
	if !auth.admitted {
		return nil, fmt.Errorf("authority: the holder's grant lapsed while it heartbeat")
	}
	period := fmt.Sprintf("%v", cfg.idle)
	ttl := sh.sess.TTL()
	ka := Row{ID: "idle.star.keepalives", Figure: "lease.Star while idle for " + period + ": session keep-alives (etcd)", Value: float64(keepalives), Unit: "keep-alives", Zero: true}
	if want := float64(cfg.idle / (ttl / 3)); want > 0 {
		ka = ka.ref("one per TTL/3", want, "keep-alives")
	}
	return []Row{
		Row{ID: "idle.writer", Figure: "requests while idle for " + period + ": chain.Writer", Value: float64(wo.Total()) + float64(wm), Unit: "requests", Zero: true}.
			objects(wo).note("%s; %d metastore requests", wo, wm),
		Row{ID: "idle.roller", Figure: "requests while idle for " + period + ": roll.Roller", Value: float64(ro.Total()) + float64(rm), Unit: "requests", Zero: true}.
			objects(ro).note("%s; %d metastore requests", ro, rm),
		Row{ID: "idle.star", Figure: fmt.Sprintf("requests while idle for %s: lease.Star, %d open streams", period, idleStreams), Value: float64(so.Total()) + float64(sm), Unit: "requests", Zero: true}.
			objects(so).note("%s; %d metastore requests (%d etcd RPCs besides keep-alives: %s)", so, sm, others.total(), others),
		ka.note("session TTL %v; expected, not counted as requests above", ttl),
		Row{ID: "idle.authority", Figure: "requests while idle for " + period + ": authority controller and holder (simulated time)", Value: float64(auth.meta), Unit: "requests", Zero: true}.
			objects(benchfix.Requests{}).note("metastore: %d requests, %d transactions, over %d heartbeats and a tick every 100 ms; no object requests (the layer has no buckets); its election session's keep-alives come on top", auth.meta, auth.txns, auth.heartbeats),
	}, nil
}

// starHost is a host running a lease.Star over counted in-memory zones
// and an embedded etcd member, through a client whose RPCs are counted.
type starHost struct {
	star    *lease.Star
	sess    metastore.Session
	counted []*fault.Bucket
	meta    *countingStore
	wire    *rpcCounter
	next    map[string]uint64
}

// openStar starts one etcd member, a client of it that counts its RPCs,
// and a Star that leads idleStreams streams, on a session of ttl.
func openStar(s *scope, ttl time.Duration) (*starHost, error) {
	ctx := s.Context()
	rc := &rpcCounter{}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{startEtcd(s)},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rc.unary), grpc.WithChainStreamInterceptor(rc.stream)},
	})
	if err != nil {
		return nil, err
	}
	s.Cleanup(func() { _ = cli.Close() })
	st, err := etcd.New(cli, etcd.Options{Root: "/idle/"})
	if err != nil {
		return nil, err
	}
	meta := &countingStore{Store: st}
	m, err := epoch.NewMinter(meta, epoch.Options{Identity: "idle-star"})
	if err != nil {
		return nil, err
	}
	raw, counted, views := countedZones(0)
	zones := chain.MustZones(views...)
	f, err := fence.New(m, zones, fence.Options{Identity: "idle-star"})
	if err != nil {
		return nil, err
	}
	refs, err := settle.NewRefIndex(meta, "", locateStreams)
	if err != nil {
		return nil, err
	}
	st2, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	if err != nil {
		return nil, err
	}
	sess, err := meta.NewSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	star, err := lease.Start(ctx, lease.Config{
		Star: "idle-star", Store: meta, Session: sess,
		Minter: m, Settler: st2, Index: refs, Constants: constants(raw, window),
	}, lease.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		_ = sess.Close(ctx)
		return nil, err
	}
	h := &starHost{star: star, sess: sess, counted: counted, meta: meta, wire: rc, next: map[string]uint64{}}
	for i := range idleStreams {
		name := fmt.Sprintf("s%d", i)
		ten, err := star.Open(ctx, name, lease.OpenOptions{})
		if err != nil {
			h.close(ctx)
			return nil, err
		}
		h.next[name] = ten.Next
	}
	return h, nil
}

// appendAbsorbed appends n records, spread over the streams, waits for
// them and has the star cover them and advance its checkpoint.
func (h *starHost) appendAbsorbed(ctx context.Context, n int) error {
	futures := make([]*lease.Future, 0, n)
	for i := range n {
		name := fmt.Sprintf("s%d", i%idleStreams)
		f, err := h.star.Submit(ctx, fmt.Appendf(nil, "%s|%d|bench", name, h.next[name]))
		if err != nil {
			return err
		}
		h.next[name]++
		futures = append(futures, f)
	}
	for _, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			return err
		}
	}
	return h.star.Absorb(ctx)
}

func (h *starHost) close(ctx context.Context) {
	_ = h.star.Close(ctx)
	_ = h.sess.Close(ctx)
}

// locateStreams reads a record of any stream, "<stream>|<offset>|<data>":
// one span over the whole payload.
func locateStreams(p []byte) ([]settle.Span, error) {
	f := strings.SplitN(string(p), "|", 3)
	if len(f) != 3 {
		return nil, fmt.Errorf("not a record: %q", p)
	}
	off, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("not a record: %q: %w", p, err)
	}
	return []settle.Span{{Stream: f[0], Offset: off, Count: 1, Start: 0, End: uint64(len(p))}}, nil
}

// rpcCounter counts a gRPC client's requests by method: each unary call,
// and each message sent on a stream.
type rpcCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[method]++
}

func (c *rpcCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = nil
}

// split returns the count of method and the counts of every other method.
func (c *rpcCounter) split(method string) (int, rpcCounts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	others := rpcCounts{}
	for m, n := range c.calls {
		if m != method {
			others[m] = n
		}
	}
	return c.calls[method], others
}

func (c *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.add(method)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &countedStream{ClientStream: cs, method: method, c: c}, nil
}

// countedStream counts the messages sent on a client stream.
type countedStream struct {
	grpc.ClientStream
	method string
	c      *rpcCounter
}

func (s *countedStream) SendMsg(m any) error {
	s.c.add(s.method)
	return s.ClientStream.SendMsg(m)
}

// rpcCounts are RPC counts by method.
type rpcCounts map[string]int

func (r rpcCounts) total() int {
	n := 0
	for _, c := range r {
		n += c
	}
	return n
}

func (r rpcCounts) String() string {
	if len(r) == 0 {
		return "none"
	}
	var parts []string
	for m, n := range r {
		parts = append(parts, fmt.Sprintf("%s %d", m[strings.LastIndex(m, "/")+1:], n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
