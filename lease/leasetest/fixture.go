package leasetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// Backend is the metastore the suite runs on.
type Backend struct {
	// NewStore returns a store and a root ("" or ending in '/') whose
	// keyspace is empty and private to the calling test.
	NewStore func(t *testing.T) (metastore.Store, string)
	// Expire ends sess as its TTL running out would: its bound keys go,
	// its Done closes.
	Expire func(t *testing.T, s metastore.Store, sess metastore.Session)
	// TTL is the session TTL of every star. 0 means 10 s.
	TTL time.Duration
}

// scenarioBound bounds each scenario, every call of it included: a
// scenario takes well under a second on any backend, and one that hangs
// (a planted variant, say) fails with the call it was in, instead of
// hanging the run.
const scenarioBound = 30 * time.Second

// fixture is one scenario's world: a store, three in-memory zones, a fake
// clock for the stars' limbo retries, and the run's history.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	b       Backend
	store   metastore.Store
	root    string
	env     *cutlinetest.Env
	clk     *clock.Fake
	hist    *cutlinetest.History
	zones   chain.Zones
	retries time.Duration
}

func newFixture(t *testing.T, b Backend) *fixture {
	t.Helper()
	store, root := b.NewStore(t)
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	env := cutlinetest.New(t, store, buckets, cutlinetest.Options{Root: root})
	views := make([]objstore.Bucket, len(env.Zones))
	for i, z := range env.Zones {
		views[i] = z
	}
	ctx, cancel := context.WithTimeout(t.Context(), scenarioBound)
	t.Cleanup(cancel)
	return &fixture{t: t, ctx: ctx, b: b, store: store, root: root, env: env,
		clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), hist: &cutlinetest.History{},
		zones: chain.MustZones(views...), retries: 5 * time.Second}
}

// node is one star process: its own view of the store (which a test can
// cut off), its session, its parts and its Star.
type node struct {
	f      *fixture
	name   string
	store  *Flaky
	sess   metastore.Session
	minter *epoch.Minter
	refs   *settle.RefIndex
	star   *lease.Star
	dead   bool
}

// nodeOpts tunes start.
type nodeOpts struct {
	absorbEvery int
	flush       func(ctx context.Context, stream string) error
	admit       func() error
}

// start starts star name on a new session.
func (f *fixture) start(name string, o nodeOpts) *node {
	f.t.Helper()
	n, err := f.tryStart(name, o)
	if err != nil {
		f.t.Fatalf("start %s: %v", name, err)
	}
	return n
}

func (f *fixture) tryStart(name string, o nodeOpts) (*node, error) {
	ttl := f.b.TTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	n := &node{f: f, name: name, store: NewFlaky(f.store)}
	sess, err := f.store.NewSession(f.ctx, ttl)
	if err != nil {
		return nil, err
	}
	n.sess = sess
	f.t.Cleanup(func() { _ = sess.Close(context.Background()) })
	n.minter, err = epoch.NewMinter(n.store, epoch.Options{Root: f.root, Identity: name})
	if err != nil {
		return nil, err
	}
	fencer, err := fence.New(n.minter, f.zones, fence.Options{Identity: name})
	if err != nil {
		return nil, err
	}
	n.refs, err = settle.NewRefIndex(n.store, f.root, cutlinetest.Locate)
	if err != nil {
		return nil, err
	}
	settler, err := settle.New(n.minter, f.zones, n.refs, settle.Options{Fencer: fencer})
	if err != nil {
		return nil, err
	}
	n.star, err = lease.Start(f.ctx, lease.Config{
		Star: name, Store: n.store, Root: f.root, Session: sess,
		Minter: n.minter, Settler: settler, Index: n.refs, Constants: f.env.Constants(2, 16),
	}, lease.Options{AbsorbEvery: o.absorbEvery, Backoff: clock.Backoff{Min: f.retries, Max: f.retries}, Flush: o.flush, Admit: o.admit, Clock: f.clk,
		Roller: roll.Options{Clock: clock.Real()}})
	if err != nil {
		return nil, err
	}
	f.t.Cleanup(n.crash)
	return n, nil
}

// crash is the process dying: nothing more is written, the session is
// left to expire (or expired with expire).
func (n *node) crash() {
	if !n.dead {
		n.dead = true
		n.star.Abort()
	}
}

// expire ends the node's session, as its TTL running out would.
func (n *node) expire() {
	n.f.t.Helper()
	n.f.b.Expire(n.f.t, n.f.store, n.sess)
	select {
	case <-n.sess.Done():
	case <-n.f.ctx.Done():
		n.f.t.Fatalf("%s: the session did not end", n.name)
	}
}

// kill is a crash followed by the session's expiry.
func (n *node) kill() {
	n.crash()
	n.expire()
}

