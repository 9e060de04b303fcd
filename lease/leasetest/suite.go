// Package leasetest is the scenario suite of package lease: every
// departure kind, every branch of the open gate, crashes between a
// departure's steps, a replayed mark, racing opens, session loss and
// limbo, each ending with cutlinetest's guarantee checker and a read-back
// of every stream (lost 0, duplicated 0). It runs on any metastore:
//
//	func TestScenarios(t *testing.T) {
//		leasetest.Run(t, leasetest.Backend{
//			NewStore: func(t *testing.T) (metastore.Store, string) { return memstore.New(memstore.Options{}), "" },
//			Expire: func(t *testing.T, s metastore.Store, sess metastore.Session) {
//				s.(*memstore.Store).Expire(sess)
//			},
//		})
//	}
//
// The object zones are in memory; the stars' limbo retries run on a fake
// clock the scenarios advance.
package leasetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
)

// Run runs every scenario as a subtest.
func Run(t *testing.T, b Backend) {
	for _, sc := range []struct {
		name string
		run  func(*fixture)
	}{
		{"Fresh", fresh},
		{"CloseThenMarkConsumed", closeThenMark},
		{"Handoff", handoff},
		{"HandoffOfABundledStream", handoffBundled},
		{"RollThenCrash", rollThenCrash},
		{"Drain", drain},
		{"SupersedeByToken", supersede},
		{"Reestablish", reestablish},
		{"EvictMarkFirst", evictMarkFirst},
		{"EvictSuccessorSettlesFirst", evictSuccessorFirst},
		{"RestartedPredecessor", restartedPredecessor},
		{"SupersededSettlesInline", supersededInline},
		{"AliveDefersThenDeathSettles", aliveDefers},
		{"AlreadySettled", alreadySettled},
		{"CrashBetweenFlushAndMark", crashBeforeMark},
		{"ReplayedMarkRefused", replayedMark},
		{"CrashAfterFirstAck", crashAfterFirstAck},
		{"RacingOpens", racingOpens},
		{"Limbo", limbo},
		{"Tokens", tokens},
		{"AdmissionGate", admissionGate},
		{"OpenWait", openWait},
		{"BreakLease", breakLease},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(newFixture(t, b)) })
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantDecision(t *testing.T, ten lease.Tenure, d lease.Decision) {
	t.Helper()
	if ten.Decision != d {
		t.Fatalf("open of %s: decision %q, want %q", ten.Stream, ten.Decision, d)
	}
}

func wantDeferred(t *testing.T, err error, reason lease.DeferReason) {
	t.Helper()
	var de *lease.DeferredError
	if !errors.As(err, &de) || de.Reason != reason {
		t.Fatalf("open: got %v, want a deferral (%s)", err, reason)
	}
}

// fresh: a stream without a last-writer record opens fresh at offset 0,
// and the record names the star's epoch before the first append.
func fresh(f *fixture) {
	a := f.start("star-a", nodeOpts{})
	ten := a.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.Fresh)
	if ten.Next != 0 || ten.Tenure != 1 || ten.Epoch != a.star.Epoch().Epoch {
		f.t.Fatalf("fresh tenure %+v", ten)
	}
	w := f.writer("s")
	if w.Star != "star-a" || w.Epoch != ten.Epoch || w.Tenure != 1 {
		f.t.Fatalf("last-writer record %+v before the first append", w)
	}
	a.appendN("s", "a", 5)
	must(f.t, a.star.Close(f.ctx), "close")
	f.verify(a, "s")
}

