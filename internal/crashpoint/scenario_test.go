package crashpoint_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/crashpoint"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

const starA = "star-a"

// scenarioTimeout bounds every wait of a scenario, in the bubble's
// virtual time: a recovery that cannot finish fails with the context's
// error instead of retrying forever.
const scenarioTimeout = time.Hour

// scenario is one real flow: a process (the party whose requests go
// through the crash switch) runs a step of the protocol, a host recovers
// from wherever it stopped, and every guarantee is checked. With a switch
// in Record mode nothing crashes and the flow must complete.
type scenario struct {
	name string
	run  func(t *testing.T, sw *crashpoint.Switch)
}

var scenarios = []scenario{
	{"write", scenarioWrite},
	{"takeover", scenarioTakeover},
	{"trim", scenarioTrim},
	{"roll", scenarioRoll},
	{"lease", scenarioLease},
	{"retain", scenarioRetain},
	{"migrate", scenarioMigrate},
	{"compact", scenarioCompact},
}

// process is the crashing party: its own minter, fencer, index, settler
// and reader over the switch's view of the Env's store and zones.
type process struct {
	*cutlinetest.Party
	store metastore.Store
}

func newProcess(t *testing.T, env *cutlinetest.Env, name string, sw *crashpoint.Switch) *process {
	t.Helper()
	st := sw.Store(env.Store)
	var bs []objstore.Bucket
	for _, z := range env.Zones {
		bs = append(bs, sw.Bucket(z))
	}
	p := &cutlinetest.Party{Name: name, Env: env, Zones: chain.MustZones(bs...)}
	var err error
	p.Minter, err = epoch.NewMinter(st, epoch.Options{Identity: name})
	require.NoError(t, err)
	p.Fencer, err = fence.New(p.Minter, p.Zones, fence.Options{Identity: name})
	require.NoError(t, err)
	p.Refs, err = settle.NewRefIndex(st, "", cutlinetest.Locate)
	require.NoError(t, err)
	p.Settler, err = settle.New(p.Minter, p.Zones, p.Refs, settle.Options{Fencer: p.Fencer})
	require.NoError(t, err)
	p.Reader, err = chain.NewReader(p.Minter, p.Zones, chain.ReaderOptions{})
	require.NoError(t, err)
	return &process{Party: p, store: st}
}

// crashed fails t unless err comes from the process's crash.
func crashed(t *testing.T, sw *crashpoint.Switch, err error, step string) {
	t.Helper()
	require.Error(t, err, step)
	require.True(t, sw.Dead(), "%s failed without a crash: %v", step, err)
}

func idsOf(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// feed submits ids to h until one is refused; it returns the ids the
// producer still has to place somewhere (the refused one and those never
// submitted).
func feed(ctx context.Context, h *cutlinetest.Host, ids []string) []string {
	for i, id := range ids {
		if err := h.Submit(ctx, id); err != nil {
			return ids[i+1:] // the refused one is among h.Failed
		}
	}
	return nil
}

// finishHost ends a process's host: closed when the process lives,
// killed when it crashed (at any point of the close too).
func finishHost(t *testing.T, sw *crashpoint.Switch, h *cutlinetest.Host, pctx context.Context, want int) {
	t.Helper()
	if err := h.WaitAcked(pctx, want); err != nil {
		crashed(t, sw, err, "appends")
	}
	if !sw.Dead() {
		err := h.Close(pctx)
		if !sw.Dead() {
			require.NoError(t, err, "close")
		}
	}
	if sw.Dead() {
		h.Kill()
	}
}

// retry is the producer after a crash: what was not acknowledged goes to
// the successor's host.
func retry(t *testing.T, ctx context.Context, h *cutlinetest.Host, ids []string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, h.Submit(ctx, id))
	}
	require.NoError(t, h.WaitAcked(ctx, len(ids)))
	require.NoError(t, h.Close(ctx))
}

