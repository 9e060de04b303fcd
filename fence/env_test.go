package fence

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/internal/testctx"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/memblob"
)

// env is one star's storage for a test: a minter over an in-memory
// metastore, one minted epoch, and K zones. Each zone is a backend bucket
// (raw) wrapped by fault injection (zones), so a test can take a zone down
// (SetDown) or inject errors while state() still reads the backend
// directly.
//
// It is not cutlinetest's Env, whose letters it shares, because it cannot
// be: cutlinetest imports fence, and these tests are internal (package
// fence: they call the walk, classify and lateCut), so importing cutlinetest
// here would be an import cycle. What else they share is internal/testctx.
type env struct {
	t      testing.TB
	store  metastore.Store
	minter *epoch.Minter
	raw    []objstore.Bucket
	zones  []*fault.Bucket
	rec    *epoch.Record
	keys   wire.Keys
}

const star = "star-a"

// newEnv makes K in-memory zones named a, b, c… and mints an epoch with
// quorum w and the given window.
func newEnv(t testing.TB, k, w, window int) *env {
	t.Helper()
	raw := make([]objstore.Bucket, k)
	for i := range raw {
		raw[i] = memblob.New(string(rune('a' + i)))
	}
	return newEnvOn(t, raw, w, window)
}

// newEnvOn mints an epoch over the given backend buckets (any backend).
func newEnvOn(t testing.TB, raw []objstore.Bucket, w, window int) *env {
	t.Helper()
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	require.NoError(t, err)
	e := &env{t: t, store: store, minter: m, raw: raw, keys: wire.Keys{Prefix: "chains"}}
	for i, b := range raw {
		e.zones = append(e.zones, fault.Wrap(b, fault.Options{Seed: uint64(i + 1)}))
	}
	e.rec, err = m.Mint(bounded(t), star, epoch.Constants{Class: "standard", Buckets: chain.Names(raw...), W: w, Window: window, Prefix: e.keys.Prefix})
	require.NoError(t, err)
	return e
}

// view returns the zones in the epoch's order as one party (a writer, a
// fencer) sees them: the fault-injecting zones, each optionally wrapped
// further (latency, request counting).
func (e *env) view(wrap func(i int, b objstore.Bucket) objstore.Bucket) []objstore.Bucket {
	out := make([]objstore.Bucket, len(e.zones))
	for i, z := range e.zones {
		out[i] = z
		if wrap != nil {
			out[i] = wrap(i, z)
		}
	}
	return out
}

func (e *env) buckets() chain.Zones { return chain.MustZones(e.view(nil)...) }

func (e *env) fencer(opts Options) *Fencer {
	e.t.Helper()
	return e.fencerOn(e.buckets(), opts)
}

func (e *env) fencerOn(zones chain.Zones, opts Options) *Fencer {
	e.t.Helper()
	f, err := New(e.minter, zones, opts)
	require.NoError(e.t, err)
	return f
}

// writer returns a writer of the epoch over buckets (in the epoch's
// order); it is aborted when the test ends unless the test closed it.
func (e *env) writer(buckets []objstore.Bucket, opts chain.WriterOptions) *chain.Writer {
	e.t.Helper()
	w, err := chain.NewWriter(e.rec, chain.MustZones(buckets...), opts)
	require.NoError(e.t, err)
	e.t.Cleanup(w.Abort)
	return w
}

func payload(slot uint64) []byte { return fmt.Appendf(nil, "payload-%d", slot) }

func (e *env) slot(s uint64) wire.Addr {
	return wire.Addr{Keys: e.keys, Star: star, Epoch: e.rec.Epoch, Slot: s}
}

// largePayload is slot's payload of a flight larger than wholeLimit.
func largePayload(slot uint64) []byte {
	p := make([]byte, wholeLimit+4096)
	copy(p, payload(slot))
	return p
}