// closeThenMark: a graceful close marks every stream; the next star
// consumes the mark without settling anything, and continues the offsets.
func closeThenMark(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 7)
	must(f.t, a.star.Close(f.ctx), "close")
	m := f.mark("s")
	if m == nil || m.Reason != lease.ReasonClose || m.Next != 7 || m.Tenure != 1 {
		f.t.Fatalf("mark after close: %+v", m)
	}
	b := f.start("star-b", nodeOpts{})
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.MarkConsumed)
	if ten.Next != 7 || ten.Tenure != 2 {
		f.t.Fatalf("tenure after the mark: %+v", ten)
	}
	if f.mark("s") != nil {
		f.t.Fatalf("the mark was not consumed")
	}
	b.appendN("s", "b", 3)
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// handoff: three streams share star-a's epoch; one is handed to star-b
// through Finish and the gate while the other two go on appending in the
// same epoch.
func handoff(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	for _, s := range []string{"x", "y", "z"} {
		a.open(s, lease.OpenOptions{})
	}
	ep := a.star.Epoch().Epoch
	for _, s := range []string{"x", "y", "z"} {
		a.appendN(s, "a-"+s, 4)
	}
	must(f.t, a.star.Finish(f.ctx, "y", lease.ReasonHandoff), "finish y")
	b := f.start("star-b", nodeOpts{})
	ten := b.open("y", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.MarkConsumed)
	if ten.Next != 4 {
		f.t.Fatalf("y continues at %d, want 4", ten.Next)
	}
	b.appendN("y", "b-y", 3)
	for _, s := range []string{"x", "z"} {
		a.appendN(s, "a2-"+s, 3)
	}
	if got := a.star.Epoch().Epoch; got != ep {
		f.t.Fatalf("star-a's epoch moved from %d to %d: the handoff must leave it open", ep, got)
	}
	if _, err := a.append("y", "late"); !errors.Is(err, lease.ErrNotHeld) {
		f.t.Fatalf("append to a handed-off stream: %v, want ErrNotHeld", err)
	}
	must(f.t, a.star.Close(f.ctx), "close a")
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "x", "y", "z")
}

// drain: the star gives up every stream and keeps running.
func drain(f *fixture) {
	a := f.start("star-a", nodeOpts{})
	a.open("x", lease.OpenOptions{})
	a.open("y", lease.OpenOptions{})
	a.appendN("x", "x", 3)
	a.appendN("y", "y", 2)
	must(f.t, a.star.Drain(f.ctx), "drain")
	if n := len(a.star.Streams()); n != 0 {
		f.t.Fatalf("%d streams held after Drain", n)
	}
	if m := f.mark("x"); m == nil || m.Reason != lease.ReasonDrain {
		f.t.Fatalf("drain mark %+v", m)
	}
	b := f.start("star-b", nodeOpts{})
	wantDecision(f.t, b.open("x", lease.OpenOptions{}), lease.MarkConsumed)
	wantDecision(f.t, b.open("y", lease.OpenOptions{}), lease.MarkConsumed)
	ten := a.open("w", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.Fresh)
	a.appendN("w", "w", 2)
	b.appendN("x", "bx", 2)
	must(f.t, a.star.Close(f.ctx), "close a")
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "x", "y", "w")
}

// supersede: a newer fencing token makes the holder leave and reopen under
// it; the old token is refused at open and at a one-shot append.
func supersede(f *fixture) {
	a := f.start("star-a", nodeOpts{})
	_, err := a.star.Fence(f.ctx, "s", lease.Fenced, "t1")
	must(f.t, err, "install t1")
	a.open("s", lease.OpenOptions{Token: "t1"})
	a.appendN("s", "a", 3)
	ten, err := a.star.Fence(f.ctx, "s", lease.Fenced, "t2")
	must(f.t, err, "fence t2")
	if ten == nil || ten.Decision != lease.MarkConsumed || ten.Tenure != 2 || ten.Next != 3 {
		f.t.Fatalf("tenure after the supersede: %+v", ten)
	}
	if err := a.star.CheckToken(f.ctx, "s", "t1"); !errors.Is(err, lease.ErrStaleToken) {
		f.t.Fatalf("stale token at a one-shot append: %v", err)
	}
	must(f.t, a.star.CheckToken(f.ctx, "s", "t2"), "current token")
	a.appendN("s", "a2", 2)
	b := f.start("star-b", nodeOpts{})
	if _, err := b.star.Open(f.ctx, "s", lease.OpenOptions{Token: "t1"}); !errors.Is(err, lease.ErrStaleToken) {
		f.t.Fatalf("open with a stale token: %v", err)
	}
	must(f.t, a.star.Close(f.ctx), "close")
	f.verify(a, "s")
}

