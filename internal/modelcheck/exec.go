package modelcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// star is the one star of every execution.
const star = "star-m"

// fencerIdentity is every fencer's: their poison is byte-identical, so
// that the fencers are interchangeable and the fingerprint treats them as
// a set (symmetry reduction).
const fencerIdentity = "fencer"

// errUnreachable is the cause of an answer the scheduler withheld.
var errUnreachable = errors.New("modelcheck: no answer (scheduled fault)")

// request is one object-store or metastore request of one party, held
// until the scheduler decides its fate.
type request struct {
	id       string // canonical: party, operation, bucket, key
	party    *party
	mutating bool
	// zone and key name the object a Create, Get or GetRange is about
	// (zone −1 for other requests): see stable.
	zone int
	key  string
	read bool // a Get, GetRange or metastore Get: changes nothing
	// deferred: the scheduler put the read off until its object (or the
	// record) changes from version deferredAt; see options.
	deferred   bool
	deferredAt string
	// considered: the scheduler has decided that this request is not
	// withheld and that its party does not crash before it is answered;
	// see options.
	considered bool
	run        func() (any, error)     // performs the request on the inner store
	answer     func(any, error) string // what the party learns, in short
	unavail    func() error            // the error of an answer that never came
	reply      chan reply
}

type reply struct {
	val     any
	err     error
	crashed bool // the party crashed: the request never returns an answer
}

// party is the writer or one fencer.
type party struct {
	name    string
	ctx     context.Context // cancelled when the party crashes
	cancel  context.CancelFunc
	crashed bool
	crashes int
	done    bool
	seq     []string            // answers in arrival order ("id=answer")
	perID   map[string][]string // answers per request, in order

	// A fencer's outcome, once done.
	cut uint64
	err error
}

// caches are shared by the executions of one search.
type caches struct {
	seen map[string]wire.Observation
	recs map[string]*epoch.Record
}

// exec is one execution: fresh stores, a freshly minted epoch, the
// parties running in the synctest bubble, and what the scheduler has
// decided so far.
type exec struct {
	cfg Config

	mu      sync.Mutex
	pending map[string]*request
	dup     string // a request sent twice at once (breaks canonical naming)
	beyond  string // a create past slot Slots (breaks the reduction's premise)
	parties []*party
	writer  *party
	tearing bool
	faults  int

	zones  []*memblob.Bucket
	shadow []map[string]string // per zone: key → digest of what the inner bucket holds
	store  *memstore.Store
	minter *epoch.Minter // over the inner store: for checks, never scheduled
	rec    *epoch.Record
	keys   wire.Keys
	w      *chain.Writer
	// futures are the writer's, in slot order, and payloads what each
	// carries.
	futures  []*chain.Future
	payloads [][]byte

	// seen caches the checks' observations of objects by content, across
	// the executions of one search (the scheduler's goroutine alone uses
	// it).
	seen map[string]wire.Observation
	// recs caches the decoded records by revision and value, across the
	// executions of one search. A record is never modified once decoded.
	recs map[string]*epoch.Record

	wg    sync.WaitGroup
	trace []string

	// prev is the record as the previous state held it, for the
	// transition check (a published record never changes).
	prev    metastore.KV
	prevRec *epoch.Record
	// cached is the record last decoded, at revision cachedRev.
	cached    *epoch.Record
	cachedRev int64
}

func payloadOf(i int) []byte { return fmt.Appendf(nil, "payload-%d", i) }

