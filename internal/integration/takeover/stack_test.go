package takeover_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/integration/stacktest"
	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/s3"
	"github.com/cutline/cutline/settle"
)

const (
	starA  = "star-a"
	starB  = "star-b"
	stream = "orders"
	zonesK = 3
)

// stack is the real storage of one test: an embedded etcd member and one
// versitygw process per zone. Each test (or subtest) gets its own, and its
// own metastore root and key prefix on top.
type stack struct {
	t      *testing.T
	etcd   *etcdtest.Cluster
	member *etcdtest.Member
	zones  []*testservers.S3Server
	root   string    // metastore root of this test
	keys   wire.Keys // object key layout of this test
}

// newStack starts etcd and K versitygw zones; everything stops when the
// test ends.
func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{t: t, etcd: etcdtest.StartCluster(t, 1)}
	s.member = s.etcd.Members()[0]
	for i := range zonesK {
		s.zones = append(s.zones, testservers.StartVersityGW(t, testservers.S3Options{Bucket: stacktest.ZoneName(i)}))
	}
	id := stacktest.RandomID()
	s.root = "/cutline-it/" + id + "/"
	s.keys = wire.Keys{Prefix: "it-" + id}
	return s
}

// constants are the epoch constants over the stack's K zones.
func (s *stack) constants(w, window int) epoch.Constants {
	names := make([]string, zonesK)
	for i := range names {
		names[i] = stacktest.ZoneName(i)
	}
	return epoch.Constants{Class: "standard", Buckets: names, W: w, Window: window, Prefix: s.keys.Prefix}
}

// party is one process's view of the stack: its own etcd client and store,
// its own S3 clients (own connections), and the library objects built on
// them. A zone whose server is down answers at once (connection refused)
// and the SDK makes no retries of its own: the library's retries are the
// ones under test.
type party struct {
	name    string
	s       *stack
	store   metastore.Store
	buckets []objstore.Bucket
	zones   chain.Zones
	minter  *epoch.Minter
	fencer  *fence.Fencer
	refs    *settle.RefIndex
	settler *settle.Settler
	reader  *chain.Reader
	// undecided is closed when the fencer first logs an undecided slot.
	undecided chan struct{}
}

type partyOpts struct {
	// requestTimeout bounds each metastore call (default 2s).
	requestTimeout time.Duration
	// wrapStore wraps the party's store (fault hooks).
	wrapStore func(metastore.Store) metastore.Store
}

func (s *stack) party(t *testing.T, name string, o partyOpts) *party {
	t.Helper()
	if o.requestTimeout == 0 {
		o.requestTimeout = 2 * time.Second
	}
	p := &party{name: name, s: s, undecided: make(chan struct{})}
	cli := etcdtest.NewClient(t, s.etcd.Endpoints()...)
	st, err := etcd.New(cli, etcd.Options{Root: s.root, RequestTimeout: o.requestTimeout})
	require.NoError(t, err)
	p.store = st
	if o.wrapStore != nil {
		p.store = o.wrapStore(st)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i, srv := range s.zones {
		client := srv.NewClient(hc, func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		b, err := s3.New(client, srv.Bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: stacktest.ZoneName(i)}})
		require.NoError(t, err)
		p.buckets = append(p.buckets, b)
	}
	p.zones = chain.MustZones(p.buckets...)
	p.minter, err = epoch.NewMinter(p.store, epoch.Options{Identity: name})
	require.NoError(t, err)
	p.fencer, err = fence.New(p.minter, p.zones, fence.Options{
		Identity: name,
		Backoff:  clock.Backoff{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond},
		Logger:   slog.New(&logSignal{match: "undecided", ch: p.undecided}),
	})
	require.NoError(t, err)
	p.refs, err = settle.NewRefIndex(p.store, "", locate)
	require.NoError(t, err)
	p.settler, err = settle.New(p.minter, p.zones, p.refs, settle.Options{
		Fencer: p.fencer, Backoff: clock.Backoff{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond},
	})
	require.NoError(t, err)
	p.reader, err = chain.NewReader(p.minter, p.zones, chain.ReaderOptions{})
	require.NoError(t, err)
	return p
}