// reestablish: the star leaves and reopens the stream, consuming its own
// mark.
func reestablish(f *fixture) {
	a := f.start("star-a", nodeOpts{})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 4)
	ten, err := a.star.Reopen(f.ctx, "s", lease.OpenOptions{})
	must(f.t, err, "reopen")
	if ten.Decision != lease.MarkConsumed || ten.Tenure != 2 || ten.Next != 4 {
		f.t.Fatalf("reopened tenure %+v", ten)
	}
	a.appendN("s", "a2", 2)
	must(f.t, a.star.Close(f.ctx), "close")
	f.verify(a, "s")
}

// evictMarkFirst: the session is lost mid-append; Finish runs on its own
// and lands its mark; the successor consumes it.
func evictMarkFirst(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 5)
	a.expire()
	f.waitMark("s")
	if m := f.mark("s"); m.Reason != lease.ReasonEvict || m.Next != 5 {
		f.t.Fatalf("eviction mark %+v", m)
	}
	if _, err := a.star.Open(f.ctx, "t", lease.OpenOptions{}); !errors.Is(err, lease.ErrSessionLost) {
		f.t.Fatalf("open after the session ended: %v", err)
	}
	b := f.start("star-b", nodeOpts{})
	wantDecision(f.t, b.open("s", lease.OpenOptions{}), lease.MarkConsumed)
	b.appendN("s", "b", 2)
	a.crash()
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// evictSuccessorFirst: the evicted star cannot reach the store; the
// successor, seeing the registry converged, fences and settles; the
// evicted star's Finish then ends superseded, marking nothing.
func evictSuccessorFirst(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 5)
	a.store.SetDown(true)
	a.expire()
	b := f.start("star-b", nodeOpts{})
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledDead)
	if ten.Next != 5 {
		f.t.Fatalf("successor continues at %d, want 5 (settlement covers the unabsorbed records)", ten.Next)
	}
	b.appendN("s", "b", 2)
	// The evicted star's departure retries on the clock while its store
	// is down: wait for it to be waiting before the store comes back, or
	// it may find the store up at its first try and wait for nothing.
	failfast.Timers(f.t, f.clk, 1, "the evicted star's departure to wait for its retry")
	a.store.SetDown(false)
	f.clk.Advance(f.retries)
	// The departure lands on that retry, superseded; it may have ended
	// before this Finish joins it (then the stream is no longer held).
	if err := a.star.Finish(f.ctx, "s", lease.ReasonEvict); !errors.Is(err, lease.ErrSuperseded) && !errors.Is(err, lease.ErrNotHeld) {
		f.t.Fatalf("the evicted star's departure: %v, want ErrSuperseded", err)
	}
	if f.mark("s") != nil {
		f.t.Fatalf("a superseded tenure stamped a mark")
	}
	a.crash()
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// restartedPredecessor: star-a crashes and restarts (a new session, a
// new epoch superseding the old head, its earlier epochs settled at
// start); star-b's open finds the recorded epoch superseded or settled and
// admits, whatever the registry says about star-a.
func restartedPredecessor(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 4)
	a.kill()
	a2 := f.start("star-a", nodeOpts{})
	b := f.start("star-b", nodeOpts{})
	ten := b.open("s", lease.OpenOptions{})
	if ten.Decision != lease.SettledInline && ten.Decision != lease.AlreadySettled {
		f.t.Fatalf("decision %q after the predecessor restarted", ten.Decision)
	}
	if ten.Next != 4 {
		f.t.Fatalf("continues at %d, want 4", ten.Next)
	}
	b.appendN("s", "b", 2)
	must(f.t, a2.star.Close(f.ctx), "close a2")
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// aliveDefers: star-a hangs (alive in the registry, no mark); star-b's
// open is deferred until the registry converges on its death, then fences
// and settles.
func aliveDefers(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 3)
	a.crash() // hung: its session (and lease) live on
	b := f.start("star-b", nodeOpts{})
	_, err := b.star.Open(f.ctx, "s", lease.OpenOptions{})
	wantDeferred(f.t, err, lease.LeaseHeld)
	// The lease goes, the registry entry stays (an operator removed the
	// lease, or the star bound it elsewhere): the gate still waits.
	f.deleteLease("s")
	_, err = b.star.Open(f.ctx, "s", lease.OpenOptions{})
	wantDeferred(f.t, err, lease.PredecessorAlive)
	a.expire()
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledDead)
	if ten.Next != 3 {
		f.t.Fatalf("continues at %d, want 3", ten.Next)
	}
	b.appendN("s", "b", 2)
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// alreadySettled: the second stream of a dead star finds its epoch
// settled by the first stream's open.
func alreadySettled(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("x", lease.OpenOptions{})
	a.open("y", lease.OpenOptions{})
	a.appendN("x", "x", 2)
	a.appendN("y", "y", 3)
	a.kill()
	b := f.start("star-b", nodeOpts{})
	wantDecision(f.t, b.open("x", lease.OpenOptions{}), lease.SettledDead)
	ten := b.open("y", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.AlreadySettled)
	if ten.Next != 3 {
		f.t.Fatalf("y continues at %d, want 3", ten.Next)
	}
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "x", "y")
}

