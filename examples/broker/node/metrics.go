package node

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/cutline/cutline/examples/internal/connlimit"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/observe"
	"github.com/cutline/cutline/settle"
)

// metrics are one broker node's Prometheus metrics, in a registry of its
// own (never the global default one). Labels carry names of zones,
// operations, decisions and outcomes only: never a token, a producer or a
// credential.
type metrics struct {
	Registry                                             *prometheus.Registry
	appendSeconds, fenceSeconds, fenceRounds             prometheus.Histogram
	settles, gateDecisions, grantChanges, pings          *prometheus.CounterVec
	objectRequests, snapshots, connsClosed, httpRequests *prometheus.CounterVec
	replayed                                             prometheus.Counter
	conns                                                prometheus.Gauge
	httpSeconds                                          *prometheus.HistogramVec
	// The lifecycle's (lifecycle.go).
	compactedBytes, segmentsWritten, refPagesDropped                 prometheus.Counter
	objectsDeleted, recordsExpired, lifecyclePasses, lifecycleErrors *prometheus.CounterVec
	lifecycleSeconds                                                 prometheus.Histogram
	backlog, oldestUncompacted                                       prometheus.Gauge
}

// connCounter counts the API listener's connections.
func (m *metrics) connCounter() connlimit.Counter {
	return connlimit.Counter{Open: m.conns.Add, Closed: func(reason string) { m.connsClosed.WithLabelValues(reason).Inc() }}
}