// newExec builds an execution and starts its parties. It runs inside the
// bubble.
func newExec(cfg Config, c *caches) (*exec, error) {
	x := &exec{cfg: cfg, pending: map[string]*request{}, seen: c.seen, recs: c.recs}
	x.store = memstore.New(memstore.Options{Clock: instant{}})
	m, err := epoch.NewMinter(x.store, epoch.Options{Clock: instant{}, Identity: "modelcheck"})
	if err != nil {
		return nil, err
	}
	x.minter = m
	names := make([]string, cfg.K)
	for i := range names {
		names[i] = "z" + strconv.Itoa(i)
		x.zones = append(x.zones, memblob.New(names[i]))
		x.shadow = append(x.shadow, map[string]string{})
	}
	x.rec, err = m.Mint(context.Background(), star, epoch.Constants{Class: "standard", Buckets: names, W: cfg.W, Window: cfg.Window, Prefix: "chains"})
	if err != nil {
		return nil, err
	}
	x.keys = wire.KeysOf(x.rec)
	backoff := clock.Backoff{Min: time.Millisecond, Max: time.Millisecond}

	wp := x.newParty("W")
	x.writer = wp
	x.w, err = chain.NewWriter(x.rec, x.zonesFor(wp), chain.WriterOptions{Clock: instant{}, Backoff: backoff})
	if err != nil {
		return nil, err
	}
	fencers := make([]*fence.Fencer, cfg.Fencers)
	fparties := make([]*party, cfg.Fencers)
	for i := range fencers {
		p := x.newParty("F" + strconv.Itoa(i+1))
		fm, err := epoch.NewMinter(&schedStore{x: x, p: p, inner: x.store}, epoch.Options{Clock: instant{}, Identity: p.name})
		if err != nil {
			return nil, err
		}
		fencers[i], err = fence.New(fm, x.zonesFor(p), fence.Options{
			Identity: fencerIdentity, Span: cfg.Span, Fanout: cfg.Fanout, MaxParallel: cfg.MaxParallel,
			Clock: instant{}, Backoff: backoff,
		})
		if err != nil {
			return nil, err
		}
		fparties[i] = p
	}

	x.wg.Add(1 + len(fencers))
	go x.runWriter(wp)
	for i, f := range fencers {
		go x.runFencer(fparties[i], f)
	}
	return x, nil
}

func (x *exec) newParty(name string) *party {
	ctx, cancel := context.WithCancel(context.Background())
	p := &party{name: name, ctx: ctx, cancel: cancel, perID: map[string][]string{}}
	x.parties = append(x.parties, p)
	return p
}

// zonesFor returns the zones as party p sees them: every request goes
// through the scheduler.
func (x *exec) zonesFor(p *party) chain.Zones {
	bs := make([]objstore.Bucket, len(x.zones))
	for i, z := range x.zones {
		bs[i] = &schedBucket{x: x, p: p, i: i, inner: z}
	}
	return chain.MustZones(bs...)
}

// runWriter submits the payloads (the window holds Submit back), waits
// for every outcome and closes the writer; a crash aborts it.
func (x *exec) runWriter(p *party) {
	defer x.partyDone(p)
	ctx := p.ctx
	for i := range x.cfg.Slots {
		pl := payloadOf(i)
		f, err := x.w.Submit(ctx, pl)
		if err != nil {
			break
		}
		x.mu.Lock()
		x.futures = append(x.futures, f)
		x.payloads = append(x.payloads, pl)
		x.mu.Unlock()
	}
	x.mu.Lock()
	fs := append([]*chain.Future(nil), x.futures...)
	x.mu.Unlock()
	for _, f := range fs {
		select {
		case <-f.Done():
		case <-ctx.Done():
		}
	}
	if err := x.w.Close(ctx); err != nil {
		x.w.Abort()
	}
}

func (x *exec) runFencer(p *party, f *fence.Fencer) {
	defer x.partyDone(p)
	rep, err := f.FenceReport(p.ctx, star, x.rec.Epoch)
	x.mu.Lock()
	p.cut, p.err = rep.Cut, err
	x.mu.Unlock()
}

func (x *exec) partyDone(p *party) {
	x.mu.Lock()
	p.done = true
	x.mu.Unlock()
	x.wg.Done()
}

