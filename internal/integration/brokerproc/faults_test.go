//go:build unix

package brokerproc_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/s3"
	"github.com/cutline/cutline/settle"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/integration/stacktest"
)

// Bounds of TestBrokerFaults.
const (
	faultsTimeout = 170 * time.Second // the whole test once the broker is built
	// testFence bounds the test's own fence of the killed holder's epoch
	// while a zone is down: long enough to decide, or to report the slot
	// undecided.
	testFence = 5 * time.Second
	// etcdOutage is how long etcd stays down at most; it comes back
	// earlier once outageAcks acknowledgements came during the outage.
	etcdOutage = 3 * time.Second
	outageAcks = 10
	// burstN appends are sent to the holder right before it is killed.
	burstN = 8
	// keepGoing is how many acknowledgements show that appends go on.
	keepGoing = 20
)

// The key prefix of the broker's epochs (its epoch.Constants.Prefix).
const brokerPrefix = "streams"

// TestBrokerFaults runs the broker processes (K=3, W=2 on three
// versitygw processes, an embedded etcd) through real-process faults,
// with producers appending all along:
//
//  1. zone-c's S3 process is killed mid-append; acknowledgements keep
//     coming from the two zones left;
//  2. with zone-c still down, the holder is killed (kill -9) right after
//     a burst of appends was sent to it: the survivors fence its epoch,
//     then a fencer of the test's own does. Each either finds a cut
//     above every acknowledged slot of the epoch, or waits on an
//     undecided slot (the undecided-slot gauge of the brokers,
//     fence.ErrUndecided for the test's fencer): it never guesses;
//  3. zone-c's process restarts on its port and directory; the takeover
//     completes and appends go on; the killed broker starts again;
//  4. etcd (its only member) stops and restarts mid-run; appends resume
//     (an outage that outlasts the sessions' keep-alives ends the
//     holder's star, which starts again, and the controller's session,
//     which is elected again);
//  5. the holder is stopped (SIGSTOP) with an append in flight, a
//     successor takes over, and the stopped broker is continued
//     (SIGCONT): it acknowledges nothing at or past its epoch's cut. A
//     controller elected since the holder's grant counts its lease from
//     its election, so after step 4 the grant may end only with the
//     lease (20 s) rather than through the fast fence.
//
// No time is asserted: the failovers' timings are logged.
//
// Then every guarantee is checked: every acknowledged record is read
// back exactly once, in order, at the offset of its acknowledgement;
// cutlinetest.Check checks the README's six guarantees over a History
// made from the producers' acknowledgements, on the zones' buckets and
// the etcd store read directly; every fenced epoch of every broker's
// star is checked as it lies in storage (cutlinetest.Env.CheckEpoch);
// and no acknowledgement of the stopped broker lies at or past its
// epoch's cut.
func TestBrokerFaults(t *testing.T) {
	bin := stacktest.BuildBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), faultsTimeout)
	defer cancel()
	c := startCluster(ctx, t, bin)
	chk := newChecker(t, c)
	ph := &phases{led: c.led}

	holder := c.waitHolder(ctx, c.brokers)
	c.waitLinks(ctx, holder, c.others(holder.name))
	ps := c.startProducers(ctx, streams, 2)
	c.waitAcks(ctx, 40, "before the first fault")
	ph.end("before the faults")

	// 1. Zone-c's process is killed mid-append.
	zone := c.zones.Servers[zonesK-1]
	zoneName := stacktest.ZoneName(zonesK - 1)
	zone.Stop()
	c.waitAcks(ctx, keepGoing, "with "+zoneName+" down")
	ph.end(zoneName + " down")

	// 2. A takeover of the holder while zone-c is down, with a burst of
	// appends in flight at it when it is killed; the test's fencer races
	// the survivors'.
	holder = c.waitHolder(ctx, c.brokers)
	var burst []<-chan answer
	for i := range burstN {
		burst = append(burst, c.sendTo(ctx, holder, key{"payments", "faults-burst", uint64(i)}, untilWritten))
	}
	holder.kill()
	t2 := time.Now()
	// Each was acknowledged before the kill, or its answer never came.
	var unacked []key
	for i, ch := range burst {
		k := key{"payments", "faults-burst", uint64(i)}
		if a := <-ch; a.Err == nil && a.Code == http.StatusOK {
			c.led.ack(k, a.Ack, holder.name, t2)
		} else {
			unacked = append(unacked, k)
		}
	}
	rec := chk.latest(ctx, holder.name)
	top := c.led.acksIn(holder.name, rec.Epoch)
	t.Logf("2: %s killed with %s down and %d appends sent to it (%d unanswered); its epoch %d holds its acknowledgements below slot %d", holder.name, zoneName, burstN, len(unacked), rec.Epoch, top)
	successorSaw := chk.awaitFenceOrUndecided(ctx, c, holder, rec.Epoch, top)
	t.Logf("2: the survivors on %s/%d: %s", holder.name, rec.Epoch, successorSaw)
	// A fencer of the test's own, zone-c still down: it reads the
	// published cut, or finds the slot the survivors wait on undecided.
	fctx, fcancel := context.WithTimeout(ctx, testFence)
	rep, ferr := chk.fencer.FenceReport(fctx, holder.name, rec.Epoch)
	fcancel()
	var ue *fence.UndecidedError
	switch {
	case ferr == nil:
		require.GreaterOrEqual(t, rep.Cut, top, "the test's fence of %s/%d cut below an acknowledged slot", holder.name, rec.Epoch)
		t.Logf("2: the test's fence of %s/%d with %s down: cut %d (already fenced %v, late %v, %d copies repaired, %d poison created, %d rounds)",
			holder.name, rec.Epoch, zoneName, rep.Cut, rep.AlreadyFenced, rep.Late, rep.Repaired, rep.Poisoned, rep.Rounds)
	case errors.As(ferr, &ue):
		require.ErrorIs(t, ferr, fence.ErrUndecided)
		require.Contains(t, ue.Waiting, zoneName, "the undecided slot waits for the zone that is down")
		t.Logf("2: the test's fence of %s/%d is undecided with %s down: slot %d, waiting for %v", holder.name, rec.Epoch, zoneName, ue.Slot, ue.Waiting)
	default:
		require.NoError(t, ferr, "the test's fence of %s/%d with %s down: a cut or fence.ErrUndecided", holder.name, rec.Epoch, zoneName)
	}
	ph.end("takeover with " + zoneName + " down")

	// 3. Zone-c comes back: the takeover completes, appends go on.
	zone.Restart()
	s := c.failover(ctx, holder, t2, 0)
	t.Logf("3: %s restarted; failover after kill -9 of %s: %v", zoneName, holder.name, s)
	published := chk.record(ctx, holder.name, rec.Epoch)
	require.True(t, published.Fenced(), "%s/%d after its successor was granted: %v", holder.name, rec.Epoch, published)
	require.GreaterOrEqual(t, published.Cut, c.led.acksIn(holder.name, rec.Epoch), "the published cut of %s/%d is below an acknowledged slot", holder.name, rec.Epoch)
	if ferr == nil {
		require.Equal(t, rep.Cut, published.Cut, "the test's fence and the published cut of %s/%d", holder.name, rec.Epoch)
	}
	t.Logf("3: %s/%d is %s with its cut at %d", holder.name, rec.Epoch, published.State, published.Cut)
	for _, b := range c.others(holder.name) {
		for _, line := range logLines(b.out, fmt.Sprintf(`msg="epoch fenced" node=%s star=%s epoch=%d `, b.name, holder.name, rec.Epoch)) {
			t.Logf("3: %s logged: %s", b.name, line)
		}
	}
	// The appends sent right before the kill and not acknowledged by it
	// are retried at the successor, as a producer would, with the same
	// sequence.
	for _, k := range unacked {
		_, err := c.deliver(ctx, nil, s.successor.name, k)
		require.NoError(t, err)
		e := c.led.get(k)
		t.Logf("3: %s/%d, in flight at the kill: acknowledged by %s at offset %d (epoch %d, slot %d, duplicate %v)", k.producer, k.seq, e.broker, e.offset, e.epoch, e.slot, e.dup)
	}
	c.waitAcks(ctx, keepGoing, "after "+zoneName+" restarted")
	holder.start()
	c.waitServing(ctx, holder)
	ph.end(zoneName + " restarted")

	// 4. Etcd stops and restarts.
	member := c.etcd.Members()[0]
	during := c.etcdOutage(ctx, member)
	t.Logf("4: etcd was down; %d acknowledgements came during the outage", during)
	c.waitAcks(ctx, keepGoing, "after etcd restarted")
	ph.end("etcd restarted")

	// 5. The holder is stopped during its takeover, then continued.
	zombie := c.waitHolder(ctx, c.brokers)
	c.waitLinks(ctx, zombie, c.others(zombie.name))
	inflightKey := key{"orders", "faults-inflight", 0}
	inflight := c.sendTo(ctx, zombie, inflightKey, untilWritten)
	t5 := time.Now()
	zombie.signal(syscall.SIGSTOP)
	zrec := chk.latest(ctx, zombie.name)
	s = c.failover(ctx, zombie, t5, 1)
	t.Logf("5: failover after SIGSTOP of %s (its epoch %d): %v", zombie.name, zrec.Epoch, s)
	next := s.successor
	queued := c.sendTo(ctx, zombie, key{"orders", "faults-zombie", 0}, untilConnected)
	zombie.signal(syscall.SIGCONT)
	cont := time.Now()
	sent := c.sendTo(ctx, zombie, key{"orders", "faults-zombie", 1}, untilSent)
	for i, ch := range []<-chan answer{queued, sent} {
		a := <-ch
		t.Logf("5: the continued %s answered the produce %s SIGCONT: %v", zombie.name, []string{"queued before", "sent after"}[i], a)
		require.False(t, a.Err == nil && a.Code == http.StatusOK, "the stopped writer acknowledged an append after its successor's takeover: %v", a)
	}
	if a := <-inflight; a.Err == nil && a.Code == http.StatusOK {
		c.led.ack(inflightKey, a.Ack, zombie.name, t5)
		t.Logf("5: the append in flight at SIGSTOP was acknowledged by %s: %v", zombie.name, a)
	} else {
		by, err := c.deliver(ctx, nil, next.name, inflightKey)
		require.NoError(t, err)
		t.Logf("5: the append in flight at SIGSTOP (%v), retried: acknowledged by %s at offset %d", a, by, c.led.offset(inflightKey))
	}
	c.waitAcks(ctx, keepGoing, "after "+zombie.name+" continued")
	ph.end("writer stopped and continued")

	require.NoError(t, ps.finish())
	ph.end("until the producers stopped")
	if len(ps.unexpected) > 0 {
		t.Logf("answers other than 200 and 503 the producers retried: %v", ps.unexpected)
	}

	// Every acknowledged record read back exactly once, in order.
	final := c.waitHolder(ctx, c.brokers)
	c.verify(ctx, streams, final, zombie)

	// The six guarantees, from storage.
	hist, positions := chk.history(ctx, c)
	vs := cutlinetest.Check(ctx, cutlinetest.Run{History: hist, Store: chk.store, Zones: chk.buckets, Locate: brokerLocate})
	checked := 0
	for _, b := range c.brokers {
		for r, err := range chk.minter.Epochs(ctx, b.name) {
			require.NoError(t, err, "the epochs of %s", b.name)
			if !r.Fenced() {
				continue
			}
			vs = append(vs, chk.env.CheckEpoch(b.name, r.Epoch, positions[b.name][r.Epoch])...)
			checked++
		}
	}
	// The stopped writer: nothing it acknowledged lies at or past its
	// epoch's cut, whenever the acknowledgement came.
	zfenced := chk.record(ctx, zombie.name, zrec.Epoch)
	require.True(t, zfenced.Fenced(), "%s/%d after its successor's takeover: %v", zombie.name, zrec.Epoch, zfenced)
	late := 0
	for _, sl := range positions[zombie.name][zrec.Epoch] {
		if sl >= zfenced.Cut {
			vs = append(vs, cutlinetest.Violation{Guarantee: 2, Msg: fmt.Sprintf("%s acknowledged slot %d of its epoch %d, at or past the cut %d", zombie.name, sl, zrec.Epoch, zfenced.Cut)})
		}
	}
	for _, e := range c.led.entries() {
		if e.broker == zombie.name && !e.dup && e.at.After(cont) {
			late++
		}
	}
	for _, p := range append([]*proc{c.ctl}, brokerProcs(c)...) {
		require.NoError(t, raceReports(p.out), "%s", p.name)
	}
	auth := chk.authority(ctx)
	t.Logf("summary: acknowledged %d records; per phase: %s; takeovers: %d grants in all (token %d, controller term %d), the faulted ones kill -9 of %s with %s down and SIGSTOP of %s; %d fenced epochs checked (the stopped writer's %s/%d cut at %d, %d of its acknowledgements came after SIGCONT); %d violations",
		c.led.total(), ph, auth.Token, auth.Token, auth.Term, holder.name, zoneName, zombie.name, checked, zombie.name, zrec.Epoch, zfenced.Cut, late, len(vs))
	cutlinetest.Require(t, vs)
}