// requireReadBack reads stream back through a fresh party's index and
// reader: every acknowledged id of the stream is found exactly once (or
// more, only when the id also met a failure of unknown outcome and was
// retried: at-least-once for what was not acknowledged), and every id in
// must at least once.
func requireReadBack(t *testing.T, env *cutlinetest.Env, hist *cutlinetest.History, stream string, must []string) {
	t.Helper()
	got := env.Party("reader").StreamIDs(stream)
	n := map[string]int{}
	for _, id := range got {
		n[id]++
	}
	evs := hist.Events()
	retried := map[string]bool{}
	for _, ev := range evs {
		if ev.Op == cutlinetest.Failed || ev.Op == cutlinetest.Submitted && !answered(evs, ev) {
			retried[ev.ID] = true
		}
	}
	for _, ev := range evs {
		if ev.Op != cutlinetest.Acked {
			continue
		}
		if s, _, _, err := cutlinetest.ParseRecord(evs[ev.Of].Payload); err != nil || s != stream {
			continue
		}
		if retried[ev.ID] {
			require.GreaterOrEqual(t, n[ev.ID], 1, "acknowledged %s must be read from %s: %v", ev.ID, stream, got)
		} else {
			require.Equal(t, 1, n[ev.ID], "acknowledged %s must be read exactly once from %s: %v", ev.ID, stream, got)
		}
	}
	for _, id := range must {
		require.GreaterOrEqual(t, n[id], 1, "%s must be readable from %s: %v", id, stream, got)
	}
}

// answered reports whether a submission got an answer in evs.
func answered(evs []cutlinetest.HistoryEvent, sub cutlinetest.HistoryEvent) bool {
	for _, ev := range evs {
		if (ev.Op == cutlinetest.Acked || ev.Op == cutlinetest.Failed) && evs[ev.Of].ID == sub.ID && evs[ev.Of].Host == sub.Host {
			return true
		}
	}
	return false
}

// scenarioWrite: the process mints an epoch and appends through the
// reference host (creates of its flights, coverage in the index, the
// checkpoint), then closes. Recovery: a successor fences and settles the
// epoch, mints its own, and the producer retries what was not
// acknowledged there.
func scenarioWrite(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	var hist cutlinetest.History
	p := newProcess(t, env, "writer-1", sw)
	pctx := sw.Bind(ctx)
	ids := idsOf("w", 6)
	left := ids
	rec, err := p.Minter.Mint(pctx, starA, env.Constants(2, 8))
	if err != nil {
		crashed(t, sw, err, "mint")
	} else {
		w, err := chain.NewWriter(rec, p.Zones, chain.WriterOptions{})
		require.NoError(t, err)
		h := cutlinetest.StartHost(p.Party, w, cutlinetest.HostOptions{Name: "writer-1", History: &hist, AbsorbEvery: 2})
		left = feed(pctx, h, ids)
		finishHost(t, sw, h, pctx, len(ids))
		left = append(h.Failed(), left...)
	}
	if !sw.Dead() {
		require.Empty(t, left)
	}

	q := env.Party("writer-2")
	_, err = q.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	h2 := cutlinetest.StartHost(q, q.Writer(q.Mint(starA, env.Constants(2, 8)), chain.WriterOptions{}),
		cutlinetest.HostOptions{Name: "writer-2", History: &hist, AbsorbEvery: 2})
	retry(t, ctx, h2, left)
	cutlinetest.Require(t, env.Check(&hist))
	requireReadBack(t, env, &hist, "s", ids)
}

// deadEpoch lays what a writer left when it died: six records
// acknowledged, the first four covered and checkpointed, slot 6 on one
// zone only, slot 7 empty and slot 8 pipelined past it on two zones.
func deadEpoch(t *testing.T, ctx context.Context, env *cutlinetest.Env, hist *cutlinetest.History) *epoch.Record {
	t.Helper()
	a := env.Party("writer")
	rec := a.Mint(starA, env.Constants(2, 16))
	h := cutlinetest.StartHost(a, a.Writer(rec, chain.WriterOptions{}), cutlinetest.HostOptions{Name: "writer", History: hist, AbsorbEvery: 4})
	require.Empty(t, feed(ctx, h, idsOf("t", 6)))
	require.NoError(t, h.WaitAcked(ctx, 6))
	synctest.Wait() // the absorb loop covered the first batch
	h.Kill()
	place := func(s uint64, id string, zones ...int) {
		payload := cutlinetest.Record("s", s, id)
		hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: "writer", Star: starA, ID: id, Payload: payload})
		for _, z := range zones {
			require.NoError(t, env.Raw[z].Create(ctx, cutlinetest.Slot(rec, s).Key(), wire.EncodeFlight(starA, rec.Epoch, s, payload)))
		}
	}
	place(6, "x6", 0)
	place(8, "x8", 1, 2)
	return rec
}