// call registers a request and blocks until the scheduler decides it. A
// crashed party's request never gets an answer: it returns only once the
// party's context ends, as a dead process's would.
func (x *exec) call(ctx context.Context, p *party, zone int, op, bucket, key string, mutating bool,
	run func() (any, error), answer func(any, error) string, unavail func() error) (any, error) {
	x.mu.Lock()
	if p.crashed || x.tearing {
		x.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	id := p.name + " " + op + " " + bucket + " " + key
	if s, ok := x.slotOf(key); ok && op == "create" && s > uint64(x.cfg.Slots) && x.beyond == "" {
		x.beyond = id
	}
	if _, ok := x.pending[id]; ok {
		x.dup = id
		id += " (again)"
	}
	r := &request{id: id, party: p, mutating: mutating, zone: zone, key: key, read: strings.Contains(op, "get") || strings.HasPrefix(op, "range"), run: run, answer: answer, unavail: unavail, reply: make(chan reply, 1)}
	x.pending[id] = r
	x.mu.Unlock()
	rep := <-r.reply
	if rep.crashed {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return rep.val, rep.err
}

// Decision kinds.
const (
	deliver = "deliver"
	unreach = "unreachable"
	lost    = "lost-answer"
	crash   = "crash"
	later   = "defer"
	proceed = "no-fault"
)

// decision is one step of the scheduler, named canonically so that a
// replay finds it again.
type decision struct {
	kind   string
	target string // a request id, or a party name for a crash
}

func (d decision) String() string { return d.kind + " " + d.target }

// options lists the decisions possible now: every pending request
// delivered, and within the fault budget withheld or its answer lost, and
// every running party crashed. Deliveries come first, so that the search
// meets the fault-free executions first.
//
// With reduce, two partial-order reductions apply (see the package doc).
// A state with a stable request (see stableLocked) gets only that
// request's decisions and its party's crash. Otherwise a state with a read
// whose answer can still change gets only: that read delivered now (or
// withheld, or its party crashed), or deferred until what it reads
// changes. A read answered now or at any later time before that change
// gets the same answer, and a read changes nothing, so delivering it now
// stands for every later delivery with the same answer; the deferred
// branch covers the answers after the change.
func (x *exec) options(reduce bool) []decision {
	x.mu.Lock()
	defer x.mu.Unlock()
	var ids []string
	for _, id := range x.pendingIDsLocked() {
		if !x.pending[id].deferred {
			ids = append(ids, id)
		}
	}
	var out []decision
	if reduce && x.cfg.Strict {
		// A strict search tells apart the orders of a party's own
		// answers, so only a stable request that is its party's only
		// one may go first alone.
		for _, id := range ids {
			if x.stableLocked(x.pending[id]) {
				return x.requestOptionsLocked(x.pending[id])
			}
		}
		reduce = false
	}
	if reduce {
		// Faults first, once per request: withholding an answer, or
		// crashing the party, changes nothing another party can see and
		// does not depend on when it happens, so deciding it as soon as
		// the request is sent stands for deciding it at any later
		// time.
		for _, id := range ids {
			r := x.pending[id]
			if r.considered {
				continue
			}
			if !x.faultableLocked(r) {
				// No fault left to decide: nothing to branch on.
				r.considered = true
				continue
			}
			out = append(out, decision{proceed, id})
			if x.faults < x.cfg.Faults {
				out = append(out, decision{unreach, id})
			}
			if p := r.party; !p.done && !p.crashed && p.crashes < x.cfg.Crashes {
				out = append(out, decision{crash, p.name})
			}
			return out
		}
		for _, id := range ids {
			if r := x.pending[id]; !x.cfg.noStable && x.soleLocked(r) && x.fixedLocked(r) {
				out = []decision{{deliver, id}}
				if r.mutating && x.faults < x.cfg.Faults {
					// It may still land without its answer.
					out = append(out, decision{lost, id})
				}
				return out
			}
		}
		for _, id := range ids {
			if r := x.pending[id]; r.read && x.soleLocked(r) {
				return []decision{{deliver, id}, {later, id}}
			}
		}
		for _, id := range ids {
			out = append(out, decision{deliver, id})
		}
		if x.faults < x.cfg.Faults {
			for _, id := range ids {
				if x.pending[id].mutating {
					out = append(out, decision{lost, id})
				}
			}
		}
		return out
	}
	for _, id := range ids {
		out = append(out, decision{deliver, id})
	}
	if x.faults < x.cfg.Faults {
		for _, id := range ids {
			out = append(out, decision{unreach, id})
			if x.pending[id].mutating {
				out = append(out, decision{lost, id})
			}
		}
	}
	for _, p := range x.parties {
		if p.done || p.crashed || p.crashes >= x.cfg.Crashes {
			continue
		}
		for _, id := range ids {
			if x.pending[id].party == p {
				out = append(out, decision{crash, p.name})
				break
			}
		}
	}
	return out
}

// faultableLocked reports whether a fault can still be decided for r:
// the fault budget is not spent, or r's party may still crash. x.mu is
// held.
func (x *exec) faultableLocked(r *request) bool {
	p := r.party
	return x.faults < x.cfg.Faults || (!p.done && !p.crashed && p.crashes < x.cfg.Crashes)
}

// requestOptionsLocked lists every decision about r alone: delivered,
// withheld, its answer lost, its party crashed. x.mu is held.
func (x *exec) requestOptionsLocked(r *request) []decision {
	out := []decision{{deliver, r.id}}
	if x.faults < x.cfg.Faults {
		out = append(out, decision{unreach, r.id})
		if r.mutating {
			out = append(out, decision{lost, r.id})
		}
	}
	if p := r.party; !p.done && !p.crashed && p.crashes < x.cfg.Crashes {
		out = append(out, decision{crash, p.name})
	}
	return out
}

// versionLocked is the version of what r reads: the digest of its object,
// or the record's revision. x.mu is held.
func (x *exec) versionLocked(r *request) string {
	if r.zone >= 0 {
		return x.shadow[r.zone][r.key]
	}
	kv, err := x.store.Get(context.Background(), r.key)
	return fmt.Sprintf("%d %v", kv.Revision, err)
}

// undefer releases the deferred reads whose object or record changed.
func (x *exec) undefer() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.pending {
		if r.deferred && x.versionLocked(r) != r.deferredAt {
			r.deferred = false
		}
	}
}

// hopeless reports whether a deferred read waits for a change that can no
// longer come: the execution then only repeats what the branch that
// answered the read at once explores.
func (x *exec) hopeless() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.pending {
		if r.deferred && x.fixedLocked(r) {
			return true
		}
	}
	return false
}

