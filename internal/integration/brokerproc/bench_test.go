//go:build unix

package brokerproc_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/cutline/cutline/internal/integration/stacktest"
)

// BenchmarkBrokerFailoverKill measures failovers after kill -9 of the
// holder, with the cluster of TestBrokerFailover (three broker processes
// that vote and run direct health links, a controller, embedded etcd,
// three versitygw zones with 20 ms before every request) and producers
// running. Each iteration kills the holder, times the failover from the
// kill, starts the killed broker again and waits for every link of the
// new grant. Reported, averaged over the iterations, from the kill:
//
//   - ended-s: the survivors stop naming the dead holder (its grant ended);
//   - granted-s: they name the successor;
//   - first-ack-s: the successor acknowledged its first append;
//   - fence-s: the time the successor's fences took (its
//     cutline_broker_fence_seconds), part of the grant's recovery.
//
// The cluster's records are read back at the end: lost 0, duplicated 0.
//
//	cd internal/integration && go test -run '^$' -bench BrokerFailover -benchtime 3x ./brokerproc/
func BenchmarkBrokerFailoverKill(b *testing.B) { benchFailover(b, false) }

// BenchmarkBrokerFailoverStop is BenchmarkBrokerFailoverKill with the
// holder frozen (SIGSTOP) instead of killed, and continued (SIGCONT) once
// its successor acknowledged: a zombie, which the test's producers then
// find holding nothing.
func BenchmarkBrokerFailoverStop(b *testing.B) { benchFailover(b, true) }

func benchFailover(b *testing.B, stop bool) {
	bin := stacktest.BuildBroker(b)
	ctx, cancel := context.WithTimeout(b.Context(), 20*time.Minute)
	defer cancel()
	c := startCluster(ctx, b, bin)
	holder := c.waitHolder(ctx, c.brokers)
	c.waitLinks(ctx, holder, c.others(holder.name))
	ps := c.startProducers(ctx, streams, 2)
	poll(ctx, b, 30*time.Second, "40 acknowledgements", func(context.Context) bool { return c.led.total() >= 40 })
	var sum split
	var fence float64
	seq := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		holder := c.waitHolder(ctx, c.brokers)
		c.waitLinks(ctx, holder, c.others(holder.name))
		fenced := map[string]float64{}
		for _, o := range c.others(holder.name) {
			fenced[o.name] = c.metric(ctx, o, "cutline_broker_fence_seconds_sum")
		}
		t0 := time.Now()
		if stop {
			holder.signal(syscall.SIGSTOP)
		} else {
			holder.kill()
		}
		s := c.failover(ctx, holder, t0, seq)
		seq++
		b.Logf("%s: %v", holder.name, s)
		sum.ended += s.ended
		sum.granted += s.granted
		sum.firstAck += s.firstAck
		fence += c.metric(ctx, s.successor, "cutline_broker_fence_seconds_sum") - fenced[s.successor.name]
		if stop {
			holder.signal(syscall.SIGCONT)
		} else {
			holder.start()
		}
		c.waitServing(ctx, holder)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(sum.ended.Seconds()/n, "ended-s")
	b.ReportMetric(sum.granted.Seconds()/n, "granted-s")
	b.ReportMetric(sum.firstAck.Seconds()/n, "first-ack-s")
	b.ReportMetric(fence/n, "fence-s")
	if err := ps.finish(); err != nil {
		b.Fatal(err)
	}
	c.verify(ctx, streams, c.waitHolder(ctx, c.brokers))
}