// put places an object in bucket b at slot: 'F' flight, 'P' poison, 'X'
// a foreign (corrupt) object, 'M' a misplaced flight (claims another slot),
// 'C' the flight with an intact header and a corrupt body, 'Y' another
// well-formed flight for the slot (a second writer's); 'f', 'c' and 'y'
// are 'F', 'C' and 'Y' with a payload larger than wholeLimit
// (largePayload; 'y' the same length as 'f').
func (e *env) put(slot uint64, b int, kind byte) {
	e.t.Helper()
	var data []byte
	switch kind {
	case 'f', 'c', 'y':
		p := largePayload(slot)
		if kind == 'y' {
			p[len(p)-1] = 'y'
		}
		data = wire.EncodeFlight(star, e.rec.Epoch, slot, p)
		if kind == 'c' {
			data[len(data)-1] ^= 0xff
		}
	case 'F':
		data = wire.EncodeFlight(star, e.rec.Epoch, slot, payload(slot))
	case 'P':
		data = wire.EncodePoison(star, e.rec.Epoch, slot, "earlier-fencer")
	case 'X':
		data = []byte("this is not a slot object")
	case 'M':
		data = wire.EncodeFlight(star, e.rec.Epoch, slot+1000, payload(slot))
	case 'C':
		data = wire.EncodeFlight(star, e.rec.Epoch, slot, payload(slot))
		data[len(data)-1] ^= 0xff
	case 'Y':
		data = wire.EncodeFlight(star, e.rec.Epoch, slot, []byte("another writer's payload"))
	default:
		return
	}
	require.NoError(e.t, e.raw[b].Create(bounded(e.t), e.slot(slot).Key(), data))
}

// layout places objects from rows like "F F E", one row per slot from 0.
func (e *env) layout(rows ...string) {
	for s, row := range rows {
		for b, c := range strings.Fields(row) {
			e.put(uint64(s), b, c[0])
		}
	}
}

var stateLetter = map[wire.SlotState]string{
	wire.SlotEmpty: "E", wire.SlotFlight: "F", wire.SlotPoison: "P", wire.SlotForeign: "X", wire.SlotUnreachable: "U",
}

// state reads slot s in every backend bucket (bypassing injected faults): a
// row like "F P E".
func (e *env) state(s uint64) string {
	out := make([]string, len(e.raw))
	for i, b := range e.raw {
		out[i] = stateLetter[wire.ObserveObject(bounded(e.t), b, e.slot(s)).State]
	}
	return strings.Join(out, " ")
}

func (e *env) record() *epoch.Record {
	r, err := e.minter.Get(bounded(e.t), star, e.rec.Epoch)
	require.NoError(e.t, err)
	return r
}

func countOf(state string, c byte) int {
	n := 0
	for i := 0; i < len(state); i++ {
		if state[i] == c {
			n++
		}
	}
	return n
}

// checkCut asserts the invariants of a published cut on the backend
// buckets: [0, cut) committed (≥ W flights each, so no holes), the cut
// dead (≥ B poison, < W flights), and the record agreeing.
func (e *env) checkCut(cut uint64) {
	e.t.Helper()
	w, b := e.rec.Constants.W, e.rec.Constants.B()
	for s := uint64(0); s < cut; s++ {
		st := e.state(s)
		require.GreaterOrEqual(e.t, countOf(st, 'F'), w, "slot %d below the cut %d is committed: %s", s, cut, st)
	}
	st := e.state(cut)
	require.GreaterOrEqual(e.t, countOf(st, 'P'), b, "the cut %d is dead: %s", cut, st)
	require.Less(e.t, countOf(st, 'F'), w, "the cut %d can never commit: %s", cut, st)
	rec := e.record()
	require.True(e.t, rec.Fenced(), "the record is fenced")
	require.Equal(e.t, cut, rec.Cut, "the published cut")
}

// fenceUntilBlocked runs f's fence of the env's epoch on a fake clock
// until the fence waits on that clock (blocked on an undecided slot), then
// expires its context and returns the outcome.
func (e *env) fenceUntilBlocked(f *Fencer, fc *clock.Fake) (Report, error) {
	ctx := testctx.NewExpiring()
	type result struct {
		rep Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := f.FenceReport(ctx, star, e.rec.Epoch)
		done <- result{rep, err}
	}()
	failfast.Timers(e.t, fc, 1, "the fence to wait on the clock for an undecided slot")
	ctx.Expire()
	r := failfast.Recv(e.t, done, "the fence to end with its context")
	return r.rep, r.err
}

// bounded returns a context that ends failfast.Bound from now: a call of
// a test that takes milliseconds when the code is right fails instead of
// hanging when it is not. It does not end with t's context, so that a
// cleanup may use it too.
func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), failfast.Bound)
	t.Cleanup(cancel)
	return ctx
}