// deferredOnly reports whether requests are pending, all deferred.
func (x *exec) deferredOnly() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.pending {
		if !r.deferred {
			return false
		}
	}
	return len(x.pending) > 0
}

// stableLocked reports whether r's outcome cannot depend on when it is
// delivered, and r changes nothing another party can ever see; and r is
// the only request its party is waiting on (so that no order of the
// party's own answers is left out). That holds for
//
//   - a Create, Get or GetRange of an object that already exists: objects
//     are never overwritten, and no party of the model deletes;
//   - a Create, Get or GetRange of an object that no other party can
//     still create: every other fencer is done or crashed, and so is the
//     writer or the slot is one it never writes (the writer writes only
//     the slots below Config.Slots);
//   - a metastore request of a fencer whose rival fencers are all done or
//     crashed (only fencers use the metastore during an execution).
//
// Such a request commutes with every step of the other parties, now and
// later, so exploring its decisions alone (with its party's crash) loses
// no state that the checks can tell apart. x.mu is held.
func (x *exec) stableLocked(r *request) bool {
	return x.soleLocked(r) && x.fixedLocked(r)
}

// soleLocked reports whether r is the only request its party waits on:
// delivering it first then reorders no answers of its own party. x.mu is
// held.
func (x *exec) soleLocked(r *request) bool {
	for _, o := range x.pending {
		if o != r && o.party == r.party {
			return false
		}
	}
	return true
}

// fixedLocked reports whether r's answer can no longer change: see
// stableLocked. x.mu is held.
func (x *exec) fixedLocked(r *request) bool {
	slot, isSlot := uint64(0), false
	if r.zone >= 0 {
		if _, ok := x.shadow[r.zone][r.key]; ok {
			return true
		}
		slot, isSlot = x.slotOf(r.key)
		if isSlot && slot > uint64(x.cfg.Slots) {
			// Nobody creates past the slot after the writer's last: the
			// writer writes below Slots and the walk stops at the first
			// dead slot, at Slots at the latest (x.beyond checks that
			// this holds).
			return true
		}
	}
	for _, p := range x.parties {
		if p == r.party || p.done || p.crashed {
			continue
		}
		if p != x.writer {
			return false // a rival fencer may still write anything
		}
		if r.zone < 0 {
			continue // the writer never uses the metastore
		}
		if !isSlot || slot < uint64(x.cfg.Slots) {
			return false
		}
	}
	return true
}

// slotOf parses the slot number of an object key.
func (x *exec) slotOf(key string) (uint64, bool) {
	return x.keys.ParseSlot(star, x.rec.Epoch, key)
}

func (x *exec) pendingIDsLocked() []string {
	return slices.Sorted(maps.Keys(x.pending))
}

// valid reports whether d is possible now.
func (x *exec) valid(d decision) bool {
	for _, o := range x.options(!x.cfg.NoReduce) {
		if o == d {
			return true
		}
	}
	return false
}

