//go:build unix

package brokerproc_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/integration/stacktest"
)

// The cluster's shape and timings. The brokers' heartbeat (1 s) and
// session TTL (5 s) are the broker's defaults; the controller's lease is
// twice its default, so that a holder stopped for as long as its
// successor takes to be granted and to acknowledge still believes its
// grant valid when it continues: a zombie that only its successor's
// revocation, its own session's loss and the epoch fence stop.
const (
	brokersN       = 3
	lease          = 20 * time.Second
	zonesK         = 3
	objectLatency  = 20 * time.Millisecond
	producePace    = 200 * time.Millisecond // between a producer's records
	produceTimeout = 5 * time.Second        // one produce attempt
	lookupTimeout  = time.Second            // one GET /v1/streams of a producer looking for the holder
	retryEvery     = 50 * time.Millisecond  // between a producer's attempts
)

// broker is one broker process and the base URL of its API.
type broker struct {
	*proc
	base string
}

// cluster is the controller and the brokers as processes, on an embedded
// etcd and versitygw zones, and the test's client of their API.
type cluster struct {
	t       testing.TB
	api     *api
	ca      *pki
	ctl     *proc
	brokers []*broker
	led     *ledger
	// etcd, zones and root (the -etcd-root of every process) are the
	// backends, for a test that stops them or reads them directly.
	etcd  *etcdtest.Cluster
	zones stacktest.Zones
	root  string
}

// startCluster starts etcd, the zones, the controller and the brokers,
// and waits until every broker serves its API.
func startCluster(ctx context.Context, t testing.TB, bin string) *cluster {
	t.Helper()
	etcd := etcdtest.StartCluster(t, 1)
	zones := stacktest.StartZones(t, zonesK, "brokerproc-")
	ca := newPKI(t)
	tokenFile, token := ca.tokenFile()
	c := &cluster{t: t, ca: ca, api: newAPI(t, ca.pool, ca.client("producer"), token), led: newLedger(),
		etcd: etcd, zones: zones, root: "/brokerproc-" + stacktest.RandomID() + "/"}
	logs := t.TempDir()
	env := processEnv("CUTLINE_S3_SECRET_KEY=" + zones.Secret)
	common := []string{"-etcd", etcd.Endpoints()[0], "-etcd-root", c.root}

	ctlAddr := freeAddr(t)
	c.ctl = newProc(t, logs, "ctl", bin, processEnv(), append(append([]string{"-role", "controller", "-node", "ctl", "-controller-listen", ctlAddr, "-lease", lease.String()}, common...), ca.controller("ctl")...)...)
	c.ctl.start()
	c.ctl.waitReady(ctx, "listening on "+ctlAddr, func(ctx context.Context) bool { return listening(ctx, ctlAddr) })

	var peers []string
	for i := range brokersN {
		name := fmt.Sprintf("broker-%d", i+1)
		c.brokers = append(c.brokers, &broker{base: "https://" + freeAddr(t), proc: &proc{name: name}})
		peers = append(peers, name+"="+c.brokers[i].base)
	}
	for i, b := range c.brokers {
		args := append([]string{
			"-role", "broker", "-node", b.name, "-listen", strings.TrimPrefix(b.base, "https://"),
			"-controller", "https://" + ctlAddr, "-controller-identity", "ctl", "-auth-token-file", tokenFile,
			"-s3-endpoint", zones.Endpoints(), "-s3-buckets", zones.Buckets(), "-s3-access-key", zones.AccessKey,
			"-peers", strings.Join(peers, ","), "-latency", objectLatency.String(),
		}, common...)
		c.brokers[i].proc = newProc(t, logs, b.name, bin, env, append(args, ca.node(b.name)...)...)
		c.brokers[i].start()
	}
	for _, b := range c.brokers {
		c.waitServing(ctx, b)
	}
	return c
}

// waitServing waits until the broker answers GET /metrics.
func (c *cluster) waitServing(ctx context.Context, b *broker) {
	c.t.Helper()
	b.waitReady(ctx, "serving its API at "+b.base, func(ctx context.Context) bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := c.api.metrics(rctx, b.base)
		return err == nil
	})
}

// broker returns the broker named name.
func (c *cluster) broker(name string) *broker {
	c.t.Helper()
	b := c.find(name)
	if b == nil {
		c.t.Fatalf("no broker %q", name)
	}
	return b
}

