//go:build unix

package brokerproc_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/stacktest"
)

// testTimeout bounds the test once the broker is built.
const testTimeout = 150 * time.Second

var streams = []string{"orders", "payments"}

// TestBrokerFailover: three broker processes that vote and run direct
// health links, a controller process, etcd and three S3 zones; producers
// in the test; the holder killed (kill -9), then its successor stopped
// (SIGSTOP) and continued as a zombie. Every acknowledged record is in
// its stream exactly once at the end, the zombie acknowledges nothing,
// and the failover times are logged.
func TestBrokerFailover(t *testing.T) {
	bin := stacktest.BuildBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := startCluster(ctx, t, bin)
	build := "without the race detector"
	if stacktest.Race {
		build = "with the race detector"
	}
	t.Logf("cluster: controller and %d brokers as processes (built %s), etcd, %d versitygw zones with %v injected before every zone request; lease %v, heartbeat 1s, session TTL 5s",
		brokersN, build, zonesK, objectLatency, lease)

	holder := c.waitHolder(ctx, c.brokers)
	c.waitLinks(ctx, holder, c.others(holder.name))
	t.Logf("%s holds the grant; every health link is up", holder.name)

	// A client certificate that names no node cannot ping.
	code, _, _, err := c.api.do(ctx, c.api.hc, http.MethodPost, holder.base+"/v1/health?token=1", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, code, "a ping needs a node certificate")

	ps := c.startProducers(ctx, streams, 2)
	poll(ctx, t, 30*time.Second, "40 acknowledgements before the first fault", func(context.Context) bool { return c.led.total() >= 40 })

	// Scenario A: kill -9 the holder.
	before := c.led.total()
	t0 := time.Now()
	holder.kill()
	s := c.failover(ctx, holder, t0, 0)
	t.Logf("A: failover after kill -9 of %s (%d records acknowledged before, %v object latency): %v", holder.name, before, objectLatency, s)
	require.NotEqual(t, holder.name, s.successor.name)
	successor := s.successor
	poll(ctx, t, 30*time.Second, "the producers continue at "+successor.name, func(context.Context) bool {
		n, _ := c.led.since(successor.name, t0)
		return n >= 10
	})
	// The killed broker starts again, a voter holding nothing.
	holder.start()
	c.waitServing(ctx, holder)
	c.waitLinks(ctx, successor, c.others(successor.name))
	t.Logf("A: %s started again; every health link of %s's grant is up", holder.name, successor.name)

	// Scenario B: SIGSTOP the holder, with an append of the test in
	// flight at it: a zombie whose control channel stays open.
	zombie := successor
	metricsBefore := map[string]string{}
	for _, b := range c.others(zombie.name) {
		page, err := c.api.metrics(ctx, b.base)
		require.NoError(t, err)
		metricsBefore[b.name] = page
	}
	before = c.led.total()
	inflightKey := key{"orders", "zombie-inflight", 0}
	inflight := c.sendTo(ctx, zombie, inflightKey, untilWritten)
	t0 = time.Now()
	zombie.signal(syscall.SIGSTOP)
	s = c.failover(ctx, zombie, t0, 1)
	t.Logf("B: failover after SIGSTOP of %s (%d records acknowledged before, %v object latency): %v", zombie.name, before, objectLatency, s)
	next := s.successor
	poll(ctx, t, 30*time.Second, "the producers continue at "+next.name, func(context.Context) bool {
		n, _ := c.led.since(next.name, t0)
		return n >= 10
	})

	// The zombie continues: a produce queued while it was stopped and one
	// sent right after are not acknowledged.
	queued := c.sendTo(ctx, zombie, key{"orders", "zombie-probe", 0}, untilConnected)
	zombie.signal(syscall.SIGCONT)
	sent := c.sendTo(ctx, zombie, key{"orders", "zombie-probe", 1}, untilSent)
	for i, ch := range []<-chan answer{queued, sent} {
		a := <-ch
		t.Logf("B: the zombie %s answered the produce %s SIGCONT: %v", zombie.name, []string{"queued before", "sent after"}[i], a)
		require.False(t, a.Err == nil && a.Code == http.StatusOK, "the zombie acknowledged an append: %v", a)
	}
	// The append in flight when it stopped: acknowledged before the stop
	// (then the stream holds it at that offset), or not acknowledged,
	// with an outcome unknown to the client, who retries it with the same
	// sequence at the holder, as any producer does.
	a := <-inflight
	t.Logf("B: the zombie %s answered the append in flight at SIGSTOP: %v", zombie.name, a)
	if a.Err == nil && a.Code == http.StatusOK {
		c.led.ack(inflightKey, a.Ack, zombie.name, t0)
	} else {
		by, err := c.deliver(ctx, nil, next.name, inflightKey)
		require.NoError(t, err)
		t.Logf("B: the append in flight at SIGSTOP, retried: acknowledged by %s at offset %d", by, c.led.offset(inflightKey))
	}
	zm, err := c.api.metrics(ctx, zombie.base)
	require.NoError(t, err)
	t.Logf("B: the zombie's zone creates since it started: %v ok, %v refused as existing (a slot its successor's fence took), %v failed otherwise; its grant changes: %v gained, %v lost",
		metricSum(zm, "cutline_broker_object_requests_total", `op="create"`, `result="ok"`),
		metricSum(zm, "cutline_broker_object_requests_total", `op="create"`, `result="exists"`),
		metricSum(zm, "cutline_broker_object_requests_total", `op="create"`, `result="error"`)+metricSum(zm, "cutline_broker_object_requests_total", `op="create"`, `result="canceled"`),
		metricSum(zm, "cutline_broker_grant_changes_total", `change="gained"`), metricSum(zm, "cutline_broker_grant_changes_total", `change="lost"`))
	resumed := time.Now()
	poll(ctx, t, 30*time.Second, "the producers go on at "+next.name, func(context.Context) bool {
		n, _ := c.led.since(next.name, resumed)
		return n >= 8
	})

	require.NoError(t, ps.finish())
	if len(ps.unexpected) > 0 {
		t.Logf("answers other than 200 and 503 the producers retried: %v", ps.unexpected)
	}

	// Every stream read back, through the holder and through the zombie
	// (now a live broker holding nothing).
	final := c.waitHolder(ctx, c.brokers)
	if final != next {
		t.Logf("the grant moved on from %s to %s since", next.name, final.name)
	}
	got := c.verify(ctx, streams, final, zombie)
	for _, stream := range streams {
		for _, r := range got[stream] {
			require.NotContains(t, string(r.Data), "zombie-probe", "a write the zombie refused is in %s", stream)
		}
	}

	// The holder's metrics moved across its takeover: it fenced and
	// settled the zombie's epoch (recovery) before its first write, its
	// open gate admitted the streams, it gained the grant and appended.
	after, err := c.api.metrics(ctx, final.base)
	require.NoError(t, err)
	for _, m := range []struct {
		name   string
		labels []string
	}{
		{"cutline_broker_append_seconds_count", nil},
		{"cutline_broker_gate_decisions_total", nil},
		{"cutline_broker_grant_changes_total", []string{`change="gained"`}},
		{"cutline_broker_fence_seconds_count", nil},
		{"cutline_broker_settles_total", []string{`source="recovery"`, `result="settled"`}},
		{"cutline_broker_health_pings_total", []string{`result="ok"`}},
	} {
		b, a := metricSum(metricsBefore[final.name], m.name, m.labels...), metricSum(after, m.name, m.labels...)
		t.Logf("%s %s%v: %v -> %v", final.name, m.name, m.labels, b, a)
		require.Greater(t, a, b, "%s%v did not move", m.name, m.labels)
	}

	// No data race in any process.
	for _, p := range append([]*proc{c.ctl}, brokerProcs(c)...) {
		require.NoError(t, raceReports(p.out), "%s", p.name)
	}
}

