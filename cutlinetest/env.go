package cutlinetest

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// Options configures an Env. The zero value works.
type Options struct {
	// Clock is given to every party (writers, fencers, settlers, readers)
	// and to the fault-injecting zones. Nil means the wall clock.
	Clock clock.Clock
	// Logger is given to every party. Nil discards.
	Logger *slog.Logger
	// Root is the metastore root of every minter and RefIndex ("" or
	// ending in '/').
	Root string
	// Prefix is the object key prefix Constants mints into every epoch.
	// Empty means "chains".
	Prefix string
	// Locate is the Locator of every party's RefIndex and of the checker.
	// Nil means Locate (the Record and Bundle formats).
	Locate settle.Locator
	// Fault is the fault injection every zone is wrapped in: zone i's
	// seed is Fault.Seed+i+1, and a nil Fault.Clock means Clock.
	Fault fault.Options
	// Wrap, if set, wraps zone i's fault-injecting bucket, once, in New,
	// in what every party sees instead (a test's request interceptor, or
	// latency). The wrapper must keep the bucket's name. Put, Delete,
	// State and Check still reach the backend directly.
	Wrap func(i int, zone objstore.Bucket) objstore.Bucket
}

// Env is shared storage for a test: one metastore and K zones. Each zone is
// a backend bucket (Raw) wrapped in fault injection (Zones), which is what
// every party sees, so a test can take a zone down (Zones[i].SetDown) or
// inject faults, while Put, Delete, State and Check reach the backend
// directly, behind every party's back.
type Env struct {
	T     testing.TB
	Store metastore.Store
	Raw   []objstore.Bucket
	Zones []*fault.Bucket
	opts  Options
	views []objstore.Bucket // what every party sees: Zones, wrapped by opts.Wrap
}

// New returns an Env over any buckets (one per zone, in zone order) and any
// store. Bad options fail the test.
func New(t testing.TB, store metastore.Store, buckets []objstore.Bucket, opts Options) *Env {
	t.Helper()
	if store == nil || len(buckets) == 0 {
		t.Fatalf("cutlinetest: New needs a store and at least one bucket")
	}
	if _, err := chain.NewZones(buckets...); err != nil {
		t.Fatalf("cutlinetest: %v", err)
	}
	if opts.Prefix == "" {
		opts.Prefix = "chains"
	}
	if err := epoch.ValidatePrefix(opts.Prefix); err != nil {
		t.Fatalf("cutlinetest: %v", err)
	}
	if opts.Locate == nil {
		opts.Locate = Locate
	}
	e := &Env{T: t, Store: store, Raw: buckets, opts: opts}
	if opts.Fault.Clock == nil {
		opts.Fault.Clock = opts.Clock
	}
	for i, b := range buckets {
		fo := opts.Fault
		fo.Seed += uint64(i + 1)
		fb := fault.Wrap(b, fo)
		e.Zones = append(e.Zones, fb)
		var v objstore.Bucket = fb
		if opts.Wrap != nil {
			if v = opts.Wrap(i, fb); v == nil || v.Name() != b.Name() {
				t.Fatalf("cutlinetest: Options.Wrap must keep zone %d's bucket and its name %q", i, b.Name())
			}
		}
		e.views = append(e.views, v)
	}
	return e
}

// NewMem returns an Env over an in-memory store and k in-memory zones named
// zone-a, zone-b, …
func NewMem(t testing.TB, k int) *Env {
	t.Helper()
	buckets := make([]objstore.Bucket, k)
	for i := range buckets {
		buckets[i] = memblob.New(fmt.Sprintf("zone-%c", 'a'+i))
	}
	return New(t, memstore.New(memstore.Options{}), buckets, Options{})
}

// Constants are epoch constants over every zone, in zone order, with quorum
// w, the given window, class "standard" and the Env's key prefix.
func (e *Env) Constants(w, window int) epoch.Constants {
	return epoch.Constants{Class: "standard", Buckets: chain.Names(e.Raw...), W: w, Window: window, Prefix: e.opts.Prefix}
}