// open opens stream, failing the test on an error.
func (n *node) open(stream string, opts lease.OpenOptions) lease.Tenure {
	n.f.t.Helper()
	ten, err := n.star.Open(n.f.ctx, stream, opts)
	if err != nil {
		n.f.t.Fatalf("%s: open %s: %v", n.name, stream, err)
	}
	return ten
}

// append appends one record with id to stream and waits for its answer,
// recording both in the history.
func (n *node) append(stream, id string) (chain.Position, error) {
	f, ev, err := n.submit(stream, id)
	if err != nil {
		return chain.Position{}, err
	}
	return n.answer(f, ev)
}

// appendN appends count records to stream, pipelined, and requires every
// one acknowledged.
func (n *node) appendN(stream, prefix string, count int) {
	n.f.t.Helper()
	type sub struct {
		f  *lease.Future
		ev int
	}
	var subs []sub
	for i := range count {
		f, ev, err := n.submit(stream, fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			n.f.t.Fatalf("%s: submit %s %d: %v", n.name, stream, i, err)
		}
		subs = append(subs, sub{f, ev})
	}
	for i, s := range subs {
		if _, err := n.answer(s.f, s.ev); err != nil {
			n.f.t.Fatalf("%s: append %s %d: %v", n.name, stream, i, err)
		}
	}
}

func (n *node) submit(stream, id string) (*lease.Future, int, error) {
	next, err := n.star.Next(stream)
	if err != nil {
		return nil, 0, err
	}
	p := cutlinetest.Record(stream, next, id)
	f, err := n.star.Submit(n.f.ctx, p)
	if err != nil {
		n.f.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Refused, Host: n.name, Star: n.name, ID: id, Payload: p, Err: err})
		return nil, 0, err
	}
	ev := n.f.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: n.name, Star: n.name, ID: id, Payload: p})
	return f, ev, nil
}

func (n *node) answer(f *lease.Future, ev int) (chain.Position, error) {
	ctx, cancel := context.WithTimeout(n.f.ctx, failfast.Bound)
	defer cancel()
	pos, err := f.Wait(ctx)
	if err != nil {
		n.f.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Failed, Host: n.name, Star: n.name, Of: ev, Err: err})
		return pos, err
	}
	n.f.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: n.name, Star: n.name, Of: ev, Pos: pos})
	return pos, nil
}

// verify closes what is still running, then checks the guarantees over the
// run and that each stream reads back every acknowledged record exactly
// once: lost 0, duplicated 0.
func (f *fixture) verify(reader *node, streams ...string) {
	f.t.Helper()
	cutlinetest.Require(f.t, f.env.Check(f.hist))
	acked := map[string]bool{}
	evs := f.hist.Events()
	for _, ev := range evs {
		if ev.Op != cutlinetest.Acked {
			continue
		}
		sub := evs[ev.Of]
		if recs, err := cutlinetest.ParseBundle(sub.Payload); err == nil {
			for _, r := range recs {
				acked[r.ID] = true
			}
			continue
		}
		acked[sub.ID] = true
	}
	p := f.env.Party("verify")
	seen := map[string]int{}
	for _, s := range streams {
		for _, id := range p.StreamIDs(s) {
			seen[id]++
		}
	}
	lost, dup := 0, 0
	for id := range acked {
		if seen[id] == 0 {
			lost++
		}
	}
	for _, c := range seen {
		if c > 1 {
			dup += c - 1
		}
	}
	if lost != 0 || dup != 0 {
		f.t.Fatalf("acknowledged %d: lost %d, duplicated %d", len(acked), lost, dup)
	}
	f.t.Logf("acknowledged %d, lost 0, duplicated 0", len(acked))
}

// Flaky is a metastore.Store that a test can cut off: while Down, every
// Get, List and Txn fails with metastore.ErrUnavailable and nothing is
// applied. Sessions and watches pass through.
type Flaky struct {
	metastore.Store
	down atomic.Bool
	// FailTxn, when set, fails a Txn it returns true for (unapplied), as
	// a crash right before that write would.
	failTxn atomic.Pointer[func(metastore.Txn) bool]
}

// NewFlaky wraps s.
func NewFlaky(s metastore.Store) *Flaky { return &Flaky{Store: s} }

// SetDown cuts the store off (true) or restores it.
func (s *Flaky) SetDown(down bool) { s.down.Store(down) }

// FailTxn makes every Txn that match returns true for fail, unapplied;
// nil stops it.
func (s *Flaky) FailTxn(match func(metastore.Txn) bool) {
	if match == nil {
		s.failTxn.Store(nil)
		return
	}
	s.failTxn.Store(&match)
}

var errCutOff = errors.New("leasetest: cut off")

// Get implements metastore.Store.
func (s *Flaky) Get(ctx context.Context, key string) (metastore.KV, error) {
	if s.down.Load() {
		return metastore.KV{}, metastore.Unavailable(errCutOff)
	}
	return s.Store.Get(ctx, key)
}