// scenarioTakeover: the process fences a dead writer's epoch (repair of
// slot 6, poison of slot 7, the cut's publication) and settles it
// (garbage deletes, coverage of slots 4–6, the settled mark, the
// settlement cursor). Recovery: another settler settles again.
func scenarioTakeover(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	var hist cutlinetest.History
	rec := deadEpoch(t, ctx, env, &hist)

	p := newProcess(t, env, "settler-1", sw)
	if _, err := p.Settler.SettleAll(sw.Bind(ctx), starA); err != nil {
		crashed(t, sw, err, "settle")
	}
	q := env.Party("settler-2")
	_, err := q.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	end := env.Record(starA, rec.Epoch)
	require.Equal(t, epoch.StateSettled, end.State)
	require.Equal(t, uint64(7), end.Cut)
	cutlinetest.Require(t, env.Check(&hist))
	requireReadBack(t, env, &hist, "s", append(idsOf("t", 6), "x6"))
}

// scenarioTrim: after a settlement, the process trims the epoch below 4
// (the trimmed cursor, then the deletes in every zone, then the flights a
// stale writer landed past the cut). Recovery: another
// settler trims again. The epoch is checked from the trimmed cursor on,
// and the stream is read back where it was not trimmed.
func scenarioTrim(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	var hist cutlinetest.History
	rec := deadEpoch(t, ctx, env, &hist)
	_, err := env.Party("settler").Settler.SettleAll(ctx, starA)
	require.NoError(t, err)

	// A stale writer's flights landed past the cut after settlement.
	cut := env.Record(starA, rec.Epoch).Cut
	env.Put(0, rec, cut+2, cutlinetest.Flight)
	env.Put(1, rec, cut+2, cutlinetest.Flight)

	p := newProcess(t, env, "trimmer-1", sw)
	if _, err := p.Settler.Trim(sw.Bind(ctx), starA, rec.Epoch, 4); err != nil {
		crashed(t, sw, err, "trim")
	}
	q := env.Party("trimmer-2")
	rep, err := q.Settler.Trim(ctx, starA, rec.Epoch, 4)
	require.NoError(t, err)
	require.Equal(t, uint64(4), rep.Trimmed)
	require.Equal(t, "E E E", env.State(rec, cut+2), "the late flights are gone")
	cutlinetest.Require(t, env.CheckEpoch(starA, rec.Epoch, []uint64{0, 1, 2, 3, 4, 5}))
	for s := range uint64(4) {
		require.Equal(t, "E E E", env.State(rec, s), "slot %d is trimmed in every zone", s)
	}
	var ids []string
	var next uint64
	for r, err := range q.Refs.Refs(ctx, "s") {
		require.NoError(t, err)
		require.Equal(t, next, r.Offset, "the refs tile the stream")
		next = r.Offset + r.Count
		if r.Slot < 4 {
			continue
		}
		payload, err := q.Reader.Read(ctx, r.Star, r.Position())
		require.NoError(t, err)
		_, off, id, err := cutlinetest.ParseRecord(payload)
		require.NoError(t, err)
		require.Equal(t, r.Offset, off)
		ids = append(ids, id)
	}
	require.Equal(t, uint64(7), next)
	require.Equal(t, []string{"t4", "t5", "x6"}, ids)
}

// scenarioRoll: an incarnation of a star opens a roll.Roller, appends,
// rolls to new constants (a planned roll: the release slot's poison, the
// cut's publication, settlement) and appends again, meeting a slot
// poisoned in advance (a halt roll: the fence walk, republication).
// Recovery: a new incarnation opens on the same storage, which settles
// what was left, and the producer retries there.
func scenarioRoll(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	var hist cutlinetest.History
	keys := wire.Keys{Prefix: "chains"}
	for z := range 2 {
		require.NoError(t, env.Raw[z].Create(ctx, keys.Slot(starA, 2, 1), wire.EncodePoison(starA, 2, 1, "test")))
	}
	c1, c2 := env.Constants(2, 8), env.Constants(2, 4)
	opts := roll.Options{RollOnHalt: true,
		Backoff: clock.Backoff{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond},
		Writer:  chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 8 * time.Millisecond}}}
	ids := idsOf("r", 6)
	left := ids

	p := newProcess(t, env, "incarnation-1", sw)
	pctx := sw.Bind(ctx)
	r, err := roll.Open(pctx, p.Settler, starA, c1, opts)
	if err != nil {
		crashed(t, sw, err, "open roller")
	} else {
		h := cutlinetest.StartRoller(p.Party, r, cutlinetest.HostOptions{Name: "incarnation-1", History: &hist, AbsorbEvery: 2})
		left = feed(pctx, h, ids[:3])
		if err := h.WaitAcked(pctx, 3); err != nil {
			crashed(t, sw, err, "appends")
		}
		if !sw.Dead() {
			if err := r.Roll(pctx, c2); err != nil {
				crashed(t, sw, err, "roll")
			}
		}
		if !sw.Dead() {
			left = feed(pctx, h, ids[3:])
		} else {
			left = append(left, ids[3:]...)
		}
		finishHost(t, sw, h, pctx, len(ids))
		left = append(h.Failed(), left...)
	}
	if !sw.Dead() {
		require.Empty(t, left)
	}

	q := env.Party("incarnation-2")
	r2, err := roll.Open(ctx, q.Settler, starA, c1, opts)
	require.NoError(t, err)
	retry(t, ctx, cutlinetest.StartRoller(q, r2, cutlinetest.HostOptions{Name: "incarnation-2", History: &hist, AbsorbEvery: 2}), left)
	_, err = env.Party("checker").Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	cutlinetest.Require(t, env.Check(&hist))
	requireReadBack(t, env, &hist, "s", ids)
}