// Party is one process's view of the Env: its own minter, fencer, index,
// settler and reader over the fault-injecting zones (as Options.Wrap
// wrapped them).
type Party struct {
	Name    string
	Env     *Env
	Zones   chain.Zones
	Minter  *epoch.Minter
	Fencer  *fence.Fencer
	Refs    *settle.RefIndex
	Settler *settle.Settler
	Reader  *chain.Reader
	// Streams reads the index's streams from segments and flights alike;
	// StreamIDs makes one when it is nil.
	Streams *settle.StreamReader
}

// Party makes a party; name is its writer and fencer identity.
func (e *Env) Party(name string) *Party {
	t := e.T
	t.Helper()
	p := &Party{Name: name, Env: e, Zones: chain.MustZones(e.views...)}
	var err error
	must := func(err error) {
		if err != nil {
			t.Fatalf("cutlinetest: party %s: %v", name, err)
		}
	}
	p.Minter, err = epoch.NewMinter(e.Store, epoch.Options{Root: e.opts.Root, Identity: name, Clock: e.opts.Clock, Logger: e.opts.Logger})
	must(err)
	p.Fencer, err = fence.New(p.Minter, p.Zones, fence.Options{Identity: name, Clock: e.opts.Clock, Logger: e.opts.Logger})
	must(err)
	p.Refs, err = settle.NewRefIndex(e.Store, e.opts.Root, e.opts.Locate)
	must(err)
	if e.opts.Clock != nil {
		p.Refs.WithClock(e.opts.Clock) // pages carry times: retention by age works
	}
	p.Streams, err = settle.NewStreamReader(p.Minter, p.Zones, p.Refs, settle.StreamReaderOptions{})
	must(err)
	p.Settler, err = settle.New(p.Minter, p.Zones, p.Refs, settle.Options{Fencer: p.Fencer, Clock: e.opts.Clock, Logger: e.opts.Logger})
	must(err)
	p.Reader, err = chain.NewReader(p.Minter, p.Zones, chain.ReaderOptions{Clock: e.opts.Clock, Logger: e.opts.Logger})
	must(err)
	return p
}

// Mint mints an epoch of star; an error fails the test.
func (p *Party) Mint(star string, c epoch.Constants) *epoch.Record {
	p.Env.T.Helper()
	rec, err := p.Minter.Mint(p.Env.T.Context(), star, c)
	if err != nil {
		p.Env.T.Fatalf("cutlinetest: mint %s: %v", star, err)
	}
	return rec
}

// Writer makes a writer for the minted rec over the party's zones, with the
// Env's clock and logger unless opts sets them. It is aborted when the test
// ends unless the test ended it.
func (p *Party) Writer(rec *epoch.Record, opts chain.WriterOptions) *chain.Writer {
	p.Env.T.Helper()
	if opts.Clock == nil {
		opts.Clock = p.Env.opts.Clock
	}
	if opts.Logger == nil {
		opts.Logger = p.Env.opts.Logger
	}
	w, err := chain.NewWriter(rec, p.Zones, opts)
	if err != nil {
		p.Env.T.Fatalf("cutlinetest: writer for %s/%d: %v", rec.Star, rec.Epoch, err)
	}
	p.Env.T.Cleanup(w.Abort)
	return w
}