// List implements metastore.Store.
func (s *Flaky) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	if s.down.Load() {
		return nil, 0, metastore.Unavailable(errCutOff)
	}
	return s.Store.List(ctx, prefix)
}

// Txn implements metastore.Store.
func (s *Flaky) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	if s.down.Load() {
		return 0, metastore.Unavailable(errCutOff)
	}
	if m := s.failTxn.Load(); m != nil && (*m)(t) {
		return 0, metastore.Unavailable(errCutOff)
	}
	return s.Store.Txn(ctx, t)
}

// Watch implements metastore.Store.
func (s *Flaky) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	return s.Store.Watch(ctx, prefix, from)
}

func (f *fixture) state(stream string) lease.StreamState {
	f.t.Helper()
	st, err := lease.Inspect(f.ctx, f.store, f.root, stream)
	if err != nil {
		f.t.Fatalf("inspect %s: %v", stream, err)
	}
	return st
}

// writer returns the stream's last-writer record (failing when none).
func (f *fixture) writer(stream string) *lease.WriterRecord {
	f.t.Helper()
	w := f.state(stream).Writer
	if w == nil {
		f.t.Fatalf("stream %s has no last-writer record", stream)
	}
	return w
}

// mark returns the stream's standing mark, or nil.
func (f *fixture) mark(stream string) *lease.Mark {
	f.t.Helper()
	return f.state(stream).Mark
}

// waitMark waits until a mark stands on stream.
func (f *fixture) waitMark(stream string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, failfast.Bound)
	defer cancel()
	key := f.root + "streams/" + stream + "/release"
	kvs, rev, err := f.store.List(ctx, key)
	if err != nil {
		f.t.Fatalf("waiting for the mark of %s: %v", stream, err)
	}
	if len(kvs) > 0 {
		return
	}
	for ev, err := range f.store.Watch(ctx, key, rev+1) {
		if err != nil {
			f.t.Fatalf("waiting for the mark of %s: %v", stream, err)
		}
		if ev.Type == metastore.EventPut {
			return
		}
	}
	f.t.Fatalf("waiting for the mark of %s: %v", stream, ctx.Err())
}

func (f *fixture) deleteLease(stream string) {
	f.t.Helper()
	kv, err := f.store.Get(f.ctx, f.root+"streams/"+stream+"/lease")
	if err != nil {
		f.t.Fatalf("read the lease of %s: %v", stream, err)
	}
	if err := metastore.Delete(f.ctx, f.store, kv.Key, kv.Revision); err != nil {
		f.t.Fatalf("delete the lease of %s: %v", stream, err)
	}
}

// rawMark returns the stored bytes of the stream's mark.
func (f *fixture) rawMark(stream string) []byte {
	f.t.Helper()
	kv, err := f.store.Get(f.ctx, f.root+"streams/"+stream+"/release")
	if err != nil {
		f.t.Fatalf("read the mark of %s: %v", stream, err)
	}
	return kv.Value
}

// putRaw writes v as the stream's mark, over whatever stands there.
func (f *fixture) putRaw(stream string, v []byte) {
	f.t.Helper()
	key := f.root + "streams/" + stream + "/release"
	rev := int64(0)
	if kv, err := f.store.Get(f.ctx, key); err == nil {
		rev = kv.Revision
	}
	if _, err := metastore.Put(f.ctx, f.store, key, v, rev); err != nil {
		f.t.Fatalf("write the mark of %s: %v", stream, err)
	}
}

// appendBundles appends count flights, each bundling one record of every
// stream, pipelined, and requires every one acknowledged. Each bundle is
// one submission in the history, with the ids of its records.
func (n *node) appendBundles(prefix string, count int, streams ...string) {
	n.f.t.Helper()
	type sub struct {
		f  *lease.Future
		ev int
	}
	var subs []sub
	for i := range count {
		var recs []cutlinetest.BundleRecord
		for _, s := range streams {
			next, err := n.star.Next(s)
			if err != nil {
				n.f.t.Fatalf("%s: next of %s: %v", n.name, s, err)
			}
			recs = append(recs, cutlinetest.BundleRecord{Stream: s, Offset: next, ID: fmt.Sprintf("%s-%s-%d", prefix, s, i)})
		}
		p := cutlinetest.Bundle(recs...)
		id := fmt.Sprintf("%s-bundle-%d", prefix, i)
		fu, err := n.star.Submit(n.f.ctx, p)
		if err != nil {
			n.f.t.Fatalf("%s: submit bundle %d: %v", n.name, i, err)
		}
		ev := n.f.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: n.name, Star: n.name, ID: id, Payload: p})
		subs = append(subs, sub{fu, ev})
	}
	for i, s := range subs {
		if _, err := n.answer(s.f, s.ev); err != nil {
			n.f.t.Fatalf("%s: bundle %d: %v", n.name, i, err)
		}
	}
}