// verify runs objstore.Verify on every zone (each really refuses a second
// create) and objstore.VerifyDistinct over them (each is its own store).
func (p *party) verify(t *testing.T) {
	t.Helper()
	for _, b := range p.buckets {
		require.NoError(t, objstore.Verify(t.Context(), b), "zone %s", b.Name())
	}
	require.NoError(t, objstore.VerifyDistinct(t.Context(), p.buckets...))
}

// writer makes a writer for rec over the party's buckets; it is aborted at
// the end of the test unless the test ended it.
func (p *party) writer(t *testing.T, rec *epoch.Record, opts chain.WriterOptions) *chain.Writer {
	t.Helper()
	bs, err := p.zones.Resolve(rec.Constants.Buckets)
	require.NoError(t, err)
	if opts.Backoff == (clock.Backoff{}) {
		opts.Backoff = clock.Backoff{Min: 5 * time.Millisecond, Max: 100 * time.Millisecond}
	}
	w, err := chain.NewWriter(rec, chain.MustZones(bs...), opts)
	require.NoError(t, err)
	t.Cleanup(w.Abort)
	return w
}

// logSignal is a log handler that closes ch at the first warning whose
// message contains match, so that a test waits for that event (a fence
// found a slot undecided, a roll step failed) instead of polling. It must
// not call back into the logging object (it may run under its lock).
type logSignal struct {
	match string
	once  sync.Once
	ch    chan struct{}
}

func (h *logSignal) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *logSignal) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logSignal) WithGroup(string) slog.Handler      { return h }

// --- records ---

// Records are cutlinetest's "<stream>|<offset>|<id>": the stream and offset
// are what the host's index needs (locate); the id names the producer's
// record, so that exactly-once is checked across a takeover, where a
// retried record gets a new offset.
func record(offset uint64, id string) []byte {
	return recordIn(stream, offset, id)
}

func recordIn(stream string, offset uint64, id string) []byte {
	return cutlinetest.Record(stream, offset, id)
}

var (
	parseRecord = cutlinetest.ParseRecord
	locate      = cutlinetest.Locate // the hosts' settle.Locator: one record per flight
)

// verifyRun checks cutline's six guarantees over the run recorded in hist, on
// the stack's etcd and every zone read directly (cutlinetest.Check).
func (p *party) verifyRun(t *testing.T, hist *cutlinetest.History) {
	t.Helper()
	cutlinetest.Require(t, cutlinetest.Check(t.Context(), cutlinetest.Run{History: hist, Store: p.store, Zones: p.buckets, Locate: locate}))
}

// env is the stack as cutlinetest sees it through p's store and S3
// clients, failing t. Its VerifyEpoch checks a fenced epoch as it lies in
// the zones, read from every zone's server directly (the README's
// guarantees 2–4); its State reads one slot there.
func (p *party) env(t *testing.T) *cutlinetest.Env {
	t.Helper()
	return cutlinetest.New(t, p.store, p.buckets, cutlinetest.Options{Prefix: p.s.keys.Prefix})
}

// harness is the party as cutlinetest sees it, failing t.
func (p *party) harness(t *testing.T) *cutlinetest.Party {
	t.Helper()
	return &cutlinetest.Party{Name: p.name, Env: p.env(t),
		Zones: p.zones, Minter: p.minter, Fencer: p.fencer, Refs: p.refs, Settler: p.settler, Reader: p.reader}
}

// streamIDs reads stream through the RefIndex and the chain.Reader
// (cutlinetest's StreamIDs): the refs must cover [0, next) without holes
// or overlaps, each ref's flight must be readable and carry the offset the
// ref claims. It returns the record ids in offset order.
func (p *party) streamIDs(t *testing.T) []string {
	t.Helper()
	return p.harness(t).StreamIDs(stream)
}

// chainIDs reads star's whole chain in order and returns the record ids
// with their positions (cutlinetest's ChainIDs).
func (p *party) chainIDs(t *testing.T, star string) ([]string, []chain.Position) {
	t.Helper()
	return p.harness(t).ChainIDs(star)
}

// counts returns how often each id occurs.
func counts(ids []string) map[string]int {
	m := make(map[string]int, len(ids))
	for _, id := range ids {
		m[id]++
	}
	return m
}

// within returns a context bounded by d, for the steps of a test that wait
// on real servers: a wait that does not end fails the test instead of
// hanging it.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
