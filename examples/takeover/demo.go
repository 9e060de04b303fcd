package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/settle"
)

const (
	stream = "orders"
	starA  = "star-a"
	starB  = "star-b"
)

// demo is one run of the demonstration.
type demo struct {
	cfg  *config
	be   *backends
	out  io.Writer
	tl   *timeline
	keys wire.Keys

	// Each party sees the zones through its own wrappers: latency (a
	// remote zone), a meter (request counts), and for star-a a link (the
	// network that holds its PUTs back).
	linksA  []*link
	metersA []*meter
	metersB []*meter
	metersV []*meter // the final verification's reads
}

func newDemo(cfg *config, be *backends, out io.Writer) *demo {
	return &demo{cfg: cfg, be: be, out: out, tl: &timeline{w: out, start: time.Now()}, keys: wire.Keys{Prefix: "takeover-" + cfg.runID}}
}

// timeline prints events with the time since the start.
type timeline struct {
	w     io.Writer
	start time.Time
}

func (t *timeline) at(who, format string, args ...any) {
	ms := time.Since(t.start).Milliseconds()
	fmt.Fprintf(t.w, "%6dms  %-9s %s\n", ms, who, fmt.Sprintf(format, args...))
}

func (t *timeline) more(format string, args ...any) {
	fmt.Fprintf(t.w, "%8s  %-9s   %s\n", "", "", fmt.Sprintf(format, args...))
}