// find returns the broker named name, nil when there is none.
func (c *cluster) find(name string) *broker {
	for _, b := range c.brokers {
		if b.name == name {
			return b
		}
	}
	return nil
}

// others returns the brokers but the one named name.
func (c *cluster) others(name string) []*broker {
	var out []*broker
	for _, b := range c.brokers {
		if b.name != name {
			out = append(out, b)
		}
	}
	return out
}

// poll calls cond every pollEvery until it is true, failing the test
// when ctx ends or limit passes first.
func poll(ctx context.Context, t testing.TB, limit time.Duration, what string, cond func(context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if cond(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v", what, limit)
		case <-tick.C:
		}
	}
}

// holderOf asks the brokers in turn who holds the grant, and returns the
// first answer naming one.
func (c *cluster) holderOf(ctx context.Context, brokers []*broker) string {
	for _, b := range brokers {
		rctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		h, err := c.api.holder(rctx, b.base)
		cancel()
		if err == nil && h != "" {
			return h
		}
	}
	return ""
}

// waitHolder waits until a broker holds the grant and returns it.
func (c *cluster) waitHolder(ctx context.Context, brokers []*broker) *broker {
	c.t.Helper()
	var h string
	poll(ctx, c.t, 30*time.Second, "a broker holds the grant", func(ctx context.Context) bool {
		h = c.holderOf(ctx, brokers)
		return h != ""
	})
	return c.broker(h)
}

// metric reads one sum of samples of a broker's metrics (-1 when the
// page cannot be read).
func (c *cluster) metric(ctx context.Context, b *broker, name string, labels ...string) float64 {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	page, err := c.api.metrics(rctx, b.base)
	if err != nil {
		return -1
	}
	return metricSum(page, name, labels...)
}

// waitLinks waits until the direct health links of holder's grant are up
// on both ends: the holder's to every other live broker, and each of
// theirs to the holder. A voter reports a concern only on a link that
// completed a round trip, so the fast fence needs them.
func (c *cluster) waitLinks(ctx context.Context, holder *broker, live []*broker) {
	c.t.Helper()
	poll(ctx, c.t, 30*time.Second, "the health links of "+holder.name, func(ctx context.Context) bool {
		if c.metric(ctx, holder, "cutline_broker_health_links_up") != float64(len(live)) {
			return false
		}
		for _, b := range live {
			if c.metric(ctx, b, "cutline_broker_health_links_up") != 1 {
				return false
			}
		}
		return true
	})
}

// key names a producer's record in a stream.
type key struct {
	stream, producer string
	seq              uint64
}

// entry is where and when a record was acknowledged, and by which broker:
// its offset, and the epoch and slot of its flight as the acknowledgement
// gave them (dup: the answer to a retry of a record the stream held
// already, whose flight another broker's star may have written).
type entry struct {
	offset      uint64
	epoch, slot uint64
	dup         bool
	at          time.Time
	broker      string
}

// ledger is every acknowledgement the producers got.
type ledger struct {
	mu   sync.Mutex
	acks map[key]entry
	errs []error
}

func newLedger() *ledger { return &ledger{acks: map[key]entry{}} }

// ack records an acknowledgement; a second one of the same record must
// give the same offset.
func (l *ledger) ack(k key, a ackBody, broker string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.acks[k]; ok {
		if e.offset != a.Offset {
			l.errs = append(l.errs, fmt.Errorf("%v acknowledged at offset %d by %s, then at %d by %s", k, e.offset, e.broker, a.Offset, broker))
		}
		return
	}
	l.acks[k] = entry{offset: a.Offset, epoch: a.Epoch, slot: a.Slot, dup: a.Duplicate, at: at, broker: broker}
}

// since counts the acknowledgements broker gave after t, and returns the
// first one's time.
func (l *ledger) since(broker string, t time.Time) (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, first := 0, time.Time{}
	for _, e := range l.acks {
		if e.broker == broker && e.at.After(t) {
			n++
			if first.IsZero() || e.at.Before(first) {
				first = e.at
			}
		}
	}
	return n, first
}

// offset is where the record k names was acknowledged.
func (l *ledger) offset(k key) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks[k].offset
}

func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// producers are the load: producers with ids and sequences, each sending
// its records one at a time and retrying each until it is acknowledged.
type producers struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
	// unexpected counts answers that were neither 200 nor 503.
	unexpected map[string]int
}