// apply carries d out. The caller waits for the bubble to settle after.
func (x *exec) apply(d decision) {
	x.mu.Lock()
	defer x.mu.Unlock()
	step := fmt.Sprintf("%3d  %s", len(x.trace), describe(d))
	if d.kind == crash {
		for _, p := range x.parties {
			if p.name != d.target {
				continue
			}
			p.crashed = true
			p.crashes++
			p.cancel()
			for id, r := range x.pending {
				if r.party == p {
					delete(x.pending, id)
					r.reply <- reply{crashed: true}
				}
			}
		}
		x.trace = append(x.trace, step)
		return
	}
	r := x.pending[d.target]
	switch d.kind {
	case later:
		r.deferred, r.deferredAt = true, x.versionLocked(r)
		x.trace = append(x.trace, step)
		return
	case proceed:
		r.considered = true
		return // not worth a line of the trace: nothing happens
	}
	delete(x.pending, d.target)
	var rep reply
	var ans string
	switch d.kind {
	case deliver:
		rep.val, rep.err = r.run()
		ans = r.answer(rep.val, rep.err)
	case unreach:
		x.faults++
		rep.err = r.unavail()
		ans = "unavailable"
	case lost:
		x.faults++
		v, err := r.run()
		rep.err = r.unavail()
		ans = "unavailable"
		step += fmt.Sprintf(" (ran: %s)", r.answer(v, err))
	}
	// A fault or a crash of the party is decided again for its other
	// requests: what the party makes of one depends on the answers it
	// got before, so it must be possible between any two of them.
	for _, o := range x.pending {
		if o.party == r.party {
			o.considered = false
		}
	}
	r.party.seq = append(r.party.seq, r.id+"="+ans)
	r.party.perID[r.id] = append(r.party.perID[r.id], ans)
	x.trace = append(x.trace, step+" → "+ans)
	r.reply <- rep
}

// teardown ends the execution wherever it stands: every party is crashed
// (pending requests never answered, contexts cancelled) and the writer
// aborted; it returns once every goroutine of the execution has exited.
func (x *exec) teardown() {
	x.mu.Lock()
	x.tearing = true
	for _, p := range x.parties {
		p.cancel()
	}
	for id, r := range x.pending {
		delete(x.pending, id)
		r.reply <- reply{crashed: true}
	}
	x.mu.Unlock()
	x.wg.Wait()
}

// describe shortens a decision for a trace: slot keys become "slot N"
// and the epoch record's key "record".
func describe(d decision) string {
	t := d.target
	if j := strings.LastIndex(t, " "); j >= 0 {
		head, key := t[:j], t[j+1:]
		switch {
		case strings.HasSuffix(head, " meta"):
			t = head + " record"
		case len(key) > 21 && key[len(key)-21] == '/':
			if n, err := strconv.ParseUint(key[len(key)-20:], 10, 64); err == nil {
				t = head + " slot " + strconv.FormatUint(n, 10)
			}
		}
	}
	return fmt.Sprintf("%-11s %s", d.kind, t)
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:6])
}

// errClass names an answer's error by the sentinel it matches.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, objstore.ErrNotFound), errors.Is(err, metastore.ErrNotFound):
		return "not-found"
	case errors.Is(err, objstore.ErrExists):
		return "exists"
	case errors.Is(err, metastore.ErrConflict):
		return "conflict"
	case errors.Is(err, objstore.ErrUnavailable), errors.Is(err, metastore.ErrUnavailable):
		return "unavailable"
	}
	return "error: " + err.Error()
}

// schedBucket is one zone as one party sees it: every request waits for
// the scheduler.
type schedBucket struct {
	x     *exec
	p     *party
	i     int
	inner *memblob.Bucket
}

var _ objstore.Bucket = (*schedBucket)(nil)

func (b *schedBucket) Name() string { return b.inner.Name() }

func (b *schedBucket) unavail(op, key string) func() error {
	return func() error {
		return &objstore.OpError{Op: op, Bucket: b.inner.Name(), Key: key, Err: objstore.Unavailable(errUnreachable)}
	}
}

func dataAnswer(v any, err error) string {
	if err != nil {
		return errClass(err)
	}
	return "ok " + digest(v.([]byte))
}

func plainAnswer(_ any, err error) string { return errClass(err) }