// waitAcks waits until n more records are acknowledged.
func (c *cluster) waitAcks(ctx context.Context, n int, when string) {
	c.t.Helper()
	from := c.led.total()
	poll(ctx, c.t, 60*time.Second, fmt.Sprintf("%d acknowledgements %s", n, when), func(context.Context) bool { return c.led.total() >= from+n })
}

// etcdOutage stops the etcd member until outageAcks acknowledgements
// came or etcdOutage passed, restarts it, and returns the
// acknowledgements of the outage.
func (c *cluster) etcdOutage(ctx context.Context, m *etcdtest.Member) int {
	c.t.Helper()
	from := c.led.total()
	m.Stop()
	limit := time.NewTimer(etcdOutage)
	defer limit.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for c.led.total() < from+outageAcks {
		select {
		case <-ctx.Done():
			m.Restart(c.t)
			c.t.Fatalf("the test ended during the etcd outage: %v", ctx.Err())
		case <-limit.C:
			m.Restart(c.t)
			return c.led.total() - from
		case <-tick.C:
		}
	}
	m.Restart(c.t)
	return c.led.total() - from
}

// logLines returns the lines of a process's output that contain sub.
func logLines(file, sub string) []string {
	raw, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for line := range strings.Lines(string(raw)) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// phases counts the acknowledgements of each phase of a run.
type phases struct {
	led   *ledger
	names []string
	acks  []int
	last  int
}

func (p *phases) end(name string) {
	n := p.led.total()
	p.names, p.acks, p.last = append(p.names, name), append(p.acks, n-p.last), n
}

func (p *phases) String() string {
	parts := make([]string, len(p.names))
	for i := range p.names {
		parts[i] = fmt.Sprintf("%s %d", p.names[i], p.acks[i])
	}
	return strings.Join(parts, ", ")
}

// acksIn returns one past the highest slot of star's epoch ep that
// broker star acknowledged itself (0 for none).
func (l *ledger) acksIn(star string, ep uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var top uint64
	for _, e := range l.acks {
		if e.broker == star && !e.dup && e.epoch == ep {
			top = max(top, e.slot+1)
		}
	}
	return top
}

// get returns the acknowledgement of the record k names.
func (l *ledger) get(k key) entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks[k]
}