// crashBeforeMark: the release flush lands, the process dies before the
// mark: the next open settles, never trusts.
func crashBeforeMark(f *fixture) {
	flushed := make(chan struct{})
	once := sync.Once{}
	a := f.start("star-a", nodeOpts{absorbEvery: 1000, flush: func(ctx context.Context, stream string) error {
		once.Do(func() { close(flushed) })
		return nil
	}})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 4)
	a.store.FailTxn(func(t metastore.Txn) bool {
		for _, op := range t.Then {
			if op.Key == f.root+"streams/s/release" {
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(f.ctx, 50*time.Millisecond)
	defer cancel()
	err := a.star.Finish(ctx, "s", lease.ReasonHandoff)
	if !errors.Is(err, lease.ErrLimbo) && !errors.Is(err, context.DeadlineExceeded) {
		f.t.Fatalf("finish with the mark failing: %v", err)
	}
	// The flush runs before the mark is tried: by the time the failed
	// landing waits to retry, it has run.
	failfast.Timers(f.t, f.clk, 1, "the departure to wait for its retry after the mark failed")
	select {
	case <-flushed:
	default:
		f.t.Fatalf("the departure failed to land before its release flush ran: the mark must come after the flush")
	}
	a.kill()
	if f.mark("s") != nil {
		f.t.Fatalf("a mark landed")
	}
	b := f.start("star-b", nodeOpts{})
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledDead)
	if ten.Next != 4 {
		f.t.Fatalf("continues at %d, want 4", ten.Next)
	}
	b.appendN("s", "b", 1)
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// replayedMark: a mark written again for a later tenure certifies
// nothing, whoever the star: the open settles instead. First the star's
// own later tenure (a Reopen), whose records are not absorbed yet, so the
// replayed mark even agrees with the index; then another star's.
func replayedMark(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 2)
	must(f.t, a.star.Finish(f.ctx, "s", lease.ReasonHandoff), "finish a")
	old := f.rawMark("s")
	wantDecision(f.t, a.open("s", lease.OpenOptions{}), lease.MarkConsumed)
	a.appendN("s", "a2", 3)
	a.kill()
	f.putRaw("s", old) // tenure 1's mark, replayed over tenure 2
	b := f.start("star-b", nodeOpts{absorbEvery: 1000})
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledDead)
	if ten.Next != 5 || ten.Tenure != 3 {
		f.t.Fatalf("tenure after a replayed mark: %+v", ten)
	}
	if f.mark("s") != nil {
		f.t.Fatalf("the replayed mark was left in place")
	}
	b.appendN("s", "b", 1)
	must(f.t, b.star.Finish(f.ctx, "s", lease.ReasonHandoff), "finish b")
	old = f.rawMark("s")
	c := f.start("star-c", nodeOpts{absorbEvery: 1000})
	wantDecision(f.t, c.open("s", lease.OpenOptions{}), lease.MarkConsumed)
	c.appendN("s", "c", 2)
	c.kill()
	f.putRaw("s", old) // star-b's mark, replayed over star-c's tenure
	d := f.start("star-d", nodeOpts{})
	ten = d.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledDead)
	if ten.Next != 8 {
		f.t.Fatalf("continues at %d, want 8", ten.Next)
	}
	must(f.t, b.star.Close(f.ctx), "close b")
	must(f.t, d.star.Close(f.ctx), "close d")
	f.verify(d, "s")
}