// newMetrics registers the node's metrics, each named under the prefix
// cutline_broker_. inflight reports the slots in flight of the node's
// current writer, undecidedAge the age in seconds of the oldest slot its
// fencer waits on (0 when none), linksUp its direct health links that
// are up, absorbBacklog the acknowledged flights not covered in the
// index yet. The lifecycle's gauges are the holder's, as its last pass
// measured them; 0 on a node that does not hold the grant.
func newMetrics(inflight, undecidedAge, linksUp, absorbBacklog func() float64) *metrics {
	m := &metrics{Registry: prometheus.NewRegistry()}
	// The process's own state (goroutines, heap, GC, file descriptors,
	// memory): what an operator looks at first when a node slows down.
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f, exp := promauto.With(prometheus.WrapRegistererWithPrefix("cutline_broker_", m.Registry)), prometheus.ExponentialBuckets
	o := func(name, help string) prometheus.Opts { return prometheus.Opts{Name: name, Help: help} }
	counter := func(name, help string) prometheus.Counter { return f.NewCounter(prometheus.CounterOpts(o(name, help))) }
	counters := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts(o(name, help)), labels)
	}
	gauge := func(name, help string) prometheus.Gauge { return f.NewGauge(prometheus.GaugeOpts(o(name, help))) }
	gaugeFunc := func(name, help string, v func() float64) { f.NewGaugeFunc(prometheus.GaugeOpts(o(name, help)), v) }
	histogram := func(name, help string, b []float64) prometheus.Histogram {
		return f.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b})
	}
	m.httpRequests = counters("http_requests_total", "API requests answered, by route (the pattern matched; \"none\" for no route) and status code.", "route", "code")
	m.httpSeconds = f.NewHistogramVec(prometheus.HistogramOpts{Name: "http_request_seconds", Help: "Time to answer an API request, by route, to the end of its body.",
		Buckets: exp(0.0005, 4, 10)}, []string{"route"})
	m.appendSeconds = histogram("append_seconds", "Time from Submit to the acknowledgement of a produced record.", exp(0.0005, 2, 16))
	m.fenceSeconds = histogram("fence_seconds", "Duration of the fences the open gate and recoveries ran.", exp(0.001, 2, 16))
	m.fenceRounds = histogram("fence_rounds", "Sequential round trips to the zones of each fence.", exp(1, 2, 12))
	m.settles = counters("settles_total", "Epoch settlements, by where they ran (gate, recovery) and whether the epoch was settled already.", "source", "result")
	m.gateDecisions = counters("gate_decisions_total", "Streams admitted by the open gate, by decision.", "decision")
	m.grantChanges = counters("grant_changes_total", "Authority grants this node gained or lost.", "change")
	m.objectRequests = counters("object_requests_total", "Object store requests, by zone, kind and outcome.", "zone", "op", "result")
	m.pings = counters("health_pings_total", "Pings of this node's direct health links, by result (ok, failed).", "result")
	m.snapshots = counters("snapshot_saves_total", "Saves of a stream's producer snapshot, by result (saved, refused: too big, failed).", "result")
	m.replayed = counter("replayed_records_total", "Records a new holder read back to rebuild its producers, past their snapshot.")
	m.conns = gauge("api_connections", "Connections the API keeps open.")
	m.connsClosed = counters("api_connections_closed_total", "Connections the API closed to keep its bounds: on accept, past the bound in all (total) or of their address (per_address), or silent, to make room (evicted).", "reason")
	gaugeFunc("slots_in_flight", "Slots the node's current writer has submitted and not acknowledged.", inflight)
	gaugeFunc("undecided_slot_age_seconds", "Age of the oldest slot the node's fencer is blocked on (fence.Fencer.Undecided); 0 when none. Alert on it.", undecidedAge)
	gaugeFunc("absorb_backlog_flights", "Acknowledged flights the holder has not covered in the index yet; at most the absorb batch plus the window (lease.Star.AbsorbStats).", absorbBacklog)
	gaugeFunc("health_links_up", "Direct health links of the current topology with a round trip under its token within the health window (authority.HealthWindow): the holder's to every other voter, another node's to the holder.", linksUp)
	// The lifecycle's.
	m.compactedBytes = counter("compacted_bytes_total", "Bytes of records rewritten from flights into segments by compaction.")
	m.segmentsWritten = counter("segments_written_total", "Segments compaction wrote and moved ref pages onto.")
	m.objectsDeleted = counters("lifecycle_deleted_objects_total", "Object copies the lifecycle deleted, by kind: flight (trimmed once rewritten or dropped by retention) or segment (collected once no ref page names it).", "kind")
	m.refPagesDropped = counter("retention_ref_pages_deleted_total", "Ref pages retention deleted, every offset of them below their stream's retention point.")
	m.recordsExpired = counters("retention_expired_records_total", "Records retention dropped, by the limit that moved the retention point (age, bytes, records).", "by")
	m.lifecyclePasses = counters("lifecycle_passes_total", "Lifecycle passes the holder ran, by result (ok, error: a step failed; the next pass runs it again).", "result")
	m.lifecycleErrors = counters("lifecycle_errors_total", "Failed steps of lifecycle passes, by stage (absorb, retain, list, settle, compact, trim, collect, budget: the pass ran out of time).", "stage")
	m.lifecycleSeconds = histogram("lifecycle_pass_seconds", "Duration of the lifecycle passes.", exp(0.001, 4, 10))
	m.backlog = gauge("compaction_backlog_flights", "Flights covered in the index (below their epoch's checkpoint) and neither rewritten into segments nor trimmed, as the holder's last pass left them.")
	m.oldestUncompacted = gauge("oldest_uncompacted_seconds", "How long the holder's passes have found the oldest uncompacted flight waiting at its epoch's rewritten cursor; 0 when none waits.")
	return m
}

// gate records what the open gate decided, and the settlement it ran.
func (m *metrics) gate(t lease.Tenure) {
	m.gateDecisions.WithLabelValues(strings.ReplaceAll(string(t.Decision), " ", "_")).Inc()
	if t.Settled != nil {
		m.settle("gate", *t.Settled)
	}
}

// settle records one settlement and the fence it ran.
func (m *metrics) settle(source string, r settle.SettleReport) {
	result := "settled"
	if r.AlreadySettled {
		result = "already_settled"
	}
	m.settles.WithLabelValues(source, result).Inc()
	if f := r.Fence; f != nil && !f.AlreadyFenced {
		m.fenceSeconds.Observe(f.Duration.Seconds())
		m.fenceRounds.Observe(float64(f.Rounds))
	}
}

// counting wraps every bucket of a zone set so that its requests are
// counted by zone, kind and outcome (objstore/observe).
func (m *metrics) counting(buckets []objstore.Bucket) []objstore.Bucket {
	out := make([]objstore.Bucket, len(buckets))
	for i, b := range buckets {
		out[i], _ = observe.Wrap(b, func(zone string, op observe.Op, err error) {
			m.objectRequests.WithLabelValues(zone, string(op), observe.Outcome(err)).Inc()
		})
	}
	return out
}