// span formats a range of numbers.
func span(first, last uint64) string {
	if first == last {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d–%d", first, last)
}

func zoneList(names []string) string {
	if len(names) == 0 {
		return "no zone"
	}
	return strings.Join(names, ", ")
}

func (d *demo) latencyWrap(b objstore.Bucket, seed uint64) objstore.Bucket {
	if d.cfg.latency == 0 {
		return b
	}
	l := d.cfg.latency
	return latency.Wrap(b, latency.Options{Seed: seed, Default: latency.Uniform(l/2, l*3/2)})
}

func (d *demo) brokerConfig(star string, buckets []objstore.Bucket) (brokerConfig, error) {
	minter, err := epoch.NewMinter(d.be.store, epoch.Options{Identity: star})
	if err != nil {
		return brokerConfig{}, err
	}
	refs, err := settle.NewRefIndex(d.be.store, "", locate)
	if err != nil {
		return brokerConfig{}, err
	}
	return brokerConfig{
		Star: star, Stream: stream, Store: d.be.store, Minter: minter, Refs: refs,
		Buckets: buckets, Keys: d.keys, Class: "standard", W: d.cfg.w, Window: d.cfg.window,
		AbsorbEvery: d.cfg.absorbEvery, SessionTTL: d.cfg.sessionTTL, Abandon: d.be.abandon,
	}, nil
}

// openRetryEvery is how often star-b tries the open again while the gate
// defers it.
const openRetryEvery = 100 * time.Millisecond

// openWhenAdmitted opens the stream through b's gate, trying again every
// openRetryEvery while the gate defers it (a *lease.DeferredError), until
// it is admitted, another error ends it, or ctx ends. It returns how many
// tries the gate deferred.
func openWhenAdmitted(ctx context.Context, b *broker) (openReport, int, error) {
	tick := time.NewTicker(openRetryEvery)
	defer tick.Stop()
	for deferred := 0; ; deferred++ {
		rep, err := b.open(ctx)
		var de *lease.DeferredError
		if !errors.As(err, &de) {
			return rep, deferred, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return rep, deferred, fmt.Errorf("%w; the gate still defers: %w", ctx.Err(), err)
		}
	}
}

// deferral describes a refusal of the gate: "lease held by star-a".
func deferral(de *lease.DeferredError) string {
	s := string(de.Reason)
	if de.Holder != "" {
		s += " by " + de.Holder
	}
	return s
}

func (d *demo) run(ctx context.Context) error {
	cfg, tl := d.cfg, d.tl
	fmt.Fprintf(d.out, "cutline takeover demonstration (%s)\n", cfg.runID)
	fmt.Fprintf(d.out, "  metadata: %s\n", d.be.storeDesc)
	fmt.Fprintf(d.out, "  objects:  %s, keys under %s/\n", d.be.zonesDesc, d.keys.Prefix)
	lat := "no injected latency"
	if cfg.latency > 0 {
		lat = fmt.Sprintf("%v–%v injected per object request", cfg.latency/2, cfg.latency*3/2)
	}
	fmt.Fprintf(d.out, "  K=%d W=%d (a slot dies at B=%d poisons), window %d, %s\n", cfg.k, cfg.w, cfg.k-cfg.w+1, cfg.window, lat)
	fmt.Fprintf(d.out, "  stream %q, %d records from one producer; star-a dies after %d, with %d appends in flight\n\n",
		stream, cfg.records, cfg.crashAfter, cfg.inflight)

	var names []string
	for _, z := range d.be.zones {
		if err := objstore.Verify(ctx, z); err != nil {
			return err
		}
		names = append(names, z.Name())
	}
	tl.at("setup", "%s: each refuses a second create of one key (objstore.Verify)", zoneList(names))
	if err := objstore.VerifyDistinct(ctx, d.be.zones...); err != nil {
		return err
	}
	tl.at("setup", "%s: %d distinct stores, none sees another's probe (objstore.VerifyDistinct)", zoneList(names), len(names))

	var viewA, viewB []objstore.Bucket
	for i, z := range d.be.zones {
		la := newLink(ctx, d.latencyWrap(z, cfg.seed+uint64(i)))
		ma := newMeter(la)
		d.metersA, d.linksA = append(d.metersA, ma), append(d.linksA, la)
		viewA = append(viewA, ma)
		mb := newMeter(d.latencyWrap(z, cfg.seed+100+uint64(i)))
		d.metersB = append(d.metersB, mb)
		viewB = append(viewB, mb)
		d.metersV = append(d.metersV, newMeter(z))
	}

	// Star-a starts and opens the stream, and serves it.
	cfgA, err := d.brokerConfig(starA, viewA)
	if err != nil {
		return err
	}
	a, err := startBroker(ctx, cfgA)
	if err != nil {
		return fmt.Errorf("star-a starts: %w", err)
	}
	defer a.discard() // no-op once it died
	epA := a.rec.Epoch
	tl.at(starA, "starts (lease.Start): registered in the star registry, bound to its metastore session (TTL %v)", a.sess.TTL())
	tl.at(starA, "minted epoch %s", a.rec)
	repA, err := a.open(ctx)
	if err != nil {
		return fmt.Errorf("star-a opens the stream: %w", err)
	}
	if tA := repA.Tenure; tA.Decision != lease.Fresh || tA.Next != 0 {
		return fmt.Errorf("the stream is not new: the gate decided %q, next offset %d", tA.Decision, tA.Next)
	}
	tl.at(starA, "opens stream %q through the gate (Star.Open): %s, a new stream, first offset 0", stream, repA.Tenure.Decision)
	tl.more("it holds the stream's lease; the last-writer record names %s/%d, tenure %d", starA, repA.Tenure.Epoch, repA.Tenure.Tenure)

	// The producer sends one absorb batch at a time, pipelined, and the
	// next once the Star has absorbed it: the Star absorbs on its own every
	// AbsorbEvery acknowledgements, and what it has absorbed when star-a
	// dies must follow from the flags, not from how many acknowledgements
	// of the next batch came in before its absorb ran.
	p := newProducer("producer-1")
	start := time.Now()
	var o outcome
	for from, every := uint64(0), uint64(cfg.absorbEvery); from < uint64(cfg.crashAfter); from += every {
		sent, refused := p.submit(ctx, a, seqRange(from, min(from+every, uint64(cfg.crashAfter))))
		ob, err := p.collect(ctx, sent, refused)
		if err != nil {
			return err
		}
		if len(ob.failed) > 0 {
			return fmt.Errorf("star-a failed %d appends before it was meant to die", len(ob.failed))
		}
		o.merge(ob)
		if err := a.waitAbsorbed(ctx); err != nil {
			return err
		}
	}
	// The zones get every copy of the acknowledged slots, the ones past
	// the first W included, before star-a loses them.
	if err := a.waitSent(ctx); err != nil {
		return err
	}
	st, err := a.state(ctx)
	if err != nil {
		return err
	}
	if st.err != nil {
		return st.err
	}
	if cfg.crashAfter > 0 {
		tl.at(starA, "acknowledged %d records, offsets %s, pipelined through Star.Submit (%v)",
			o.acked, span(o.firstOff, o.lastOff), time.Since(start).Round(time.Millisecond))
	}
	tl.more("the host absorbed %d of them (refs written, checkpoint %d); %d acknowledged records are not absorbed yet",
		st.absorbed, st.checkpoint, st.acked-st.absorbed)

	// Star-a loses all zones but W−1: its PUTs of the in-flight slots there
	// are held up in the network; the zones it still reaches get W−1
	// copies of each slot, which is not enough to acknowledge anything. One
	// slot reaches no zone at all: a hole. The PUTs held up are chosen by
	// zone and slot, never by timing, so every run holds up the same ones.
	keep := cfg.w - 1
	lostZones, keptZones := names[:cfg.k-keep], names[cfg.k-keep:]
	first := uint64(cfg.crashAfter)
	n := uint64(cfg.inflight)
	holeSlot := a.slotOf(first + n*2/5)
	holeKey := d.keys.Slot(starA, epA, holeSlot)
	inFlight := func(key string) bool {
		s, ok := d.keys.ParseSlot(starA, epA, key)
		return ok && s >= a.slotOf(first) && s < a.slotOf(first+n)
	}
	for i, l := range d.linksA {
		if i < cfg.k-keep {
			l.hold(inFlight)
		} else {
			l.hold(func(key string) bool { return key == holeKey })
		}
	}
	tl.at(starA, "loses %s: its PUTs there are held up in the network and will land late", zoneList(lostZones))
	sentA, refused := p.submit(ctx, a, seqRange(first, first+n))
	if len(refused) > 0 {
		return fmt.Errorf("star-a refused %d appends before it died", len(refused))
	}
	// Wait until every in-flight slot was sent to every zone: created in
	// the zones star-a still reaches, held up on the way to the others.
	var sentKeys, reached []string
	for s := a.slotOf(first); s < a.slotOf(first+n); s++ {
		sentKeys = append(sentKeys, d.keys.Slot(starA, epA, s))
		if s != holeSlot {
			reached = append(reached, d.keys.Slot(starA, epA, s))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	for i, m := range d.metersA {
		var err error
		if i < cfg.k-keep {
			err = d.linksA[i].waitKept(wctx, sentKeys)
		} else if err = m.wait(wctx, reached); err == nil {
			err = d.linksA[i].waitKept(wctx, []string{holeKey})
		}
		if err != nil {
			cancel()
			return err
		}
	}
	cancel()
	tl.at(starA, "%d appends in flight (sequences %s, slots %s)", n, span(first, first+n-1), span(a.slotOf(first), a.slotOf(first+n-1)))
	if keep > 0 {
		tl.more("each reached %s only: %d of W=%d copies, not enough to acknowledge; slot %d reached no zone at all",
			zoneList(keptZones), keep, cfg.w, holeSlot)
	} else {
		tl.more("none reached any zone")
	}

	// Star-a dies.
	a.crash()
	heldUp := 0
	for _, l := range d.linksA {
		heldUp += l.keptCount()
	}
	oA, err := p.collect(ctx, sentA, nil)
	if err != nil {
		return err
	}
	if oA.acked > 0 {
		return fmt.Errorf("star-a acknowledged %d appends with fewer than W copies", oA.acked)
	}
	unacked := oA.failed
	tl.at(starA, "DIES mid-flight: writer aborted (no close, no release, no absorb); %d appends never acknowledged",
		len(unacked))
	tl.more("Star.Abort: no Finish, no clean-release mark, no keep-alive: its lease and registry entry stay until its session ends")
	tl.more("%d of its PUTs are still in the network: a zombie", heldUp)

	// Star-b starts and opens the stream: the gate refuses while star-a's
	// lease lives, and admits once star-a's session has ended.
	cfgB, err := d.brokerConfig(starB, viewB)
	if err != nil {
		return err
	}
	b, err := startBroker(ctx, cfgB)
	if err != nil {
		return fmt.Errorf("star-b starts: %w", err)
	}
	defer b.discard()
	tl.at(starB, "starts (lease.Start): registered in the star registry, bound to its metastore session (TTL %v)", b.sess.TTL())
	tl.at(starB, "minted epoch %s", b.rec)
	repB, err := b.open(ctx)
	var de *lease.DeferredError
	if errors.As(err, &de) {
		tl.at(starB, "opens stream %q: deferred: %s (a *lease.DeferredError: retry later)", stream, deferral(de))
		if d.be.expire != nil {
			d.be.expire(a.sess)
			tl.at(starA, "its session expires (TTL): its lease and registry entry go with it")
		} else {
			tl.at(starA, "its session gets no keep-alive: it expires when its TTL (%v) runs out, and its lease and registry entry with it", a.sess.TTL())
			tl.more("%s tries the open again every %v meanwhile", starB, openRetryEvery)
		}
		var deferred int
		repB, deferred, err = openWhenAdmitted(ctx, b)
		if err == nil && deferred > 0 {
			tl.at(starB, "the gate deferred %d more tries: %s's session was still alive", deferred, starA)
		}
	}
	if err != nil {
		return fmt.Errorf("star-b takes the stream over: %w", err)
	}
	tenB := repB.Tenure
	if prev := tenB.Predecessor; prev == nil || prev.Star != starA || prev.Epoch != epA {
		return fmt.Errorf("star-b's gate judged the last-writer record %+v, want %s/%d", prev, starA, epA)
	}
	if tenB.Decision != lease.SettledDead || tenB.Settled == nil {
		return fmt.Errorf("star-b's gate decided %q, want %q with a settlement", tenB.Decision, lease.SettledDead)
	}
	prev := tenB.Predecessor
	tl.at(starB, "opens stream %q through the gate: admitted, %s", stream, tenB.Decision)
	tl.more("the gate judged the last-writer record (%s, epoch %d, tenure %d): no clean-release mark, %s/%d its class head, %s gone from the registry",
		prev.Star, prev.Epoch, prev.Tenure, prev.Star, prev.Epoch, prev.Star)
	tl.more("so it fenced and settled %s/%d before admitting %s", prev.Star, prev.Epoch, starB)
	sr := *tenB.Settled
	if fr := sr.Fence; fr != nil {
		tl.at(starB, "fenced %s/%d: cut %d (fence.Fencer, %v)", fr.Star, fr.Epoch, fr.Cut, fr.Duration.Round(time.Millisecond))
		tl.more("end estimate slot %d, walk from slot %d; %d rounds, %d object reads, %d creates",
			fr.Estimate, fr.WalkStart, fr.Rounds, fr.Reads, fr.Creates)
		tl.more("flight copies repaired: %d (slots holding fewer than W copies, completed); poison objects written: %d",
			fr.Repaired, fr.Poisoned)
	}
	tl.at(starB, "settled %s/%d (settle.Settler): deleted %d garbage flight copies in [%d, %d], covered %d flights in [%d, %d)",
		sr.Star, sr.Epoch, sr.GarbageDeleted, sr.Cut, sr.Cut+uint64(cfg.window), sr.Covered, sr.Cut-uint64(sr.Covered), sr.Cut)
	if sr.GarbageLeft > 0 {
		tl.more("%d garbage copies left in unreachable zones (harmless: nothing reads past the cut)", sr.GarbageLeft)
	}
	if sr.Star != starA || sr.Epoch != epA {
		return fmt.Errorf("star-b settled %s/%d, want %s/%d", sr.Star, sr.Epoch, starA, epA)
	}
	cut := sr.Cut
	// Invariant 1: no acknowledged flight is cut.
	if cut < a.slotOf(first) {
		return fmt.Errorf("cut %d is below the %d slots star-a acknowledged", cut, a.slotOf(first))
	}
	tl.more("of the covered flights, %d were acknowledged but not absorbed by star-a, %d were never acknowledged (the fence completed them)",
		a.slotOf(first)-st.checkpoint, cut-a.slotOf(first))
	tl.at(starB, "stream %q continues at offset %d (RefIndex.Next); producer state rebuilt from %d covered records",
		stream, tenB.Next, repB.Producers)
	tl.more("the last-writer record now names %s/%d, tenure %d, written by compare-and-set before any acknowledgement; the open took %v",
		starB, tenB.Epoch, tenB.Tenure, repB.Duration.Round(time.Millisecond))

	// The producer retries what was never acknowledged, then goes on.
	sent, refused := p.submit(ctx, b, unacked)
	o, err = p.collect(ctx, sent, refused)
	if err != nil {
		return err
	}
	if len(o.failed) > 0 {
		return fmt.Errorf("star-b failed %d retried appends", len(o.failed))
	}
	tl.at("producer", "retries the %d unacknowledged records against %s", len(unacked), starB)
	if o.dups > 0 {
		tl.more("%d were in the stream already (settlement covered them): acknowledged at their offsets %s, not appended again",
			o.dups, span(o.dupFirst, o.dupLast))
	}
	if appended := o.acked - o.dups; appended > 0 {
		tl.more("%d appended at offsets %s", appended, span(o.firstOff, o.lastOff))
	}
	if rest := seqRange(first+n, uint64(cfg.records)); len(rest) > 0 {
		start = time.Now()
		sent, refused = p.submit(ctx, b, rest)
		o, err = p.collect(ctx, sent, refused)
		if err != nil {
			return err
		}
		if len(o.failed) > 0 {
			return fmt.Errorf("star-b failed %d appends", len(o.failed))
		}
		tl.at(starB, "acknowledged %d new records, offsets %s (%v)", o.acked, span(o.firstOff, o.lastOff), time.Since(start).Round(time.Millisecond))
	}

	if err := d.zombie(ctx, b, epA, cut, heldUp); err != nil {
		return err
	}

	if err := b.shutdown(ctx); err != nil {
		return fmt.Errorf("star-b shutdown: %w", err)
	}
	if st, err = b.state(ctx); err != nil {
		return err
	}
	if st.absorbed != st.acked {
		return fmt.Errorf("star-b shut down with %d of %d acknowledgements absorbed", st.absorbed, st.acked)
	}
	tl.at(starB, "shuts down cleanly: %d acknowledgements, all absorbed (checkpoint %d), writer closed", st.acked, st.checkpoint)
	ls, err := lease.Inspect(ctx, d.be.store, "", stream)
	if err != nil {
		return err
	}
	if m := ls.Mark; m == nil || m.Star != starB || m.Tenure != tenB.Tenure || ls.Holder != "" {
		return fmt.Errorf("after Star.Close, stream %q holds the mark %+v and the lease of %q; want star-b's mark for tenure %d and no lease", stream, ls.Mark, ls.Holder, tenB.Tenure)
	}
	tl.more("Star.Close let %q go through Finish: clean-release mark stamped for tenure %d, next offset %d (%s), lease released (lease.Inspect)",
		stream, ls.Mark.Tenure, ls.Mark.Next, ls.Mark.Reason)

	verdict, err := d.verify(ctx, p, epA, cut)
	d.requests()
	fmt.Fprintf(d.out, "\n%s\n", verdict)
	if err != nil {
		return err
	}
	fmt.Fprintln(d.out, "ok: every acknowledged record is readable exactly once, at the offset it was acknowledged at")
	return nil
}

// zombie lands star-a's held-back PUTs, long after the takeover, and checks
// that they changed nothing: the cut is the same, nothing past it is served.
func (d *demo) zombie(ctx context.Context, b *broker, epA, cut uint64, pending int) error {
	cfg, tl := d.cfg, d.tl
	created := 0
	for _, l := range d.linksA {
		c, err := l.land(ctx)
		if err != nil {
			return err
		}
		created += c
	}
	tl.at("zombie", "%s's %d held-back PUTs land now: %d created, %d refused (the key held poison, a repair copy or an earlier attempt)",
		starA, pending, created, pending-created)

	// What do the zones hold past the cut now?
	zones := make([]objstore.Bucket, len(d.metersV))
	for i, m := range d.metersV {
		zones[i] = m
	}
	var complete []uint64
	var cutFlights, cutPoisons int
	for s := cut; s <= cut+uint64(cfg.window); s++ {
		flights, poisons := 0, 0
		for _, z := range zones {
			switch wire.ObserveHeader(ctx, z, wire.Addr{Keys: d.keys, Star: starA, Epoch: epA, Slot: s}).State {
			case wire.SlotFlight:
				flights++
			case wire.SlotPoison:
				poisons++
			}
		}
		if s == cut {
			cutFlights, cutPoisons = flights, poisons
		} else if flights >= cfg.w {
			complete = append(complete, s)
		}
	}
	tl.more("cut slot %d: poison in %d zones, a flight in %d: still dead (poison stands for good)", cut, cutPoisons, cutFlights)
	if cutPoisons < cfg.k-cfg.w+1 {
		return fmt.Errorf("cut slot %d holds %d poison, want at least %d", cut, cutPoisons, cfg.k-cfg.w+1)
	}
	if len(complete) > 0 {
		tl.more("%d slots past the cut (%s) now hold the zombie's flight in at least W=%d zones, yet nothing maps or serves them",
			len(complete), span(complete[0], complete[len(complete)-1]), cfg.w)
	}

	// The cut is stable: fencing again reads the published cut.
	fr, err := b.fencer.FenceReport(ctx, starA, epA)
	if err != nil {
		return fmt.Errorf("re-fence %s/%d: %w", starA, epA, err)
	}
	if fr.Cut != cut || !fr.AlreadyFenced {
		return fmt.Errorf("re-fence %s/%d: cut %d (already fenced %v), want the published cut %d", starA, epA, fr.Cut, fr.AlreadyFenced, cut)
	}
	tl.at(starB, "fences %s/%d again: cut %d, already published, nothing walked", starA, epA, fr.Cut)

	// Nothing past the cut is served, complete or not.
	probe := cut + 1
	if len(complete) > 0 {
		probe = complete[0]
	}
	_, err = b.reader.Read(ctx, starA, chain.Position{Epoch: epA, Slot: probe})
	if !errors.Is(err, chain.ErrNotCommitted) {
		return fmt.Errorf("read %s/%d/%d past the cut: got %v, want ErrNotCommitted", starA, epA, probe, err)
	}
	served := uint64(0)
	for f, err := range b.reader.Flights(ctx, starA, chain.Position{}) {
		if err != nil {
			return err
		}
		if f.Epoch != epA || f.Slot != served {
			return fmt.Errorf("chain.Reader served %s/%v, want %d/%d", starA, f.Position, epA, served)
		}
		served++
	}
	if served != cut {
		return fmt.Errorf("chain.Reader served %d flights of %s/%d, want the %d below the cut", served, starA, epA, cut)
	}
	tl.more("chain.Reader serves %s/%d slots [0, %d) and nothing else; slot %d: %q", starA, epA, cut, probe, chain.ErrNotCommitted.Error())
	return nil
}

// requests prints each party's object requests and their mean duration.
func (d *demo) requests() {
	fmt.Fprintf(d.out, "\nobject requests (count × mean time)     %-16s %-16s %-16s %s\n", "creates", "reads", "deletes", "lists")
	row := func(who string, ms []*meter) {
		var c opCounts
		for _, m := range ms {
			c.add(m.snapshot())
		}
		cell := func(n int, t time.Duration) string {
			if n == 0 {
				return "0"
			}
			return fmt.Sprintf("%d × %v", n, (t / time.Duration(n)).Round(10*time.Microsecond))
		}
		fmt.Fprintf(d.out, "  %-36s  %-16s %-16s %-16s %s\n", who, cell(c.creates, c.timeCreate), cell(c.reads, c.timeRead),
			cell(c.deletes, c.timeDelete), cell(c.lists, c.timeList))
	}
	row("star-a (writer; PUTs sent)", d.metersA)
	row("star-b (takeover, writer)", d.metersB)
	row("checks, verification (raw zones)", d.metersV)
}