// StreamIDs reads stream through the party's StreamReader, from its
// retention point on, as a consumer would: from segments and flights
// alike, so it reads a stream whose flights compaction rewrote and trim
// deleted; a ref still in a flight is read from the whole flight with
// the party's Reader, which verifies it. The refs must cover [start, next) without holes or overlaps,
// and each ref's bytes must hold the records it claims (a Record, or
// that stream's records of a Bundle). It returns the ids of the records
// at or past the retention point, in offset order; anything else fails
// the test.
func (p *Party) StreamIDs(stream string) []string {
	t := p.Env.T
	t.Helper()
	ctx := t.Context()
	start, err := p.Refs.Start(ctx, stream)
	if err != nil {
		t.Fatalf("cutlinetest: the retention point of stream %s: %v", stream, err)
	}
	streams := p.Streams
	if streams == nil { // a Party built by hand
		if streams, err = settle.NewStreamReader(p.Minter, p.Zones, p.Refs, settle.StreamReaderOptions{}); err != nil {
			t.Fatalf("cutlinetest: a stream reader: %v", err)
		}
	}
	var ids []string
	next, first := start, true
	for ch, err := range streams.Read(ctx, stream, start) {
		if first && errors.Is(err, metastore.ErrNotFound) {
			break // nothing at or past the retention point; Next says whether there should be
		}
		if err != nil {
			t.Fatalf("cutlinetest: stream %s must read at offset %d: %v", stream, next, err)
		}
		if ch.Offset > next || (ch.Offset < next && !first) {
			t.Fatalf("cutlinetest: stream %s: a ref covers [%d, %d), the next is at %d: refs must cover the stream without holes or overlaps",
				stream, ch.Offset, ch.Offset+ch.Count, next)
		}
		first = false
		next = ch.Offset + ch.Count
		if ch.Data, err = verifiedChunk(ctx, p.Reader, ch); err != nil {
			t.Fatalf("cutlinetest: stream %s: the ref at offset %d (%s/%v, segment %q) must be readable: %v", stream, ch.Offset, ch.Star, ch.Position(), ch.Segment, err)
		}
		recs, _, err := chunkRecords(ch)
		if err != nil {
			t.Fatalf("cutlinetest: stream %s: the ref at offset %d (%s/%v, segment %q) serves %q: %v", stream, ch.Offset, ch.Star, ch.Position(), ch.Segment, ch.Data, err)
		}
		for _, rec := range recs {
			if rec.Offset >= start {
				ids = append(ids, rec.ID)
			}
		}
	}
	if n, err := p.Refs.Next(ctx, stream); err != nil || n != next {
		t.Fatalf("cutlinetest: stream %s: continues at %d (%v), its refs end at %d", stream, n, err, next)
	}
	return ids
}

// ChainIDs reads star's whole chain in order through the party's Reader
// and returns the ids of its records with their positions: one for a
// Record, one per record (at the same position) for a Bundle. Anything
// else fails the test.
func (p *Party) ChainIDs(star string) ([]string, []chain.Position) {
	t := p.Env.T
	t.Helper()
	var ids []string
	var pos []chain.Position
	for f, err := range p.Reader.Flights(t.Context(), star, chain.Position{}) {
		if err != nil {
			t.Fatalf("cutlinetest: the chain of %s: %v", star, err)
		}
		if isBundle(f.Payload) {
			recs, err := ParseBundle(f.Payload)
			if err != nil {
				t.Fatalf("cutlinetest: the chain of %s at %v: %v", star, f.Position, err)
			}
			for _, r := range recs {
				ids = append(ids, r.ID)
				pos = append(pos, f.Position)
			}
			continue
		}
		_, _, id, err := ParseRecord(f.Payload)
		if err != nil {
			t.Fatalf("cutlinetest: the chain of %s at %v: %v", star, f.Position, err)
		}
		ids = append(ids, id)
		pos = append(pos, f.Position)
	}
	return ids, pos
}

// What Put places and State reports, one letter each.
const (
	Flight      = 'F' // the slot's flight
	Poison      = 'P' // poison for the slot
	Empty       = 'E' // nothing (State only; Put places nothing)
	Corrupt     = 'X' // bytes that are no slot object (State: any foreign object)
	Misplaced   = 'M' // a flight that claims another slot
	BadBody     = 'C' // the flight with an intact header and a corrupt body
	Conflicting = 'Y' // another well-formed flight for the slot (a second writer's)
	Unreachable = 'U' // the zone did not answer (State only)
)

// Slot names slot s of rec's epoch, at the record's key prefix.
func Slot(rec *epoch.Record, s uint64) wire.Addr {
	return wire.Addr{Keys: wire.KeysOf(rec), Star: rec.Star, Epoch: rec.Epoch, Slot: s}
}

