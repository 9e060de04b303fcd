package cutlinetest_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
)

const (
	starA = "star-a"
	starB = "star-b"
)

func id(i int) string { return fmt.Sprintf("p%d", i) }

// scenario is a finished takeover: host A appended, died with a ragged
// tail in flight, B fenced and settled A's epoch and served on.
type scenario struct {
	env  *cutlinetest.Env
	hist *cutlinetest.History
	a, b *cutlinetest.Party
	recA *epoch.Record // as settled
	cut  uint64
}

// takeover runs the scenario in a synctest bubble. A acknowledges 20
// records with every zone up. Then zones b and c go down and zone a
// refuses slot 23 once, so of A's next 8 records (its window) zone a
// holds slots 20–22 and 24–27, and none is acknowledged: A's writer
// retries on a frozen clock. A dies: killed (its writer aborted), or, as a
// zombie, left running. With the zones back B settles A's epoch: the
// fence completes 20–22, poisons 23 (the cut) and settlement deletes
// 24–27. A zombie then wakes: it acknowledges 20–22 late, halts at the cut
// and fails the rest. B's host serves the stream on: the producer retries
// everything A did not acknowledge, then sends 5 new records.
func takeover(t *testing.T, zombie bool) *scenario {
	ctx := t.Context()
	e := cutlinetest.NewMem(t, 3)
	hist := &cutlinetest.History{}
	a := e.Party(starA)
	frozen := clock.NewFake(time.Unix(0, 0))
	recA := a.Mint(starA, e.Constants(2, 8))
	wa := a.Writer(recA, chain.WriterOptions{Clock: frozen})
	ha := cutlinetest.StartHost(a, wa, cutlinetest.HostOptions{Name: "host-a", History: hist, AbsorbEvery: 4})
	for i := range 20 {
		require.NoError(t, ha.Submit(ctx, id(i)))
	}
	require.NoError(t, ha.WaitAcked(ctx, 20))
	e.Zones[1].SetDown(true)
	e.Zones[2].SetDown(true)
	require.NoError(t, e.Zones[0].AddRule(fault.Rule{Op: fault.OpCreate, Prefix: cutlinetest.Slot(recA, 23).Key(), Count: 1}))
	for i := 20; i < 28; i++ {
		require.NoError(t, ha.Submit(ctx, id(i)))
	}
	synctest.Wait()
	for s := uint64(20); s < 28; s++ {
		want := "F E E"
		if s == 23 {
			want = "E E E"
		}
		require.Equal(t, want, e.State(recA, s), "slot %d", s)
	}
	if !zombie {
		ha.Kill()
	}
	e.Zones[1].SetDown(false)
	e.Zones[2].SetDown(false)
	require.Equal(t, 20, ha.Acked())

	b := e.Party(starB)
	reps, err := b.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	cut := reps[0].Cut
	require.Equal(t, uint64(23), cut)
	require.Equal(t, "P P E", e.State(recA, cut))
	if zombie {
		for i := 0; i < 100 && frozen.Waiters() > 0; i++ {
			frozen.Advance(time.Hour)
			synctest.Wait()
		}
		require.ErrorIs(t, ha.Submit(ctx, "p28"), chain.ErrFenced)
		require.NoError(t, ha.Close(ctx))
		require.Equal(t, 23, ha.Acked(), "the zombie acknowledges 20–22 late, below the cut")
		require.Len(t, ha.Failed(), 6)
	} else {
		require.Len(t, ha.Failed(), 8)
	}

	wb := b.Writer(b.Mint(starB, e.Constants(2, 8)), chain.WriterOptions{})
	hb := cutlinetest.StartHost(b, wb, cutlinetest.HostOptions{Name: "host-b", History: hist, AbsorbEvery: 3})
	for _, id := range ha.Failed() {
		require.NoError(t, hb.Submit(ctx, id))
	}
	for i := 30; i < 35; i++ {
		require.NoError(t, hb.Submit(ctx, id(i)))
	}
	require.NoError(t, hb.Close(ctx))
	require.Equal(t, len(ha.Failed())+5, hb.Acked())
	return &scenario{env: e, hist: hist, a: a, b: b, recA: e.Record(starA, recA.Epoch), cut: cut}
}