// keyed is one acknowledgement with the record it names.
type keyed struct {
	key
	entry
}

// entries returns every acknowledgement, in the order they came.
func (l *ledger) entries() []keyed {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]keyed, 0, len(l.acks))
	for k, e := range l.acks {
		out = append(out, keyed{k, e})
	}
	slices.SortFunc(out, func(a, b keyed) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.stream, b.stream), cmp.Compare(a.producer, b.producer), cmp.Compare(a.seq, b.seq))
	})
	return out
}

// checker reads the cluster's storage directly, as no broker does: the
// etcd store under the brokers' root and the zones' buckets on clients
// of its own (a zone whose process is down answers at once, with no SDK
// retries), and fences with an identity of its own.
type checker struct {
	t       testing.TB
	store   metastore.Store
	buckets []objstore.Bucket
	minter  *epoch.Minter
	fencer  *fence.Fencer
	refs    *settle.RefIndex
	env     *cutlinetest.Env
}

func newChecker(t testing.TB, c *cluster) *checker {
	t.Helper()
	cli := etcdtest.NewClient(t, c.etcd.Endpoints()...)
	st, err := etcdstore.New(cli, etcdstore.Options{Root: c.root, RequestTimeout: 2 * time.Second})
	require.NoError(t, err)
	ck := &checker{t: t, store: st}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i, srv := range c.zones.Servers {
		b, err := s3.New(srv.NewClient(hc, func(o *awss3.Options) { o.RetryMaxAttempts = 1 }), srv.Bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: stacktest.ZoneName(i)}})
		require.NoError(t, err)
		ck.buckets = append(ck.buckets, b)
	}
	ck.minter, err = epoch.NewMinter(st, epoch.Options{Identity: "faults-checker"})
	require.NoError(t, err)
	ck.fencer, err = fence.New(ck.minter, chain.MustZones(ck.buckets...), fence.Options{
		Identity: "faults-fencer", Backoff: clock.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}})
	require.NoError(t, err)
	ck.refs, err = settle.NewRefIndex(st, "", brokerLocate)
	require.NoError(t, err)
	ck.env = cutlinetest.New(t, st, ck.buckets, cutlinetest.Options{Prefix: brokerPrefix, Locate: brokerLocate})
	return ck
}