// startProducers starts nPer producers on each stream. They stop between
// two records when stop is called; hard ends them at once (an error).
func (c *cluster) startProducers(hard context.Context, streams []string, nPer int) *producers {
	soft, stop := context.WithCancel(hard)
	ps := &producers{stop: stop, unexpected: map[string]int{}}
	for _, stream := range streams {
		for i := range nPer {
			id := fmt.Sprintf("p-%s-%d", stream, i)
			ps.wg.Go(func() {
				if err := c.produceLoop(soft, hard, ps, stream, id); err != nil {
					ps.mu.Lock()
					ps.errs = append(ps.errs, err)
					ps.mu.Unlock()
				}
			})
		}
	}
	c.t.Cleanup(func() { ps.stop(); ps.wg.Wait() })
	return ps
}

// finish stops the producers and returns what went wrong.
func (ps *producers) finish() error {
	ps.stop()
	ps.wg.Wait()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return errors.Join(ps.errs...)
}

// produceLoop is one producer: record after record, each delivered
// before the next.
func (c *cluster) produceLoop(soft, hard context.Context, ps *producers, stream, producer string) error {
	pace := time.NewTicker(producePace)
	defer pace.Stop()
	target := c.brokers[0].name
	for seq := uint64(0); ; seq++ {
		select {
		case <-soft.Done():
			return nil
		case <-pace.C:
		}
		var err error
		if target, err = c.deliver(hard, ps, target, key{stream, producer, seq}); err != nil {
			return err
		}
	}
}

// deliver sends the record k names (its data "producer/seq") until it is
// acknowledged, retrying with the same sequence: at the holder a 503
// names, or, when nobody answers, at the holder the brokers say. It
// records the acknowledgement and returns the broker that gave it.
// Answers that are neither 200 nor 503 are counted in ps (when not nil).
func (c *cluster) deliver(ctx context.Context, ps *producers, target string, k key) (string, error) {
	retry := time.NewTicker(retryEvery)
	defer retry.Stop()
	data := fmt.Appendf(nil, "%s/%d", k.producer, k.seq)
	for {
		b := c.find(target)
		if b == nil {
			return target, fmt.Errorf("%s: the holder named is %q, not a broker", k.producer, target)
		}
		actx, cancel := context.WithTimeout(ctx, produceTimeout)
		a := c.api.produce(actx, nil, b.base, k.stream, k.producer, k.seq, data)
		cancel()
		if a.Err == nil && a.Code == http.StatusOK {
			c.led.ack(k, a.Ack, target, time.Now())
			return target, nil
		}
		if ctx.Err() != nil {
			return target, fmt.Errorf("%v never acknowledged; last answer from %s: %v", k, target, a)
		}
		switch {
		case a.Code == http.StatusServiceUnavailable && a.Body.Holder != "" && a.Body.Holder != target:
			target = a.Body.Holder
			continue
		case a.Code/100 == 4:
			return target, fmt.Errorf("%v refused by %s: %v", k, target, a)
		case a.Code == http.StatusServiceUnavailable && a.Body.Holder == target:
			// The holder cannot take it yet (its star is starting, the
			// stream's open is deferred): again, at the same one.
		default:
			// No answer, a 503 naming nobody, or a failure: ask who holds
			// the grant.
			if a.Err == nil && a.Code != http.StatusServiceUnavailable && ps != nil {
				ps.mu.Lock()
				ps.unexpected[fmt.Sprintf("%s: %d %s", target, a.Code, a.Body.Error)]++
				ps.mu.Unlock()
			}
			if h := c.holderOf(ctx, c.after(target)); h != "" {
				target = h
			}
		}
		select {
		case <-ctx.Done():
			return target, fmt.Errorf("%v never acknowledged; last answer from %s: %v", k, target, a)
		case <-retry.C:
		}
	}
}

// after returns the brokers in turn, starting after the one named name:
// a producer whose broker did not answer asks the others first.
func (c *cluster) after(name string) []*broker {
	for i, b := range c.brokers {
		if b.name == name {
			return append(append([]*broker(nil), c.brokers[i+1:]...), c.brokers[:i+1]...)
		}
	}
	return c.brokers
}

// split is one failover, timed from the fault: the grant ended (the
// survivors stop naming the failed holder), the successor was granted
// (they name it), and the successor acknowledged its first append.
type split struct {
	successor                *broker
	ended, granted, firstAck time.Duration
	probe                    answer
	probeAt                  time.Duration
}

