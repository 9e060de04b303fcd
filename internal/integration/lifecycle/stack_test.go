package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/integration/stacktest"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/s3"
	"github.com/cutline/cutline/settle"
)

const (
	zonesK = 3
	starA  = "star-a"
)

// streams are the streams star A leads; each flight bundles records of
// several of them.
var streams = []string{"s0", "s1", "s2", "s3"}

// backend is where the zones live: start starts them for a test and
// returns how one party opens its own view of them (its own clients).
type backend struct {
	name  string
	start func(t *testing.T) func(t *testing.T) []objstore.Bucket
}

var backends = []backend{{"fs", startFS}, {"s3", startS3}}

// startFS makes K fs zones in temporary directories.
func startFS(t *testing.T) func(t *testing.T) []objstore.Bucket {
	dir := t.TempDir()
	return func(t *testing.T) []objstore.Bucket {
		var out []objstore.Bucket
		for i := range zonesK {
			name := stacktest.ZoneName(i)
			b, err := fs.New(filepath.Join(dir, name), fs.Options{Name: name, NoSync: true, CreateRoot: true})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			out = append(out, b)
		}
		return out
	}
}

// startS3 starts K versitygw zones, one process each.
func startS3(t *testing.T) func(t *testing.T) []objstore.Bucket {
	zones := stacktest.StartZones(t, zonesK, "lc-")
	return func(t *testing.T) []objstore.Bucket {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		t.Cleanup(tr.CloseIdleConnections)
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		var out []objstore.Bucket
		for i, srv := range zones.Servers {
			b, err := s3.New(srv.NewClient(hc), srv.Bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: stacktest.ZoneName(i)}})
			require.NoError(t, err)
			out = append(out, b)
		}
		return out
	}
}

// world is one scenario's storage: a root of its own in the etcd member
// and a key prefix of its own in the zones.
type world struct {
	etcd   *etcdtest.Cluster
	open   func(t *testing.T) []objstore.Bucket
	root   string
	prefix string
}

func newWorld(cluster *etcdtest.Cluster, open func(t *testing.T) []objstore.Bucket) *world {
	id := stacktest.RandomID()
	return &world{etcd: cluster, open: open, root: "/cutline-lc/" + id + "/", prefix: "lc-" + id}
}

func (w *world) constants(window int) epoch.Constants {
	names := make([]string, zonesK)
	for i := range names {
		names[i] = stacktest.ZoneName(i)
	}
	return epoch.Constants{Class: "standard", Buckets: names, W: 2, Window: window, Prefix: w.prefix}
}

// party is one process's view of the world: its own etcd client and
// object-store clients, and the library's parts over them.
type party struct {
	store   metastore.Store
	buckets []objstore.Bucket
	zones   chain.Zones
	minter  *epoch.Minter
	fencer  *fence.Fencer
	refs    *settle.RefIndex
	settler *settle.Settler
	reader  *settle.StreamReader
}

var backoff = clock.Backoff{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}

// party builds a party named name; wrap, when set, wraps its store.
func (w *world) party(t *testing.T, name string, wrap func(metastore.Store) metastore.Store) *party {
	t.Helper()
	cli := etcdtest.NewClient(t, w.etcd.Endpoints()...)
	st, err := etcd.New(cli, etcd.Options{Root: w.root, RequestTimeout: 5 * time.Second})
	require.NoError(t, err)
	p := &party{store: st, buckets: w.open(t)}
	if wrap != nil {
		p.store = wrap(st)
	}
	p.zones = chain.MustZones(p.buckets...)
	p.minter, err = epoch.NewMinter(p.store, epoch.Options{Identity: name})
	require.NoError(t, err)
	p.fencer, err = fence.New(p.minter, p.zones, fence.Options{Identity: name, Backoff: backoff})
	require.NoError(t, err)
	p.refs, err = settle.NewRefIndex(p.store, "", batch.Locate)
	require.NoError(t, err)
	p.settler, err = settle.New(p.minter, p.zones, p.refs, settle.Options{Fencer: p.fencer, Backoff: backoff})
	require.NoError(t, err)
	p.reader, err = settle.NewStreamReader(p.minter, p.zones, p.refs, settle.StreamReaderOptions{})
	require.NoError(t, err)
	return p
}

func (p *party) compactor(t *testing.T, id string, opts settle.CompactorOptions) *settle.Compactor {
	t.Helper()
	c, err := settle.NewCompactor(p.minter, p.zones, p.refs, id, opts)
	require.NoError(t, err)
	return c
}

// within returns a context bounded by d: a wait on a real server that
// does not end fails the test instead of hanging it.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// content is the record appended as the n-th of stream: it names both.
func content(stream string, n int) []byte {
	return fmt.Appendf(nil, "%s#%04d#%s", stream, n, strings.Repeat("r", 20))
}