// record reads star's epoch ep, retrying while the store does not answer.
func (ck *checker) record(ctx context.Context, star string, ep uint64) *epoch.Record {
	ck.t.Helper()
	var rec *epoch.Record
	var last error
	poll(ctx, ck.t, 30*time.Second, fmt.Sprintf("the record of %s/%d reads", star, ep), func(ctx context.Context) bool {
		rec, last = ck.minter.Get(ctx, star, ep)
		return last == nil
	})
	return rec
}

// latest returns star's newest epoch.
func (ck *checker) latest(ctx context.Context, star string) *epoch.Record {
	ck.t.Helper()
	var top *epoch.Record
	for rec, err := range ck.minter.Epochs(ctx, star) {
		require.NoError(ck.t, err, "the epochs of %s", star)
		if top == nil || rec.Epoch > top.Epoch {
			top = rec
		}
	}
	require.NotNil(ck.t, top, "%s has minted no epoch", star)
	return top
}

// awaitFenceOrUndecided waits until the killed broker's epoch ep is
// fenced, with a cut at or above top (one past its highest acknowledged
// slot), or a surviving broker's fencer reports an undecided slot. It
// says which.
func (ck *checker) awaitFenceOrUndecided(ctx context.Context, c *cluster, killed *broker, ep, top uint64) string {
	ck.t.Helper()
	var saw string
	poll(ctx, ck.t, 30*time.Second, fmt.Sprintf("a survivor fences %s/%d or reports it undecided", killed.name, ep), func(ctx context.Context) bool {
		if rec, err := ck.minter.Get(ctx, killed.name, ep); err == nil && rec.Fenced() {
			require.GreaterOrEqual(ck.t, rec.Cut, top, "the published cut of %s/%d is below an acknowledged slot", killed.name, ep)
			saw = fmt.Sprintf("the cut %d is published (by %s's successor)", rec.Cut, killed.name)
			return true
		}
		for _, b := range c.others(killed.name) {
			if age := c.metric(ctx, b, "cutline_broker_undecided_slot_age_seconds"); age > 0 {
				saw = fmt.Sprintf("%s's fencer waits on an undecided slot (%.1fs old); nothing published", b.name, age)
				return true
			}
		}
		return false
	})
	return saw
}

