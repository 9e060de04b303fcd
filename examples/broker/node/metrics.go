package node

import (
	"context"
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cutline/cutline/examples/internal/connlimit"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// metrics are one broker node's Prometheus metrics, in a registry of its
// own (never the global default one). Labels carry names of zones,
// operations, decisions and outcomes only: never a token, a producer or a
// credential.
type metrics struct {
	Registry       *prometheus.Registry
	appendSeconds  prometheus.Histogram
	fenceSeconds   prometheus.Histogram
	fenceRounds    prometheus.Histogram
	settles        *prometheus.CounterVec
	gateDecisions  *prometheus.CounterVec
	grantChanges   *prometheus.CounterVec
	objectRequests *prometheus.CounterVec
	pings          *prometheus.CounterVec
	snapshots      *prometheus.CounterVec
	replayed       prometheus.Counter
	conns          prometheus.Gauge
	connsClosed    *prometheus.CounterVec
	httpRequests   *prometheus.CounterVec
	httpSeconds    *prometheus.HistogramVec
	// The lifecycle's (lifecycle.go).
	compactedBytes    prometheus.Counter
	segmentsWritten   prometheus.Counter
	objectsDeleted    *prometheus.CounterVec
	refPagesDropped   prometheus.Counter
	recordsExpired    *prometheus.CounterVec
	lifecyclePasses   *prometheus.CounterVec
	lifecycleErrors   *prometheus.CounterVec
	lifecycleSeconds  prometheus.Histogram
	backlog           prometheus.Gauge
	oldestUncompacted prometheus.Gauge
}

// connCounter counts the API listener's connections.
func (m *metrics) connCounter() connlimit.Counter {
	return connlimit.Counter{Open: m.conns.Add, Closed: func(reason string) { m.connsClosed.WithLabelValues(reason).Inc() }}
}

// newMetrics registers the node's metrics. inflight reports the slots in
// flight of the node's current writer, undecidedAge the age in seconds of
// the oldest slot its fencer waits on (0 when none), linksUp its direct
// health links that are up, absorbBacklog the acknowledged flights not
// covered in the index yet.
func newMetrics(inflight, undecidedAge, linksUp, absorbBacklog func() float64) *metrics {
	m := &metrics{
		Registry: prometheus.NewRegistry(),
		appendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cutline_broker_append_seconds", Help: "Time from Submit to the acknowledgement of a produced record.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		fenceSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cutline_broker_fence_seconds", Help: "Duration of the fences the open gate and recoveries ran.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		fenceRounds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cutline_broker_fence_rounds", Help: "Sequential round trips to the zones of each fence.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		settles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutline_broker_settles_total", Help: "Epoch settlements, by where they ran (gate, recovery) and whether the epoch was settled already.",
		}, []string{"source", "result"}),
		gateDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutline_broker_gate_decisions_total", Help: "Streams admitted by the open gate, by decision.",
		}, []string{"decision"}),
		grantChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutline_broker_grant_changes_total", Help: "Authority grants this node gained or lost.",
		}, []string{"change"}),
		objectRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutline_broker_object_requests_total", Help: "Object store requests, by zone, kind and outcome.",
		}, []string{"zone", "op", "result"}),
		pings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutline_broker_health_pings_total", Help: "Pings of this node's direct health links, by result (ok, failed).",
		}, []string{"result"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutline_broker_snapshot_saves_total", Help: "Saves of a stream's producer snapshot, by result (saved, refused: too big, failed).",
		}, []string{"result"}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cutline_broker_replayed_records_total", Help: "Records a new holder read back to rebuild its producers, past their snapshot.",
		}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cutline_broker_api_connections", Help: "Connections the API keeps open.",
		}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutline_broker_api_connections_closed_total", Help: "Connections the API closed to keep its bounds: on accept, past the bound in all (total) or of their address (per_address), or silent, to make room (evicted).",
		}, []string{"reason"}),
	}
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cutline_broker_http_requests_total", Help: "API requests answered, by route (the pattern matched; \"none\" for no route) and status code.",
	}, []string{"route", "code"})
	m.httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "cutline_broker_http_request_seconds", Help: "Time to answer an API request, by route, to the end of its body.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"route"})
	m.registerLifecycle()
	// The process's own state (goroutines, heap, GC, file descriptors,
	// memory): what an operator looks at first when a node slows down.
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpSeconds)
	m.Registry.MustRegister(m.appendSeconds, m.fenceSeconds, m.fenceRounds, m.settles, m.gateDecisions, m.grantChanges, m.objectRequests, m.pings,
		m.snapshots, m.replayed, m.conns, m.connsClosed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cutline_broker_slots_in_flight", Help: "Slots the node's current writer has submitted and not acknowledged.",
		}, inflight),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cutline_broker_undecided_slot_age_seconds", Help: "Age of the oldest slot the node's fencer is blocked on (fence.Fencer.Undecided); 0 when none. Alert on it.",
		}, undecidedAge),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cutline_broker_absorb_backlog_flights", Help: "Acknowledged flights the holder has not covered in the index yet; at most the absorb batch plus the window (lease.Star.AbsorbStats).",
		}, absorbBacklog),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cutline_broker_health_links_up", Help: "Direct health links of the current topology whose last ping completed under its token (the holder's to every other voter, another node's to the holder).",
		}, linksUp))
	return m
}