func brokerProcs(c *cluster) []*proc {
	var out []*proc
	for _, b := range c.brokers {
		out = append(out, b.proc)
	}
	return out
}

// How far sendTo waits before it returns.
const (
	untilSent      = iota // not at all
	untilConnected        // the connection is established (a stopped process's kernel accepts it)
	untilWritten          // the request is written
)

// sendTo sends the record k names to b on a connection of its own, and
// returns where its answer will come, once the request got as far as
// until says.
func (c *cluster) sendTo(ctx context.Context, b *broker, k key, until int) <-chan answer {
	c.t.Helper()
	tr := c.api.tr.Clone()
	tr.DisableKeepAlives = true
	c.t.Cleanup(tr.CloseIdleConnections)
	reached := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(reached) }) }
	pctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		ConnectDone: func(_, _ string, err error) {
			if err == nil && until == untilConnected {
				done()
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil && until == untilWritten {
				done()
			}
		},
	})
	pctx, cancel := context.WithTimeout(pctx, 60*time.Second)
	out := make(chan answer, 1)
	go func() {
		defer cancel()
		a := c.api.produce(pctx, &http.Client{Transport: tr}, b.base, k.stream, k.producer, k.seq, fmt.Appendf(nil, "%s/%d", k.producer, k.seq))
		done()
		out <- a
	}()
	if until != untilSent {
		limit := time.NewTimer(10 * time.Second)
		defer limit.Stop()
		select {
		case <-reached:
		case <-limit.C:
			c.t.Fatalf("the produce to %s got nowhere", b.name)
		}
	}
	return out
}