// Create implements objstore.Bucket.
func (b *schedBucket) Create(ctx context.Context, key string, data []byte) error {
	data = append([]byte(nil), data...)
	_, err := b.x.call(ctx, b.p, b.i, "create", b.inner.Name(), key, true, func() (any, error) {
		err := b.inner.Create(context.Background(), key, data)
		if err == nil {
			b.x.shadow[b.i][key] = digest(data) // x.mu is held by apply
		}
		return nil, err
	}, plainAnswer, b.unavail("create", key))
	return err
}

// Get implements objstore.Bucket.
func (b *schedBucket) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := b.x.call(ctx, b.p, b.i, "get", b.inner.Name(), key, false, func() (any, error) {
		return b.inner.Get(context.Background(), key)
	}, dataAnswer, b.unavail("get", key))
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// GetRange implements objstore.Bucket.
func (b *schedBucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	op := fmt.Sprintf("range[%d+%d]", offset, length)
	v, err := b.x.call(ctx, b.p, b.i, op, b.inner.Name(), key, false, func() (any, error) {
		return b.inner.GetRange(context.Background(), key, offset, length)
	}, dataAnswer, b.unavail("getrange", key))
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// Delete implements objstore.Bucket.
func (b *schedBucket) Delete(ctx context.Context, key string) error {
	_, err := b.x.call(ctx, b.p, -1, "delete", b.inner.Name(), key, true, func() (any, error) {
		err := b.inner.Delete(context.Background(), key)
		if err == nil {
			delete(b.x.shadow[b.i], key)
		}
		return nil, err
	}, plainAnswer, b.unavail("delete", key))
	return err
}

// List implements objstore.Bucket.
func (b *schedBucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	v, err := b.x.call(ctx, b.p, -1, "list", b.inner.Name(), prefix+"|"+startAfter, false, func() (any, error) {
		return b.inner.List(context.Background(), prefix, startAfter, limit)
	}, func(v any, err error) string {
		if err != nil {
			return errClass(err)
		}
		var keys []string
		for _, o := range v.([]objstore.ObjectInfo) {
			keys = append(keys, o.Key)
		}
		return "ok " + digest([]byte(strings.Join(keys, "\n")))
	}, b.unavail("list", prefix))
	if err != nil {
		return nil, err
	}
	return v.([]objstore.ObjectInfo), nil
}

// schedStore is the metastore as one fencer sees it: Get and Txn (what
// epoch.Minter's Get and Publish use) wait for the scheduler; the rest,
// which no party of the model calls, goes straight through.
type schedStore struct {
	x     *exec
	p     *party
	inner *memstore.Store
}

var _ metastore.Store = (*schedStore)(nil)

func (s *schedStore) unavail(op, key string) func() error {
	return func() error { return fmt.Errorf("metastore %s %q: %w", op, key, metastore.Unavailable(errUnreachable)) }
}

// Get implements metastore.Store.
func (s *schedStore) Get(ctx context.Context, key string) (metastore.KV, error) {
	v, err := s.x.call(ctx, s.p, -1, "meta-get", "meta", key, false, func() (any, error) {
		return s.inner.Get(context.Background(), key)
	}, func(v any, err error) string {
		if err != nil {
			return errClass(err)
		}
		kv := v.(metastore.KV)
		return fmt.Sprintf("ok rev %d %s", kv.Revision, digest(kv.Value))
	}, s.unavail("get", key))
	if err != nil {
		return metastore.KV{}, err
	}
	return v.(metastore.KV), nil
}

// Txn implements metastore.Store.
func (s *schedStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	key := ""
	if len(t.Then) > 0 {
		key = t.Then[0].Key
	}
	v, err := s.x.call(ctx, s.p, -1, "meta-txn", "meta", key, true, func() (any, error) {
		return s.inner.Txn(context.Background(), t)
	}, func(v any, err error) string {
		if err != nil {
			return errClass(err)
		}
		return fmt.Sprintf("ok rev %d", v.(int64))
	}, s.unavail("txn", key))
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// List implements metastore.Store (not scheduled: no party lists).
func (s *schedStore) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	return s.inner.List(ctx, prefix)
}

// Watch implements metastore.Store (not scheduled: no party watches).
func (s *schedStore) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	return s.inner.Watch(ctx, prefix, from)
}

// NewSession implements metastore.Store (not scheduled: no party of the
// model calls it).
func (s *schedStore) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	return s.inner.NewSession(ctx, ttl)
}