// leaseHost drives one lease.Star and records what its producers saw.
type leaseHost struct {
	t    *testing.T
	name string
	star *lease.Star
	sess metastore.Session
	hist *cutlinetest.History
	left map[string][]string // per stream: ids not acknowledged
}

func startLeaseHost(t *testing.T, ctx context.Context, env *cutlinetest.Env, p *cutlinetest.Party, st metastore.Store, name string, c epoch.Constants, hist *cutlinetest.History) (*leaseHost, error) {
	t.Helper()
	sess, err := env.Store.NewSession(context.Background(), 10*time.Second)
	require.NoError(t, err)
	s, err := lease.Start(ctx, lease.Config{Star: name, Store: st, Session: sess, Minter: p.Minter, Settler: p.Settler, Index: p.Refs, Constants: c}, lease.Options{})
	lh := &leaseHost{t: t, name: name, star: s, sess: sess, hist: hist, left: map[string][]string{}}
	return lh, err
}

// append places id at stream's next offset and waits for its answer; an
// id not acknowledged is left for the producer to retry.
func (h *leaseHost) append(ctx context.Context, stream, id string) error {
	next, err := h.star.Next(stream)
	if err != nil {
		h.left[stream] = append(h.left[stream], id)
		return err
	}
	payload := cutlinetest.Record(stream, next, id)
	f, err := h.star.Submit(ctx, payload)
	if err != nil {
		h.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Refused, Host: h.name, Star: h.name, ID: id, Payload: payload, Err: err})
		h.left[stream] = append(h.left[stream], id)
		return err
	}
	of := h.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: h.name, Star: h.name, ID: id, Payload: payload})
	pos, err := f.Wait(ctx) // a crash ends the process's ctx: the outcome is unknown then
	if err != nil {
		h.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Failed, Host: h.name, Star: h.name, ID: id, Of: of, Err: err})
		h.left[stream] = append(h.left[stream], id)
		return err
	}
	h.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: h.name, Star: h.name, ID: id, Of: of, Pos: pos})
	return nil
}

// scenarioLease: a star leads streams through package lease. Another
// star (star-z) handed s1 over with a clean-release mark and still holds
// s3. The process's star starts (registry, mint), installs a producer
// token on s1, opens s1 (the lease, the admission consuming the mark),
// appends, absorbs (coverage, checkpoint), rolls (mint, release poison,
// publication, settlement, the last-writer records moved by
// republication), appends, saves a snapshot, hands s1 off (Finish: the
// mark), tries to open s3 breaking star-z's lease (the break, the lease
// taken, the gate defers, the lease released), opens s2 fresh, appends
// and closes (Finish of s2, the registry entry's delete). Recovery: its
// session ends, star-b takes s1 and s2 over through the gate, the
// producers retry there, and leftover epochs are settled.
// manyStreams are the streams of the lease scenario's bulk open: more
// than one batch of admissions.
var manyStreams = idsOf("m", 40)