// registerLifecycle registers the metrics of the lifecycle passes. The
// gauges are the holder's, as its last pass measured them; 0 on a node
// that does not hold the grant.
func (m *metrics) registerLifecycle() {
	m.compactedBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cutline_broker_compacted_bytes_total", Help: "Bytes of records rewritten from flights into segments by compaction.",
	})
	m.segmentsWritten = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cutline_broker_segments_written_total", Help: "Segments compaction wrote and moved ref pages onto.",
	})
	m.objectsDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cutline_broker_lifecycle_deleted_objects_total", Help: "Object copies the lifecycle deleted, by kind: flight (trimmed once rewritten or dropped by retention) or segment (collected once no ref page names it).",
	}, []string{"kind"})
	m.refPagesDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cutline_broker_retention_ref_pages_deleted_total", Help: "Ref pages retention deleted, every offset of them below their stream's retention point.",
	})
	m.recordsExpired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cutline_broker_retention_expired_records_total", Help: "Records retention dropped, by the limit that moved the retention point (age, bytes, records).",
	}, []string{"by"})
	m.lifecyclePasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cutline_broker_lifecycle_passes_total", Help: "Lifecycle passes the holder ran, by result (ok, error: a step failed; the next pass runs it again).",
	}, []string{"result"})
	m.lifecycleErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cutline_broker_lifecycle_errors_total", Help: "Failed steps of lifecycle passes, by stage (absorb, retain, list, settle, compact, trim, collect, budget: the pass ran out of time).",
	}, []string{"stage"})
	m.lifecycleSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "cutline_broker_lifecycle_pass_seconds", Help: "Duration of the lifecycle passes.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	})
	m.backlog = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cutline_broker_compaction_backlog_flights", Help: "Flights covered in the index (below their epoch's checkpoint) and neither rewritten into segments nor trimmed, as the holder's last pass left them.",
	})
	m.oldestUncompacted = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cutline_broker_oldest_uncompacted_seconds", Help: "How long the holder's passes have found the oldest uncompacted flight waiting at its epoch's rewritten cursor; 0 when none waits.",
	})
	m.Registry.MustRegister(m.compactedBytes, m.segmentsWritten, m.objectsDeleted, m.refPagesDropped, m.recordsExpired,
		m.lifecyclePasses, m.lifecycleErrors, m.lifecycleSeconds, m.backlog, m.oldestUncompacted)
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
		m.fence(f)
	}
}

func (m *metrics) fence(f *fence.Report) {
	m.fenceSeconds.Observe(f.Duration.Seconds())
	m.fenceRounds.Observe(float64(f.Rounds))
}

// countingBucket is an objstore.Bucket decorator that counts every request
// by zone, kind and outcome.
type countingBucket struct {
	inner objstore.Bucket
	reqs  *prometheus.CounterVec
}

var _ objstore.Bucket = (*countingBucket)(nil)

// counting wraps every bucket of a zone set.
func (m *metrics) counting(buckets []objstore.Bucket) []objstore.Bucket {
	out := make([]objstore.Bucket, len(buckets))
	for i, b := range buckets {
		out[i] = &countingBucket{inner: b, reqs: m.objectRequests}
	}
	return out
}

func (c *countingBucket) count(op string, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, objstore.ErrNotFound):
		result = "not_found"
	case errors.Is(err, objstore.ErrExists):
		result = "exists"
	case errors.Is(err, context.Canceled):
		// A request the caller no longer needed: the reader reads every
		// zone and drops the slower ones once W copies agree.
		result = "canceled"
	default:
		result = "error"
	}
	c.reqs.WithLabelValues(c.inner.Name(), op, result).Inc()
}

func (c *countingBucket) Name() string { return c.inner.Name() }

func (c *countingBucket) Create(ctx context.Context, key string, data []byte) error {
	err := c.inner.Create(ctx, key, data)
	c.count("create", err)
	return err
}

func (c *countingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := c.inner.Get(ctx, key)
	c.count("get", err)
	return b, err
}

func (c *countingBucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	b, err := c.inner.GetRange(ctx, key, offset, length)
	c.count("get_range", err)
	return b, err
}

func (c *countingBucket) Delete(ctx context.Context, key string) error {
	err := c.inner.Delete(ctx, key)
	c.count("delete", err)
	return err
}

func (c *countingBucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	out, err := c.inner.List(ctx, prefix, startAfter, limit)
	c.count("list", err)
	return out, err
}