// PutPayload is the payload of the flights Put places at slot s: a Record
// at offset s of stream "put", so that a settlement can cover it.
func PutPayload(s uint64) []byte { return Record("put", s, fmt.Sprintf("put-%d", s)) }

// Put creates an object of the given kind at slot s of rec's epoch in zone
// i's backend, behind every party's back. Create-only, like every write:
// Delete first to replace an object. An error fails the test.
func (e *Env) Put(i int, rec *epoch.Record, s uint64, kind byte) {
	e.T.Helper()
	var data []byte
	switch kind {
	case Flight:
		data = wire.EncodeFlight(rec.Star, rec.Epoch, s, PutPayload(s))
	case Poison:
		data = wire.EncodePoison(rec.Star, rec.Epoch, s, "cutlinetest")
	case Corrupt:
		data = []byte("this is not a slot object")
	case Misplaced:
		data = wire.EncodeFlight(rec.Star, rec.Epoch, s+1000, PutPayload(s))
	case BadBody:
		data = wire.EncodeFlight(rec.Star, rec.Epoch, s, PutPayload(s))
		data[len(data)-1] ^= 0xff
	case Conflicting:
		data = wire.EncodeFlight(rec.Star, rec.Epoch, s, []byte("another writer's payload"))
	case Empty:
		return
	default:
		e.T.Fatalf("cutlinetest: Put: unknown kind %q", kind)
	}
	if err := e.Raw[i].Create(e.T.Context(), Slot(rec, s).Key(), data); err != nil {
		e.T.Fatalf("cutlinetest: put %c at %s/%d/%d in %s: %v", kind, rec.Star, rec.Epoch, s, e.Raw[i].Name(), err)
	}
}

// Layout places objects from rows like "F P E", one row per slot from 0
// and one letter per zone.
func (e *Env) Layout(rec *epoch.Record, rows ...string) {
	e.T.Helper()
	for s, row := range rows {
		for i, c := range strings.Fields(row) {
			e.Put(i, rec, uint64(s), c[0])
		}
	}
}

// Delete removes the object at slot s of rec's epoch from zone i's backend.
func (e *Env) Delete(i int, rec *epoch.Record, s uint64) {
	e.T.Helper()
	if err := e.Raw[i].Delete(e.T.Context(), Slot(rec, s).Key()); err != nil {
		e.T.Fatalf("cutlinetest: delete %s/%d/%d in %s: %v", rec.Star, rec.Epoch, s, e.Raw[i].Name(), err)
	}
}

var letters = map[wire.SlotState]byte{
	wire.SlotEmpty: Empty, wire.SlotFlight: Flight, wire.SlotPoison: Poison, wire.SlotForeign: Corrupt, wire.SlotUnreachable: Unreachable,
}

// State reads slot s of rec's epoch whole in every zone's backend: a row
// like "F P E" (see the letters above; every foreign object reads X).
func (e *Env) State(rec *epoch.Record, s uint64) string {
	out := make([]string, len(e.Raw))
	for i, b := range e.Raw {
		out[i] = string(letters[wire.ObserveObject(e.T.Context(), b, Slot(rec, s)).State])
	}
	return strings.Join(out, " ")
}

// Record reads star's epoch record; an error fails the test.
func (e *Env) Record(star string, ep uint64) *epoch.Record {
	e.T.Helper()
	m, err := epoch.NewMinter(e.Store, epoch.Options{Root: e.opts.Root})
	if err == nil {
		var rec *epoch.Record
		if rec, err = m.Get(e.T.Context(), star, ep); err == nil {
			return rec
		}
	}
	e.T.Fatalf("cutlinetest: record %s/%d: %v", star, ep, err)
	return nil
}

// Check checks the six guarantees over the run recorded in h, on the Env's
// store and backend buckets (see Check).
func (e *Env) Check(h *History) Violations {
	return Check(e.T.Context(), Run{History: h, Store: e.Store, Root: e.opts.Root, Zones: e.Raw, Locate: e.opts.Locate})
}

// Verify fails the test with every violation of the run recorded in h.
func (e *Env) Verify(h *History) {
	e.T.Helper()
	Require(e.T, e.Check(h))
}
