package batch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/roll"
)

// world is one star on in-memory backends, its parts built over a
// RefIndex that locates bundles, and a reader's view of its chain.
type world struct {
	t      testing.TB
	ctx    context.Context
	store  *memstore.Store
	env    *cutlinetest.Env
	reader *cutlinetest.Party
	star   *lease.Star
	sess   metastore.Session
	closed bool
}

const starName = "star-1"

// newWorld starts a star and opens streams on it.
func newWorld(t testing.TB, streams ...string) *world {
	t.Helper()
	ctx := t.Context()
	store := memstore.New(memstore.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	env := cutlinetest.New(t, store, buckets, cutlinetest.Options{Locate: batch.Locate})
	w := &world{t: t, ctx: ctx, store: store, env: env, reader: env.Party("reader")}
	star, sess := w.start(starName)
	w.star, w.sess = star, sess
	t.Cleanup(func() {
		if !w.closed {
			star.Abort()
		}
	})
	for _, s := range streams {
		if _, err := star.Open(ctx, s, lease.OpenOptions{}); err != nil {
			t.Fatalf("open %s: %v", s, err)
		}
	}
	return w
}

// start starts star name on a new session, its parts over a RefIndex
// of bundles.
func (w *world) start(name string) (*lease.Star, metastore.Session) {
	return w.startFlushing(name, nil)
}

// startFlushing is start with a release flush (lease.Options.Flush).
func (w *world) startFlushing(name string, flush func(context.Context, string) error) (*lease.Star, metastore.Session) {
	t := w.t
	t.Helper()
	parts := w.env.Party(name)
	sess, err := w.store.NewSession(w.ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	star, err := lease.Start(w.ctx, lease.Config{
		Star: name, Store: w.store, Session: sess,
		Minter: parts.Minter, Settler: parts.Settler, Index: parts.Refs, Constants: w.env.Constants(2, 16),
	}, lease.Options{Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Roller: roll.Options{Clock: clock.Real()}, Flush: flush})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return star, sess
}

// producer makes a producer on the world's star, closed at the end of
// the test.
func (w *world) producer(opts batch.Options) *batch.Producer {
	w.t.Helper()
	p, err := batch.New(w.star, opts)
	if err != nil {
		w.t.Fatalf("new producer: %v", err)
	}
	w.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), failfast.Bound)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// closeStar closes the star: everything acknowledged is covered.
func (w *world) closeStar() {
	w.t.Helper()
	w.closed = true
	if err := w.star.Close(w.ctx); err != nil {
		w.t.Fatalf("close star: %v", err)
	}
}

// read reads stream back through the RefIndex and the chain reader: the
// refs tile it from 0, each ref's bytes decode to the records it claims.
// It returns the records' bytes in offset order.
func (w *world) read(stream string) []string {
	w.t.Helper()
	var out []string
	var next uint64
	for r, err := range w.reader.Refs.Refs(w.ctx, stream) {
		if err != nil {
			w.t.Fatalf("refs of %s: %v", stream, err)
		}
		if r.Offset != next {
			w.t.Fatalf("stream %s: a ref at %d, the stream is covered to %d", stream, r.Offset, next)
		}
		payload, err := w.reader.Reader.Read(w.ctx, r.Star, r.Position())
		if err != nil {
			w.t.Fatalf("stream %s: read %v: %v", stream, r.Position(), err)
		}
		recs, err := batch.SpanEntries(payload, r.Span())
		if err != nil {
			w.t.Fatalf("stream %s: the ref at %d: %v", stream, r.Offset, err)
		}
		for i, rec := range recs {
			if rec.Offset != r.Offset+uint64(i) {
				w.t.Fatalf("stream %s: record %d of the ref at %d has offset %d", stream, i, r.Offset, rec.Offset)
			}
			out = append(out, string(rec.Data))
		}
		next = r.Offset + r.Count
	}
	return out
}

// wait waits for an ack, bounded.
func wait(t *testing.T, a *batch.Ack) (chain.Position, uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
	defer cancel()
	pos, off, err := a.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("ack of %s/%d: not decided within %v", a.Stream(), a.Offset(), failfast.Bound)
	}
	return pos, off, err
}

// add adds a record, failing the test on an error.
func add(t *testing.T, p *batch.Producer, stream, rec string) *batch.Ack {
	t.Helper()
	a, err := p.Add(bounded(t), stream, []byte(rec))
	if err != nil {
		t.Fatalf("add %s %q: %v", stream, rec, err)
	}
	return a
}

func rec(stream string, i int) string { return fmt.Sprintf("%s-record-%04d", stream, i) }

// bounded returns a context that ends after a minute, for waits that
// must end.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
	t.Cleanup(cancel)
	return ctx
}