func TestCleanTakeover(t *testing.T) {
	for _, zombie := range []bool{false, true} {
		t.Run(fmt.Sprintf("zombie=%v", zombie), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := takeover(t, zombie)
				require.Equal(t, epoch.StateSettled, s.recA.State)
				s.env.Verify(s.hist)
				if zombie {
					return
				}
				// p20–p22 were aborted, completed by the fence and
				// retried: at-least-once, and the checker allows it.
				found := map[string]int{}
				for r, err := range s.b.Refs.Refs(t.Context(), "s") {
					require.NoError(t, err)
					p, err := s.b.Reader.Read(t.Context(), r.Star, r.Position())
					require.NoError(t, err)
					_, _, id, err := cutlinetest.ParseRecord(p)
					require.NoError(t, err)
					found[id]++
				}
				for i := range 35 {
					want := 1
					if i >= 20 && i < 23 {
						want = 2
					} else if i >= 28 && i < 30 {
						want = 0
					}
					require.Equal(t, want, found[id(i)], id(i))
				}
			})
		})
	}
}

func countOf(row string, c byte) int {
	n := 0
	for i := range len(row) {
		if row[i] == c {
			n++
		}
	}
	return n
}

// rewrite changes an epoch record behind the minter's back: what a buggy
// or stale party could do to the store.
func rewrite(t *testing.T, e *cutlinetest.Env, star string, ep uint64, f func(*epoch.Record)) {
	ctx := t.Context()
	m, err := epoch.NewMinter(e.Store, epoch.Options{})
	require.NoError(t, err)
	rec, err := m.Get(ctx, star, ep)
	require.NoError(t, err)
	f(rec)
	v, err := metastore.EncodeRecord(rec)
	require.NoError(t, err)
	_, err = metastore.Put(ctx, e.Store, m.RecordKey(star, ep), v, rec.Revision)
	require.NoError(t, err)
}

// ackAt records that a host acknowledged a record nobody wrote at pos.
func ackAt(s *scenario, name string, pos chain.Position) {
	of := s.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: "planted", Star: starA, ID: name,
		Payload: cutlinetest.Record("s", 1000+pos.Slot, name)})
	s.hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: "planted", Star: starA, ID: name, Of: of, Pos: pos})
}

// plants break one guarantee each, on a finished clean takeover.
var plants = []struct {
	name      string
	guarantee int
	plant     func(t *testing.T, s *scenario)
}{
	{"acknowledged payload not in its slot", 1, func(t *testing.T, s *scenario) {
		ackAt(s, "phantom", chain.Position{Epoch: s.recA.Epoch, Slot: 2})
	}},
	{"acknowledged at the cut", 2, func(t *testing.T, s *scenario) {
		ackAt(s, "late", chain.Position{Epoch: s.recA.Epoch, Slot: s.cut})
	}},
	{"published cut differs from the zones' dead slot", 3, func(t *testing.T, s *scenario) {
		rewrite(t, s.env, starA, s.recA.Epoch, func(r *epoch.Record) { r.Cut++ })
		s.cut++
	}},
	{"hole below the cut", 4, func(t *testing.T, s *scenario) {
		// Leave one copy of slot 5; W is 2.
		for i := range 2 {
			s.env.Delete(i, s.recA, 5)
		}
	}},
	{"duplicated ref", 5, func(t *testing.T, s *scenario) {
		// Slot 3's record covered a second time, at the stream's next
		// offset.
		next, err := s.b.Refs.Next(t.Context(), "s")
		require.NoError(t, err)
		err = s.b.Refs.Cover(t.Context(), starA, chain.Flight{
			Position: chain.Position{Epoch: s.recA.Epoch, Slot: 3},
			Payload:  cutlinetest.Record("s", next, "p3"),
		})
		require.NoError(t, err)
	}},
	{"settled epoch moved back to fenced", 6, func(t *testing.T, s *scenario) {
		rewrite(t, s.env, starA, s.recA.Epoch, func(r *epoch.Record) { r.State = epoch.StateFenced })
	}},
}