// appendStreams runs star A as a host does: a lease.Star on a session,
// every stream opened, perStream records added to each, round robin,
// through a batch.Producer (flights of at most one record a stream, so
// that a consumer of one stream would read a flight per record); when roll is set, the star rolls its
// chain to a new epoch half-way. It waits for every acknowledgement,
// closes the star (which covers everything acknowledged) and returns the
// acknowledged records of each stream, by offset.
func (w *world) appendStreams(t *testing.T, ctx context.Context, perStream int, roll bool) map[string][][]byte {
	t.Helper()
	p := w.party(t, starA, nil)
	sess, err := p.store.NewSession(ctx, 30*time.Second)
	require.NoError(t, err)
	star, err := lease.Start(ctx, lease.Config{Star: starA, Store: p.store, Session: sess, Minter: p.minter,
		Settler: p.settler, Index: p.refs, Constants: w.constants(16)}, lease.Options{Backoff: backoff})
	require.NoError(t, err)
	stop := func() {
		star.Abort()
		_ = sess.Close(context.WithoutCancel(ctx))
	}
	t.Cleanup(stop)
	_, errs := star.OpenMany(ctx, streams, lease.OpenOptions{})
	for i, err := range errs {
		require.NoError(t, err, "open %s", streams[i])
	}
	prod, err := batch.New(star, batch.Options{MaxRecords: len(streams), Linger: 2 * time.Millisecond})
	require.NoError(t, err)
	acks := make([]*batch.Ack, 0, perStream*len(streams))
	for i := range perStream * len(streams) {
		if roll && i == perStream*len(streams)/2 {
			require.NoError(t, prod.Flush(ctx))
			require.NoError(t, star.Roll(ctx, w.constants(8)), "roll")
		}
		s := streams[i%len(streams)]
		a, err := prod.Add(ctx, s, content(s, i/len(streams)))
		require.NoError(t, err)
		acks = append(acks, a)
	}
	require.NoError(t, prod.Flush(ctx))
	out := map[string][][]byte{}
	for i, a := range acks {
		_, off, err := a.Wait(ctx)
		require.NoError(t, err, "record %d", i)
		s := streams[i%len(streams)]
		require.Equal(t, uint64(len(out[s])), off, "%s: the producer assigns offsets in order", s)
		out[s] = append(out[s], content(s, i/len(streams)))
	}
	require.NoError(t, prod.Close(ctx))
	require.NoError(t, star.Close(ctx))
	require.NoError(t, sess.Close(ctx))
	return out
}

// footprint is what the world stores: objects under its prefix in every
// zone, keys under its root, and of those the ref pages.
type footprint struct{ objects, keys, pages int }

func (p *party) footprint(t *testing.T, ctx context.Context, prefix string) footprint {
	t.Helper()
	var fp footprint
	for _, b := range p.buckets {
		for _, err := range objstore.All(ctx, b, prefix+"/") {
			require.NoError(t, err)
			fp.objects++
		}
	}
	kvs, _, err := p.store.List(ctx, "")
	require.NoError(t, err)
	fp.keys = len(kvs)
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, "refpages/") {
			fp.pages++
		}
	}
	return fp
}

// segments lists the segment objects of star A in every zone, with the
// number of copies of each.
func (p *party) segments(t *testing.T, ctx context.Context, prefix string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, b := range p.buckets {
		for o, err := range objstore.All(ctx, b, prefix+"/"+starA+"/segments/") {
			require.NoError(t, err)
			out[o.Key]++
		}
	}
	return out
}

// named returns the segments the index names for the records of each
// stream at or past its retention point.
func (p *party) named(t *testing.T, ctx context.Context) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range streams {
		start, err := p.refs.Start(ctx, s)
		require.NoError(t, err)
		for e, err := range p.refs.Extents(ctx, s, start) {
			if err != nil {
				require.ErrorIs(t, err, metastore.ErrNotFound, "%s from %d", s, start) // retained to its end
				break
			}
			if e.InSegment() && e.Offset+e.Count > start {
				out[e.Segment] = true
			}
		}
	}
	return out
}

// requireNoGarbage checks that every segment object in the zones is one
// the index names for a retained record, and that each of those has W
// copies at least.
func (p *party) requireNoGarbage(t *testing.T, ctx context.Context, prefix string) {
	t.Helper()
	named := p.named(t, ctx)
	have := p.segments(t, ctx, prefix)
	for k, n := range have {
		require.True(t, named[k], "segment %s (%d copies) is garbage", k, n)
	}
	for k := range named {
		require.GreaterOrEqual(t, have[k], 2, "named segment %s", k)
	}
}

// readFrom reads stream from offset from through p's StreamReader and
// returns the records at from or past it, by offset from from on, and how
// many of them came from segments (readRecords, failing t).
func (p *party) readFrom(t *testing.T, ctx context.Context, stream string, from uint64) (recs [][]byte, fromSegments int) {
	t.Helper()
	recs, fromSegments, err := p.readRecords(ctx, stream, from)
	require.NoError(t, err)
	return recs, fromSegments
}

// readRecords reads stream from offset from through p's StreamReader and
// returns the records at from or past it, by offset from from on, and how
// many of them came from segments. Offsets must follow each other without
// a gap or a repeat.
func (p *party) readRecords(ctx context.Context, stream string, from uint64) (recs [][]byte, fromSegments int, err error) {
	next := from
	for ch, err := range p.reader.Read(ctx, stream, from) {
		if err != nil {
			return nil, 0, fmt.Errorf("%s from %d, at %d: %w", stream, from, next, err)
		}
		if ch.Offset > next {
			return nil, 0, fmt.Errorf("%s: a chunk at %d after %d: a gap", stream, ch.Offset, next)
		}
		rs, err := batch.SpanEntries(ch.Data, settle.Span{Stream: stream, Offset: ch.Offset, Count: ch.Count, End: uint64(len(ch.Data))})
		if err != nil {
			return nil, 0, fmt.Errorf("%s at %d: %w", stream, ch.Offset, err)
		}
		for _, r := range rs {
			if r.Offset < next {
				if r.Offset >= from {
					return nil, 0, fmt.Errorf("%s: offset %d read twice", stream, r.Offset)
				}
				continue // the first chunk may start below from
			}
			recs = append(recs, append([]byte(nil), r.Data...))
			next++
			if ch.InSegment() {
				fromSegments++
			}
		}
	}
	return recs, fromSegments, nil
}

// firstErr returns the first error a read of stream from offset from
// yields.
func (p *party) firstErr(ctx context.Context, stream string, from uint64) error {
	for _, err := range p.reader.Read(ctx, stream, from) {
		return err
	}
	return nil
}