// authority reads the broker cluster's authority state (the domain
// "brokers", the broker's default): its token counts the grants, its term
// the controller's elections.
func (ck *checker) authority(ctx context.Context) authority.StateRecord {
	ck.t.Helper()
	var st authority.StateRecord
	var err error
	poll(ctx, ck.t, 30*time.Second, "the authority state reads", func(ctx context.Context) bool {
		st, err = authority.Read(ctx, ck.store, "", "brokers")
		return err == nil
	})
	return st
}

// history makes a cutlinetest.History of the producers' acknowledgements:
// each record submitted with the payload the broker writes for it (its
// stream, offset, producer, sequence and data) and acknowledged at the
// epoch and slot its acknowledgement gave, in the star of the broker
// that gave it. The answer to a retry of a record the stream held
// already names the slot of the first append, which another broker's
// star may hold: its star is the one the stream's index names there, at
// that very epoch and slot. It also returns the slots acknowledged per
// star and epoch.
func (ck *checker) history(ctx context.Context, c *cluster) (*cutlinetest.History, map[string]map[uint64][]uint64) {
	ck.t.Helper()
	hist := &cutlinetest.History{}
	slots := map[string]map[uint64][]uint64{}
	for _, e := range c.led.entries() {
		star := e.broker
		if e.dup {
			ref, err := ck.refs.Lookup(ctx, e.stream, e.offset)
			require.NoError(ck.t, err, "the index at %s/%d, acknowledged by %s as a duplicate", e.stream, e.offset, e.broker)
			require.Equal(ck.t, [2]uint64{e.epoch, e.slot}, [2]uint64{ref.Epoch, ref.Slot},
				"%v: the duplicate's acknowledgement and the index (%s) name different slots", e.key, ref.Star)
			star = ref.Star
		}
		id := fmt.Sprintf("%s/%s/%d", e.stream, e.producer, e.seq)
		payload := brokerRecord(e.stream, e.offset, e.producer, e.seq, fmt.Appendf(nil, "%s/%d", e.producer, e.seq))
		of := hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Host: e.broker, Star: star, ID: id, Payload: payload})
		hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Host: e.broker, Star: star, ID: id, Of: of, Pos: chain.Position{Epoch: e.epoch, Slot: e.slot}})
		if slots[star] == nil {
			slots[star] = map[uint64][]uint64{}
		}
		slots[star][e.epoch] = append(slots[star][e.epoch], e.slot)
	}
	return hist, slots
}