// failover watches the survivors after holder failed at t0: it polls who
// holds the grant until a successor is named, then produces a probe
// record at it (failover-probe's record seq) until acknowledged, and
// returns the timings. The producers' acknowledgements at the successor
// count too: the first acknowledgement is whichever came first.
func (c *cluster) failover(ctx context.Context, failed *broker, t0 time.Time, seq uint64) split {
	c.t.Helper()
	var s split
	survivors := c.others(failed.name)
	poll(ctx, c.t, 60*time.Second, "a successor of "+failed.name+" is granted", func(ctx context.Context) bool {
		h := c.holderOf(ctx, survivors)
		if h != failed.name && s.ended == 0 {
			s.ended = time.Since(t0)
		}
		if h == "" || h == failed.name {
			return false
		}
		s.granted, s.successor = time.Since(t0), c.broker(h)
		return true
	})
	k := key{"orders", "failover-probe", seq}
	poll(ctx, c.t, 60*time.Second, s.successor.name+" acknowledges an append", func(ctx context.Context) bool {
		pctx, cancel := context.WithTimeout(ctx, produceTimeout)
		defer cancel()
		s.probe = c.api.produce(pctx, nil, s.successor.base, k.stream, k.producer, k.seq, fmt.Appendf(nil, "%s/%d", k.producer, k.seq))
		if s.probe.Err != nil || s.probe.Code != http.StatusOK {
			return false
		}
		now := time.Now()
		c.led.ack(k, s.probe.Ack, s.successor.name, now)
		s.probeAt = now.Sub(t0)
		return true
	})
	_, first := c.led.since(s.successor.name, t0)
	s.firstAck = first.Sub(t0)
	return s
}

func (s split) String() string {
	return fmt.Sprintf("grant ended +%v, successor %s granted +%v, first acknowledged append at %s +%v (the probe's +%v)",
		s.ended.Round(time.Millisecond), s.successor.name, s.granted.Round(time.Millisecond), s.successor.name,
		s.firstAck.Round(time.Millisecond), s.probeAt.Round(time.Millisecond))
}

// verify reads every stream back through each of the brokers in turn
// (the first should be the holder, which covers what it acknowledged
// before it reads) and requires every acknowledged record exactly once,
// at the offset of its acknowledgement, and nothing else but for
// acknowledged records. It returns the records read per stream.
func (c *cluster) verify(ctx context.Context, streams []string, through ...*broker) map[string][]record {
	c.t.Helper()
	got := map[string][]record{}
	for i, b := range through {
		for _, stream := range streams {
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			recs, err := c.api.readAll(rctx, b.base, stream)
			cancel()
			require.NoError(c.t, err, "read %s through %s", stream, b.name)
			if i == 0 {
				got[stream] = recs
				continue
			}
			require.Equal(c.t, got[stream], recs, "%s read through %s and %s", stream, through[0].name, b.name)
		}
	}
	c.led.mu.Lock()
	defer c.led.mu.Unlock()
	require.Empty(c.t, c.led.errs)
	lost, dup := 0, 0
	found := map[key]uint64{}
	for _, stream := range streams {
		for i, r := range got[stream] {
			require.Equal(c.t, uint64(i), r.Offset, "%s: offsets run from 0 without holes", stream)
			producer, seqText, ok := strings.Cut(string(r.Data), "/")
			require.True(c.t, ok, "%s/%d holds %q", stream, i, r.Data)
			var seq uint64
			_, err := fmt.Sscan(seqText, &seq)
			require.NoError(c.t, err, "%s/%d holds %q", stream, i, r.Data)
			k := key{stream, producer, seq}
			if _, seen := found[k]; seen {
				dup++
				c.t.Errorf("%v appears at offsets %d and %d", k, found[k], r.Offset)
				continue
			}
			found[k] = r.Offset
			e, acked := c.led.acks[k]
			require.True(c.t, acked, "%s/%d holds %q, which nobody acknowledged", stream, i, r.Data)
			require.Equal(c.t, e.offset, r.Offset, "%v: acknowledged by %s at offset %d", k, e.broker, e.offset)
		}
	}
	for k := range c.led.acks {
		if _, ok := found[k]; !ok {
			lost++
			c.t.Errorf("%v was acknowledged by %s at offset %d and is not in the stream", k, c.led.acks[k].broker, c.led.acks[k].offset)
		}
	}
	c.t.Logf("acknowledged %d, readable %d, lost %d, duplicated %d", len(c.led.acks), len(found), lost, dup)
	require.Zero(c.t, lost, "lost")
	require.Zero(c.t, dup, "duplicated")
	return got
}