// crashAfterFirstAck: one record acknowledged, nothing absorbed, the star
// dies: the last-writer record leads the successor to settle it.
func crashAfterFirstAck(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	if _, err := a.append("s", "first"); err != nil {
		f.t.Fatalf("first append: %v", err)
	}
	a.kill()
	p := f.env.Party("probe")
	if next, err := p.Refs.Next(f.ctx, "s"); err != nil || next != 0 {
		f.t.Fatalf("the index covers %d records before the takeover (%v), want 0", next, err)
	}
	b := f.start("star-b", nodeOpts{})
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledDead)
	if ten.Next != 1 {
		f.t.Fatalf("continues at %d, want 1", ten.Next)
	}
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// racingOpens: stars open one stream at once: exactly one is admitted.
func racingOpens(f *fixture) {
	const n = 4
	nodes := make([]*node, n)
	for i := range nodes {
		nodes[i] = f.start("star-"+string(rune('a'+i)), nodeOpts{})
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, nd := range nodes {
		wg.Go(func() { _, errs[i] = nd.star.Open(f.ctx, "s", lease.OpenOptions{}) })
	}
	wg.Wait()
	admitted := -1
	for i, err := range errs {
		switch {
		case err == nil && admitted >= 0:
			f.t.Fatalf("%s and %s were both admitted", nodes[admitted].name, nodes[i].name)
		case err == nil:
			admitted = i
		case !errors.Is(err, lease.ErrDeferred):
			f.t.Fatalf("%s: %v, want admitted or deferred", nodes[i].name, err)
		}
	}
	if admitted < 0 {
		f.t.Fatalf("nobody was admitted: %v", errs)
	}
	w := nodes[admitted]
	w.appendN("s", "w", 3)
	for _, nd := range nodes {
		must(f.t, nd.star.Close(f.ctx), "close "+nd.name)
	}
	f.verify(w, "s")
}

// limbo: Finish cannot land while the star's metastore is cut off: the
// lease is kept, opens by others bounce, and the departure lands on a
// retry once the store is back.
func limbo(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 3)
	a.store.SetDown(true)
	ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
	defer cancel()
	err := a.star.Finish(ctx, "s", lease.ReasonHandoff)
	var le *lease.LimboError
	if !errors.As(err, &le) || !errors.Is(err, metastore.ErrUnavailable) {
		f.t.Fatalf("finish while cut off: %v, want a *LimboError wrapping ErrUnavailable", err)
	}
	b := f.start("star-b", nodeOpts{})
	_, err = b.star.Open(f.ctx, "s", lease.OpenOptions{})
	wantDeferred(f.t, err, lease.LeaseHeld)
	if _, err := a.star.Open(f.ctx, "s", lease.OpenOptions{}); !errors.Is(err, lease.ErrDeferred) {
		f.t.Fatalf("reopen during limbo: %v", err)
	}
	a.store.SetDown(false)
	failfast.Timers(f.t, f.clk, 1, "the departure in limbo to wait for its retry")
	f.clk.Advance(f.retries)
	// The retry may land before this Finish asks: then the stream is no
	// longer held, and the open below finds its mark.
	if err := a.star.Finish(f.ctx, "s", lease.ReasonHandoff); err != nil && !errors.Is(err, lease.ErrNotHeld) {
		f.t.Fatalf("finish after the store came back: %v", err)
	}
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.MarkConsumed)
	b.appendN("s", "b", 1)
	must(f.t, a.star.Close(f.ctx), "close a")
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// tokenForms are tokens that are not tok but share a prefix with it:
// truncated or extended.
func tokenForms(tok string) []string {
	return []string{tok[:len(tok)-1], tok + "0", tok + tok}
}