// The broker's record format (examples/broker/node, format.go), which the
// test writes on its own to know the exact bytes of every acknowledged
// flight: the magic "cbr1", the stream (uvarint length, bytes), the
// offset (8 bytes big endian), the producer (uvarint length, bytes), the
// sequence (8 bytes big endian), the data.
const brokerMagic = "cbr1"

// errNotBrokerRecord is a payload that is not in the broker's format.
var errNotBrokerRecord = errors.New("not a broker record")

func brokerRecord(stream string, offset uint64, producer string, seq uint64, data []byte) []byte {
	b := []byte(brokerMagic)
	b = binary.AppendUvarint(b, uint64(len(stream)))
	b = append(b, stream...)
	b = binary.BigEndian.AppendUint64(b, offset)
	b = binary.AppendUvarint(b, uint64(len(producer)))
	b = append(b, producer...)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, data...)
}

// brokerLocate is the broker's settle.Locator: one record of one stream
// per flight, spanning the whole payload.
func brokerLocate(p []byte) ([]settle.Span, error) {
	rest, ok := bytes.CutPrefix(p, []byte(brokerMagic))
	if !ok {
		return nil, fmt.Errorf("%w: no magic", errNotBrokerRecord)
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)-k) || uint64(len(rest)-k)-n < 8 {
		return nil, fmt.Errorf("%w: bad stream", errNotBrokerRecord)
	}
	stream := string(rest[k : k+int(n)])
	offset := binary.BigEndian.Uint64(rest[k+int(n):])
	return []settle.Span{{Stream: stream, Offset: offset, Count: 1, End: uint64(len(p))}}, nil
}