func scenarioLease(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	var hist cutlinetest.History
	c1, c2 := env.Constants(2, 16), env.Constants(2, 8)

	zp := env.Party("star-z")
	z, err := startLeaseHost(t, ctx, env, zp, env.Store, "star-z", c1, &hist)
	require.NoError(t, err)
	_, err = z.star.Open(ctx, "s1", lease.OpenOptions{})
	require.NoError(t, err)
	require.NoError(t, z.append(ctx, "s1", "z0"))
	require.NoError(t, z.append(ctx, "s1", "z1"))
	require.NoError(t, z.star.Finish(ctx, "s1", lease.ReasonHandoff))
	_, err = z.star.Open(ctx, "s3", lease.OpenOptions{})
	require.NoError(t, err)
	require.NoError(t, z.append(ctx, "s3", "z2"))

	p := newProcess(t, env, starA, sw)
	pctx := sw.Bind(ctx)
	a, err := startLeaseHost(t, pctx, env, p.Party, p.store, starA, c1, &hist)
	s1 := idsOf("a", 5)
	s2 := []string{"b0"}
	if err != nil {
		crashed(t, sw, err, "start")
		a.left["s1"], a.left["s2"] = s1, s2
	} else {
		steps := []struct {
			name string
			do   func() error
		}{
			{"token", func() error { _, err := a.star.Fence(pctx, "s1", lease.Any, "tok-1"); return err }},
			{"open s1", func() error { _, err := a.star.Open(pctx, "s1", lease.OpenOptions{Token: "tok-1"}); return err }},
			{"append", func() error { return a.append(pctx, "s1", s1[0]) }},
			{"append", func() error { return a.append(pctx, "s1", s1[1]) }},
			{"append", func() error { return a.append(pctx, "s1", s1[2]) }},
			{"absorb", func() error { return a.star.Absorb(pctx) }},
			{"roll", func() error { return a.star.Roll(pctx, c2) }},
			{"append", func() error { return a.append(pctx, "s1", s1[3]) }},
			{"append", func() error { return a.append(pctx, "s1", s1[4]) }},
			{"absorb", func() error { return a.star.Absorb(pctx) }},
			{"snapshot", func() error { return a.star.SaveSnapshot(pctx, "s1", 7, []byte("state")) }},
			{"finish s1", func() error { return a.star.Finish(pctx, "s1", lease.ReasonHandoff) }},
			{"break s3", func() error {
				_, err := a.star.Open(pctx, "s3", lease.OpenOptions{BreakLease: true})
				if errors.Is(err, lease.ErrDeferred) && !sw.Dead() {
					return nil // star-z is alive: the gate defers
				}
				if err == nil {
					return errors.New("the open of s3 was admitted while star-z lives")
				}
				return err
			}},
			{"open many", func() error {
				// A bulk open: leases and admissions in batches.
				_, errs := a.star.OpenMany(pctx, manyStreams, lease.OpenOptions{})
				return errors.Join(errs...)
			}},
			{"open s2", func() error { _, err := a.star.Open(pctx, "s2", lease.OpenOptions{}); return err }},
			{"append", func() error { return a.append(pctx, "s2", s2[0]) }},
			{"close", func() error { return a.star.Close(pctx) }},
		}
		for _, st := range steps {
			if err := st.do(); err != nil {
				crashed(t, sw, err, st.name)
				break
			}
		}
		if sw.Dead() {
			a.star.Abort()
			// Every append not made is the producer's to retry.
			done := map[string]bool{}
			for _, ev := range hist.Events() {
				if ev.Star == starA {
					done[ev.ID] = true
				}
			}
			for stream, ids := range map[string][]string{"s1": s1, "s2": s2} {
				for _, id := range ids {
					if !done[id] {
						a.left[stream] = append(a.left[stream], id)
					}
				}
			}
		}
	}
	// The process's session ends (it expires, once the process is dead).
	require.NoError(t, a.sess.Close(ctx))

	b, err := startLeaseHost(t, ctx, env, env.Party("star-b"), env.Store, "star-b", c1, &hist)
	require.NoError(t, err)
	for _, stream := range []string{"s1", "s2"} {
		_, err := b.star.Open(ctx, stream, lease.OpenOptions{})
		require.NoError(t, err, "takeover of %s", stream)
		for _, id := range a.left[stream] {
			require.NoError(t, b.append(ctx, stream, id))
		}
	}
	// The bulk open, wherever it died, is taken over in bulk: every
	// stream admitted once, by star-b, after the process's tenure.
	tens, errs := b.star.OpenMany(ctx, manyStreams, lease.OpenOptions{})
	for i, err := range errs {
		require.NoError(t, err, "takeover of %s", manyStreams[i])
		require.Equal(t, "star-b", tens[i].Star)
	}
	require.NoError(t, b.star.Close(ctx))
	require.NoError(t, b.sess.Close(ctx))
	z.star.Abort() // star-z dies holding s3; its epoch is settled below
	require.NoError(t, z.sess.Close(ctx))
	checker := env.Party("checker")
	for _, star := range []string{starA, "star-z"} {
		_, err := checker.Settler.SettleAll(ctx, star)
		require.NoError(t, err)
	}
	cutlinetest.Require(t, env.Check(&hist))
	requireReadBack(t, env, &hist, "s1", append([]string{"z0", "z1"}, s1...))
	requireReadBack(t, env, &hist, "s2", s2)
}