// tokens: exact equality, cooperative on Any, mandatory on Fenced; a
// truncated or extended form of the installed token is stale, at a
// one-shot append as at Open.
func tokens(f *fixture) {
	a := f.start("star-a", nodeOpts{})
	must(f.t, a.star.CheckToken(f.ctx, "s", ""), "no token on a fresh Any stream")
	if err := a.star.CheckToken(f.ctx, "s", "x"); !errors.Is(err, lease.ErrStaleToken) {
		f.t.Fatalf("a token on a stream without one: %v", err)
	}
	_, err := a.star.Fence(f.ctx, "s", lease.Any, "p1")
	must(f.t, err, "install p1 (any)")
	must(f.t, a.star.CheckToken(f.ctx, "s", ""), "no token on an Any stream")
	must(f.t, a.star.CheckToken(f.ctx, "s", "p1"), "the installed token")
	if err := a.star.CheckToken(f.ctx, "s", "p0"); !errors.Is(err, lease.ErrStaleToken) {
		f.t.Fatalf("a stale token on an Any stream: %v", err)
	}
	for _, tok := range tokenForms("p1") {
		if err := a.star.CheckToken(f.ctx, "s", tok); !errors.Is(err, lease.ErrStaleToken) {
			f.t.Fatalf("token %q for the installed p1 on an Any stream: %v", tok, err)
		}
	}
	_, err = a.star.Fence(f.ctx, "s", lease.Fenced, "p2")
	must(f.t, err, "install p2 (fenced)")
	var te *lease.TokenError
	if err := a.star.CheckToken(f.ctx, "s", ""); !errors.As(err, &te) || te.Presented {
		f.t.Fatalf("no token on a Fenced stream: %v", err)
	}
	if err := a.star.CheckToken(f.ctx, "s", "p1"); !errors.As(err, &te) || !te.Presented {
		f.t.Fatalf("a stale token on a Fenced stream: %v", err)
	}
	if _, err := a.star.Open(f.ctx, "s", lease.OpenOptions{}); !errors.Is(err, lease.ErrStaleToken) {
		f.t.Fatalf("open without the token of a Fenced stream: %v", err)
	}
	for _, tok := range tokenForms("p2") {
		if err := a.star.CheckToken(f.ctx, "s", tok); !errors.Is(err, lease.ErrStaleToken) {
			f.t.Fatalf("token %q for the installed p2 on a Fenced stream: %v", tok, err)
		}
		if _, err := a.star.Open(f.ctx, "s", lease.OpenOptions{Token: tok}); !errors.Is(err, lease.ErrStaleToken) {
			f.t.Fatalf("open with token %q for the installed p2: %v", tok, err)
		}
	}
	if _, err := a.star.Fence(f.ctx, "s", lease.Fenced, ""); err == nil {
		f.t.Fatalf("a Fenced stream without a token was installed")
	}
	ten := a.open("s", lease.OpenOptions{Token: "p2"})
	wantDecision(f.t, ten, lease.Fresh)
	a.appendN("s", "a", 1)
	must(f.t, a.star.Close(f.ctx), "close")
	f.verify(a, "s")
}