func TestCheckCatchesPlantedViolations(t *testing.T) {
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := takeover(t, false)
				require.Empty(t, s.env.Check(s.hist), "the run is clean before the plant")
				p.plant(t, s)
				vs := s.env.Check(s.hist)
				require.NotEmpty(t, vs.Of(p.guarantee), "guarantee %d must be reported; got:\n%v", p.guarantee, vs.Err())
				t.Logf("planted %q:\n%v", p.name, vs.Err())
			})
		})
	}
}

// Every plant at once: every guarantee's violation is reported, not only
// the first one found.
func TestCheckReportsEveryViolation(t *testing.T) { synctest.Test(t, checkReportsEveryViolation) }

func checkReportsEveryViolation(t *testing.T) {
	s := takeover(t, false)
	// Backwards, so that the acknowledgement planted at the cut is at the
	// cut planted before it.
	for i := len(plants) - 1; i >= 0; i-- {
		plants[i].plant(t, s)
	}
	vs := s.env.Check(s.hist)
	for g := 1; g <= 6; g++ {
		require.NotEmpty(t, vs.Of(g), "guarantee %d; got:\n%v", g, vs.Err())
	}
	require.Len(t, vs, len(vs.Of(1))+len(vs.Of(2))+len(vs.Of(3))+len(vs.Of(4))+len(vs.Of(5))+len(vs.Of(6)), "no check failed to run")
	require.Error(t, vs.Err())
	// Require fails a test listing all of them.
	ft := &fakeTB{TB: t}
	cutlinetest.Require(ft, vs)
	require.True(t, ft.failed)
	for _, v := range vs {
		require.Contains(t, ft.msg, v.Error())
	}
}

// fakeTB records each Fatalf instead of failing the test, and goes on.
type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg += fmt.Sprintf(format, args...) + "\n"
}

// A check that cannot read the store reports that, and passes nothing.
func TestCheckCannotLook(t *testing.T) {
	vs := cutlinetest.Check(context.Background(), cutlinetest.Run{History: &cutlinetest.History{}})
	require.Len(t, vs, 1)
	require.Equal(t, 0, vs[0].Guarantee)
}