// supersededInline: star-a rolls (the new epoch is minted) and dies
// before its old epoch is fenced and settled, while the last-writer record
// still names the old one; star-b's open settles that superseded epoch
// inline.
func supersededInline(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 4)
	old := a.star.Epoch()
	oldKey := a.minter.RecordKey("star-a", old.Epoch)
	a.store.FailTxn(func(t metastore.Txn) bool {
		for _, op := range t.Then {
			if op.Key == oldKey {
				return true
			}
		}
		return false
	})
	chainKey := a.minter.ChainKey("star-a")
	_, rev, err := f.store.List(f.ctx, chainKey)
	must(f.t, err, "list")
	rolled := make(chan error, 1)
	go func() { rolled <- a.star.Roll(f.ctx, old.Constants) }()
	ctx, cancel := context.WithTimeout(f.ctx, failfast.Bound)
	defer cancel()
	minted := false
	for ev, err := range f.store.Watch(ctx, chainKey, rev+1) {
		must(f.t, err, "watch the chain")
		if ev.KV.Key == chainKey {
			minted = true
			break
		}
	}
	if !minted {
		f.t.Fatalf("waiting for the roll to mint the new epoch: %v", ctx.Err())
	}
	a.kill()
	if err := failfast.Recv(f.t, rolled, "the roll to end with its star killed"); err == nil {
		f.t.Fatalf("the roll finished although its old epoch could not be fenced")
	}
	b := f.start("star-b", nodeOpts{})
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledInline)
	if ten.Predecessor == nil || ten.Predecessor.Epoch != old.Epoch || ten.Next != 4 {
		f.t.Fatalf("tenure %+v", ten)
	}
	b.appendN("s", "b", 2)
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// handoffBundled: three streams share star-a's epoch and its flights (each
// flight bundles one record of each); one of them is handed to star-b
// through Finish and the gate while the other two go on appending, in
// bundles, in the same epoch.
func handoffBundled(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	for _, s := range []string{"x", "y", "z"} {
		a.open(s, lease.OpenOptions{})
	}
	ep := a.star.Epoch().Epoch
	a.appendBundles("a", 5, "x", "y", "z")
	must(f.t, a.star.Finish(f.ctx, "y", lease.ReasonHandoff), "finish y")
	if m := f.mark("y"); m == nil || m.Next != 5 {
		f.t.Fatalf("mark of y: %+v", m)
	}
	// The release flush covered y alone: x and z wait for the absorb.
	p := f.env.Party("probe")
	for s, want := range map[string]uint64{"x": 0, "y": 5, "z": 0} {
		if next, err := p.Refs.Next(f.ctx, s); err != nil || next != want {
			f.t.Fatalf("%s covered up to %d (%v), want %d", s, next, err, want)
		}
	}
	b := f.start("star-b", nodeOpts{})
	ten := b.open("y", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.MarkConsumed)
	b.appendN("y", "b-y", 3)
	a.appendBundles("a2", 4, "x", "z")
	if got := a.star.Epoch().Epoch; got != ep {
		f.t.Fatalf("star-a's epoch moved from %d to %d", ep, got)
	}
	if _, pending := a.star.Absorbed(); pending != 9 {
		f.t.Fatalf("star-a has %d flights waiting for an absorb, want 9", pending)
	}
	must(f.t, a.star.Absorb(f.ctx), "absorb a")
	if last, pending := a.star.Absorbed(); pending != 0 || last.Slot != 8 {
		f.t.Fatalf("after the absorb: last %v, %d pending; want slot 8, none", last, pending)
	}
	must(f.t, b.star.Absorb(f.ctx), "absorb b")
	for s, want := range map[string]uint64{"x": 9, "y": 8, "z": 9} {
		if next, err := p.Refs.Next(f.ctx, s); err != nil || next != want {
			f.t.Fatalf("%s covered up to %d (%v), want %d", s, next, err, want)
		}
	}
	a.kill()
	c := f.start("star-c", nodeOpts{})
	wantDecision(f.t, c.open("x", lease.OpenOptions{}), lease.SettledDead)
	wantDecision(f.t, c.open("z", lease.OpenOptions{}), lease.AlreadySettled)
	c.appendBundles("c", 2, "x", "z")
	must(f.t, b.star.Close(f.ctx), "close b")
	must(f.t, c.star.Close(f.ctx), "close c")
	f.verify(b, "x", "y", "z")
}