// The per-epoch check: clean on the settled epoch of a takeover, and each
// planted violation reported under its guarantee.
func TestCheckEpochCatchesPlantedViolations(t *testing.T) {
	acked := make([]uint64, 20) // what host A acknowledged: slots 0–19
	for i := range acked {
		acked[i] = uint64(i)
	}
	for _, p := range []struct {
		name      string
		guarantee int
		plant     func(t *testing.T, s *scenario) (star string, ep uint64, acked []uint64)
	}{
		{"acknowledged at the cut", 2, func(t *testing.T, s *scenario) (string, uint64, []uint64) {
			return starA, s.recA.Epoch, append(acked, s.cut)
		}},
		{"published cut differs from the zones' dead slot", 3, func(t *testing.T, s *scenario) (string, uint64, []uint64) {
			rewrite(t, s.env, starA, s.recA.Epoch, func(r *epoch.Record) { r.Cut++ })
			return starA, s.recA.Epoch, acked
		}},
		{"cut slot without poison", 3, func(t *testing.T, s *scenario) (string, uint64, []uint64) {
			for i := range 3 {
				if s.env.State(s.recA, s.cut)[2*i] == cutlinetest.Poison {
					s.env.Delete(i, s.recA, s.cut)
				}
			}
			return starA, s.recA.Epoch, acked
		}},
		{"hole below the cut", 4, func(t *testing.T, s *scenario) (string, uint64, []uint64) {
			for i := range 2 { // leave one copy of slot 5; W is 2
				s.env.Delete(i, s.recA, 5)
			}
			return starA, s.recA.Epoch, acked
		}},
		{"open epoch", 0, func(t *testing.T, s *scenario) (string, uint64, []uint64) {
			return starB, 1, nil
		}},
		{"no such epoch", 0, func(t *testing.T, s *scenario) (string, uint64, []uint64) {
			return starA, s.recA.Epoch + 1, nil
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := takeover(t, false)
				require.Empty(t, s.env.CheckEpoch(starA, s.recA.Epoch, acked), "the epoch is clean before the plant")
				require.Equal(t, s.cut, s.env.VerifyEpoch(starA, s.recA.Epoch, acked).Cut)
				star, ep, acked := p.plant(t, s)
				vs := s.env.CheckEpoch(star, ep, acked)
				require.NotEmpty(t, vs.Of(p.guarantee), "guarantee %d must be reported; got:\n%v", p.guarantee, vs.Err())
				t.Logf("planted %q:\n%v", p.name, vs.Err())
				// VerifyEpoch fails the test with them.
				ft := &fakeTB{TB: t}
				e := *s.env
				e.T = ft
				e.VerifyEpoch(star, ep, acked)
				require.True(t, ft.failed)
				for _, v := range vs {
					require.Contains(t, ft.msg, v.Error())
				}
			})
		})
	}
}

// States lists every slot some zone holds an object at.
func TestStates(t *testing.T) {
	e := cutlinetest.NewMem(t, 3)
	rec := e.Party("setup").Mint(starA, e.Constants(2, 8))
	e.Layout(rec, "F F E", "E E E", "P E X")
	e.Put(0, rec, 7, cutlinetest.Flight)
	require.Equal(t, map[uint64]string{0: "F F E", 2: "P E X", 7: "F E E"}, e.States(rec))
}

// A zone the check cannot see (down, or lossy: it may have lost what it
// held) may hold a copy: a slot is short of W only when the zones that
// answered prove it, and a slot with no readable copy always is.
func TestCheckCountsUnseenZonesAsPossibleCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := takeover(t, false)
		e := s.env
		run := func(zones []objstore.Bucket, lossy ...string) cutlinetest.Violations {
			return cutlinetest.Check(t.Context(), cutlinetest.Run{History: s.hist, Store: e.Store, Zones: zones, Lossy: lossy})
		}
		seen := []objstore.Bucket{e.Zones[0], e.Zones[1], e.Zones[2]}
		shortOf := func(vs cutlinetest.Violations) bool { return len(vs.Of(1)) > 0 && len(vs.Of(4)) > 0 }

		e.Delete(0, s.recA, 5) // W copies left: zones b and c
		require.Empty(t, run(seen))
		e.Zones[2].SetDown(true)
		require.Empty(t, run(seen), "zone c is down: it may hold slot 5's second copy")
		e.Zones[2].SetDown(false)

		e.Delete(2, s.recA, 5) // one copy left, in zone b
		vs := run(seen)
		require.True(t, shortOf(vs), "zones a and c answered empty: slot 5 is short; got:\n%v", vs.Err())
		require.Empty(t, run(seen, e.Raw[2].Name()), "zone c is lossy: its empty answer proves nothing")
		vs = run(seen, e.Raw[0].Name(), e.Raw[2].Name())
		require.Empty(t, vs.Of(4), "two lossy zones")

		e.Delete(1, s.recA, 5) // no copy at all
		vs = run(seen, e.Raw[0].Name(), e.Raw[1].Name(), e.Raw[2].Name())
		require.True(t, shortOf(vs), "nothing readable is short whatever the zones may hold; got:\n%v", vs.Err())
	})
}