// rollThenCrash: a roll moves the last-writer record to the new epoch
// before anything is acknowledged there; the star dies with acknowledged,
// unabsorbed records in the new epoch; the successor settles that one.
func rollThenCrash(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 3)
	c := a.star.Epoch().Constants
	c.Window = 8
	must(f.t, a.star.Roll(f.ctx, c), "roll")
	ep := a.star.Epoch().Epoch
	if w := f.writer("s"); w.Epoch != ep {
		f.t.Fatalf("after the roll the last-writer record names epoch %d, want %d", w.Epoch, ep)
	}
	a.appendN("s", "a2", 4)
	a.kill()
	b := f.start("star-b", nodeOpts{})
	ten := b.open("s", lease.OpenOptions{})
	wantDecision(f.t, ten, lease.SettledDead)
	if ten.Predecessor.Epoch != ep || ten.Next != 7 {
		f.t.Fatalf("tenure %+v", ten)
	}
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// admissionGate: a star whose host withdraws admission (its authority
// grant lapsed) opens nothing and appends nothing until it is restored.
func admissionGate(f *fixture) {
	var denied atomic.Bool
	errNoGrant := errors.New("no grant")
	a := f.start("star-a", nodeOpts{admit: func() error {
		if denied.Load() {
			return errNoGrant
		}
		return nil
	}})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 2)
	denied.Store(true)
	if _, err := a.star.Open(f.ctx, "t", lease.OpenOptions{}); !errors.Is(err, errNoGrant) {
		f.t.Fatalf("open without admission: %v", err)
	}
	if _, err := a.append("s", "refused"); !errors.Is(err, errNoGrant) {
		f.t.Fatalf("append without admission: %v", err)
	}
	denied.Store(false)
	a.appendN("s", "a2", 2)
	must(f.t, a.star.Close(f.ctx), "close")
	f.verify(a, "s")
}

// openWait: an open retried while deferred is admitted once the holder's
// mark lands.
func openWait(f *fixture) {
	a := f.start("star-a", nodeOpts{})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 3)
	b := f.start("star-b", nodeOpts{})
	type result struct {
		ten lease.Tenure
		err error
	}
	done := make(chan result, 1)
	go func() {
		ten, err := b.star.OpenWait(f.ctx, "s", lease.OpenOptions{}, time.Second)
		done <- result{ten, err}
	}()
	failfast.Timers(f.t, f.clk, 1, "the deferred open to wait for its retry")
	must(f.t, a.star.Finish(f.ctx, "s", lease.ReasonHandoff), "finish a")
	f.clk.Advance(time.Second)
	r := failfast.Recv(f.t, done, "the open to be admitted once the mark landed")
	must(f.t, r.err, "open wait")
	wantDecision(f.t, r.ten, lease.MarkConsumed)
	b.appendN("s", "b", 1)
	must(f.t, a.star.Close(f.ctx), "close a")
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}

// breakLease: a host holding a newer authority grant breaks a dead star's
// advisory lease instead of waiting for its session; the gate still
// defers while the dead star's epoch is its live head, and admits once
// that epoch is settled (the authority layer's recovery does it).
func breakLease(f *fixture) {
	a := f.start("star-a", nodeOpts{absorbEvery: 1000})
	a.open("s", lease.OpenOptions{})
	a.appendN("s", "a", 3)
	a.crash() // its session, lease and registry entry live on
	b := f.start("star-b", nodeOpts{})
	_, err := b.star.Open(f.ctx, "s", lease.OpenOptions{})
	wantDeferred(f.t, err, lease.LeaseHeld)
	_, err = b.star.Open(f.ctx, "s", lease.OpenOptions{BreakLease: true})
	wantDeferred(f.t, err, lease.PredecessorAlive)
	// The recovery settles star-a's epochs.
	p := f.env.Party("recovery")
	_, err = p.Settler.SettleAll(f.ctx, "star-a")
	must(f.t, err, "settle star-a")
	ten := b.open("s", lease.OpenOptions{BreakLease: true})
	wantDecision(f.t, ten, lease.AlreadySettled)
	if ten.Next != 3 {
		f.t.Fatalf("continues at %d, want 3", ten.Next)
	}
	if st := f.state("s"); st.Holder != "star-b" {
		f.t.Fatalf("the lease names %q", st.Holder)
	}
	b.appendN("s", "b", 2)
	must(f.t, b.star.Close(f.ctx), "close b")
	f.verify(b, "s")
}
