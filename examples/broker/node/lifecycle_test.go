package node

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// passEvery is the lifecycle interval of the tests' nodes, on their fake
// clock.
const passEvery = time.Hour

// newLifecycleCluster is a cluster whose nodes run their lifecycle passes
// every hour of a fake clock, which the test moves (runPass).
func newLifecycleCluster(t *testing.T, args ...string) *cluster {
	c := newClusterWith(t, append([]string{"-compact-interval", passEvery.String()}, args...)...)
	c.lcClock = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return c
}

// runPass waits until every node's loop sleeps, moves the clock one
// interval, and waits for the holder's pass to end.
func (c *cluster) runPass(t *testing.T, holder *testNode) {
	t.Helper()
	before := holder.LifecyclePasses.Load()
	c.lcClock.BlockUntil(c.lcLoops)
	c.lcClock.Advance(passEvery)
	require.Eventually(t, func() bool { return holder.LifecyclePasses.Load() > before }, 30*time.Second, 5*time.Millisecond, "the holder's pass")
}

// zoneObjects counts the objects of the zones under the nodes' prefix:
// slot objects (flights, and the poison of a cut) and segments.
func zoneObjects(t *testing.T, zones []objstore.Bucket) (slots, segments int) {
	t.Helper()
	for _, z := range zones {
		for o, err := range objstore.All(t.Context(), z, "streams/") {
			require.NoError(t, err)
			if strings.Contains(o.Key, "/segments/") {
				segments++
			} else {
				slots++
			}
		}
	}
	return slots, segments
}

// requireTrimmed requires that no zone holds a slot object of star's
// epoch ep below slot upTo, and that upTo is past 0. A record is
// acknowledged at W copies while the last zone's copy may still be on its
// way: one that lands after a pass's trim is deleted by the next pass's
// (a trim lists the epoch from its first slot), so up to two more passes
// of holder run before a leftover fails the test.
func requireTrimmed(t *testing.T, c *cluster, holder *testNode, star string, ep, upTo uint64) {
	t.Helper()
	require.Positive(t, upTo)
	keys := wire.Keys{Prefix: "streams"}
	left := func() []string {
		var out []string
		for _, z := range c.be.Zones {
			for o, err := range objstore.All(t.Context(), z, keys.Epoch(star, ep)) {
				require.NoError(t, err)
				if s, ok := keys.ParseSlot(star, ep, o.Key); ok && s < upTo {
					out = append(out, o.Key)
				}
			}
		}
		return out
	}
	for range 2 {
		if len(left()) == 0 {
			return
		}
		c.runPass(t, holder)
	}
	require.Empty(t, left(), "slot objects below %d are left after three passes", upTo)
}

// epochOf reads star's epoch ep.
func epochOf(t *testing.T, c *cluster, star string, ep uint64) *epoch.Record {
	t.Helper()
	m, err := epoch.NewMinter(c.be.Store, epoch.Options{})
	require.NoError(t, err)
	rec, err := m.Get(t.Context(), star, ep)
	require.NoError(t, err)
	return rec
}

// The holder's pass compacts the flights below the checkpoint into a
// segment per stream, trims them, and every record stays readable, once:
// from segments, and from the flights of each stream's last page, which
// the open epoch still appends to. After a handoff, the successor's pass
// compacts and trims the settled epoch whole, and the stream is read
// and replayed from segments alone.
func TestLifecycleCompactsAndTrims(t *testing.T) {
	c := newLifecycleCluster(t)
	a := c.join("node-a")
	b := c.join("node-b")
	waitHolding(t, a.Node)

	const perStream = 130 // two sealed pages of 64, and 2 records on the last
	sent := map[string]map[string]bool{"orders": {}, "payments": {}}
	for i := range perStream {
		for _, s := range []string{"orders", "payments"} {
			data := fmt.Sprintf("%s record %d", s, i)
			code, _, e := a.api.produce(s, []byte(data), "", 0)
			require.Equal(t, http.StatusOK, code, e.Error)
			sent[s][data] = true
		}
	}
	k, w := len(c.be.Zones), c.cfg.W
	slots, segs := zoneObjects(t, c.be.Zones)
	// Each flight is in W zones at least; the slowest copy may still be
	// on its way.
	require.GreaterOrEqual(t, slots, 2*perStream*w)
	require.Zero(t, segs)

	c.runPass(t, a)
	h, err := a.holder()
	require.NoError(t, err)
	ep := h.Star.Epoch().Epoch
	rec := epochOf(t, c, "node-a", ep)
	// Interleaved, offset 128 of each stream (its last, open page) is at
	// slot 256: the rewritten cursor stops there, below both open pages.
	require.Equal(t, uint64(2*128), rec.Cursors.Rewritten, "%+v", rec.Cursors)
	require.Equal(t, rec.Cursors.Rewritten, rec.Cursors.Trimmed, "trimmed up to the rewritten cursor")
	requireTrimmed(t, c, a, "node-a", ep, rec.Cursors.Trimmed)
	left, segs := zoneObjects(t, c.be.Zones)
	require.LessOrEqual(t, left, 4*k, "only the flights of the open pages are left")
	require.Equal(t, 2*k, segs, "one segment per stream, in every zone")

	require.Equal(t, float64(2), a.api.metric("cutline_broker_segments_written_total"))
	deleted := a.api.metric(`cutline_broker_lifecycle_deleted_objects_total{kind="flight"}`)
	require.GreaterOrEqual(t, deleted, float64(2*128*w))
	require.LessOrEqual(t, deleted, float64(2*128*k))
	require.Greater(t, a.api.metric("cutline_broker_compacted_bytes_total"), float64(2*128*len("orders record 100")))
	require.Equal(t, float64(rec.Cursors.Checkpoint-rec.Cursors.Rewritten), a.api.metric("cutline_broker_compaction_backlog_flights"))
	require.Equal(t, float64(1), a.api.metric(`cutline_broker_lifecycle_passes_total{result="ok"}`))
	for s, want := range sent {
		checkStream(t, a.api.consume(s), want)
		checkStream(t, b.api.consume(s), want)
	}
	// The flights of the open pages have waited a pass at the cursor.
	c.runPass(t, a)
	require.Equal(t, passEvery.Seconds(), a.api.metric("cutline_broker_oldest_uncompacted_seconds"))

	// A handoff settles node-a's epoch: its last pages are compacted too.
	require.NoError(t, c.ctl.Driver().Step(t.Context(), authority.HandoffRequest{Target: "node-b"}))
	waitHolding(t, b.Node)
	code, _, e := b.api.produce("orders", []byte("after the handoff"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	sent["orders"]["after the handoff"] = true
	c.runPass(t, b)
	rec = epochOf(t, c, "node-a", ep)
	require.Equal(t, epoch.StateSettled, rec.State)
	require.Equal(t, float64(1), b.api.metric(`cutline_broker_settles_total{result="settled",source="lifecycle"}`), "the pass settled it")
	require.Equal(t, rec.Cursors.Checkpoint, rec.Cursors.Rewritten, "%+v", rec.Cursors)
	require.Equal(t, rec.Cursors.Checkpoint, rec.Cursors.Trimmed, "%+v", rec.Cursors)
	requireTrimmed(t, c, b, "node-a", ep, rec.Cut)
	for s, want := range sent {
		checkStream(t, b.api.consume(s), want)
	}
	// A new holder's replay reads the records from segments.
	table := replayAll(t, b.Node, "payments", perStream)
	require.Equal(t, uint64(perStream), table.Next())
}

// Retention by count: the pass moves the retention point, trims the
// flights below it, and a read below it is answered 410 with where the
// stream now starts; a retry of a record retention dropped gets its first
// acknowledgement, and a replay skips what is gone.
func TestLifecycleRetention(t *testing.T) {
	c := newLifecycleCluster(t, "-retention-records", "10")
	a := c.join("node-a")
	waitHolding(t, a.Node)
	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 40, sent, acks)

	c.runPass(t, a)
	require.Equal(t, float64(30), a.api.metric(`cutline_broker_retention_expired_records_total{by="records"}`))
	h, err := a.holder()
	require.NoError(t, err)
	requireTrimmed(t, c, a, "node-a", h.Star.Epoch().Epoch, 30)
	require.GreaterOrEqual(t, a.api.metric(`cutline_broker_lifecycle_deleted_objects_total{kind="flight"}`), float64(30*c.cfg.W))

	for _, off := range []int{0, 29} {
		var body ErrorBody
		code, hdr := a.api.do(http.MethodGet, fmt.Sprintf("/v1/streams/orders/records?offset=%d", off), nil, nil, &body)
		require.Equal(t, http.StatusGone, code)
		require.NotNil(t, body.Start)
		require.Equal(t, uint64(30), *body.Start)
		require.Equal(t, "30", hdr.Get(headerStart))
		require.Contains(t, body.Error, "the stream now starts at 30")
	}
	var page []Consumed
	code, hdr := a.api.do(http.MethodGet, "/v1/streams/orders/records?offset=30", nil, nil, &page)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, page, 10)
	require.Equal(t, "40", hdr.Get(HeaderNext))
	for i, r := range page {
		require.Equal(t, uint64(30+i), r.Offset)
		require.Equal(t, producedData(uint64(30+i)), string(r.Data))
	}
	var list streamPage
	code, _ = a.api.do(http.MethodGet, "/v1/streams", nil, nil, &list)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, list.Streams, 1)
	require.Equal(t, uint64(30), list.Streams[0].Start)

	requireRetried(t, a, 3, acks[3])
	table := replayAll(t, a.Node, "orders", 40)
	require.Equal(t, uint64(40), table.Next())
	got, v := table.Lookup("producer-1", 35)
	require.Equal(t, batch.Duplicate, v)
	require.Equal(t, acks[35], Ack{Offset: got.Offset, Epoch: got.Position.Epoch, Slot: got.Position.Slot})
}

// Retention by age reads the time each ref page's newest record joined,
// on the index's clock.
func TestLifecycleRetentionByAge(t *testing.T) {
	c := newLifecycleCluster(t, "-retention-age", "90m")
	a := c.join("node-a")
	waitHolding(t, a.Node)
	sent, acks := map[string]bool{}, map[uint64]Ack{}
	produceN(t, a, 0, 5, sent, acks)
	// Records join the index when the holder covers them, which a read
	// makes it do.
	checkStream(t, a.api.consume("orders"), sent)
	c.runPass(t, a) // an hour old: kept
	checkStream(t, a.api.consume("orders"), sent)
	c.runPass(t, a) // two hours old: gone
	var body ErrorBody
	code, _ := a.api.do(http.MethodGet, "/v1/streams/orders/records?offset=0", nil, nil, &body)
	require.Equal(t, http.StatusGone, code)
	require.Equal(t, uint64(5), *body.Start)
	var page []Consumed
	code, hdr := a.api.do(http.MethodGet, "/v1/streams/orders/records?offset=5", nil, nil, &page)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, page)
	require.Equal(t, "5", hdr.Get(HeaderNext))
	require.Equal(t, float64(5), a.api.metric(`cutline_broker_retention_expired_records_total{by="age"}`))
	produceN(t, a, 5, 2, sent, acks)
	code, _ = a.api.do(http.MethodGet, "/v1/streams/orders/records?offset=5", nil, nil, &page)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, page, 2)
}

// A pass that runs out of time (its zones hang) is ended, counted as a
// failure, and the next goes on.
func TestLifecyclePassBudget(t *testing.T) {
	c := newLifecycleCluster(t)
	g := newReadGate()
	a := c.joinWith("node-a", g.wrap(c.be.Zones))
	waitHolding(t, a.Node)
	sent := map[string]bool{}
	for i := range 130 {
		data := fmt.Sprintf("record %d", i)
		code, _, e := a.api.produce("orders", []byte(data), "", 0)
		require.Equal(t, http.StatusOK, code, e.Error)
		sent[data] = true
	}
	g.shut.Store(true)
	c.lcClock.BlockUntil(1)
	c.lcClock.Advance(passEvery)
	require.Eventually(t, func() bool { return g.held.Load() > 0 }, 20*time.Second, 5*time.Millisecond, "the pass reads the zones")
	c.lcClock.BlockUntil(1)      // the pass's budget
	c.lcClock.Advance(passEvery) // past the budget: the interval, at most 10m
	require.Eventually(t, func() bool { return a.LifecyclePasses.Load() == 1 }, 20*time.Second, 5*time.Millisecond, "the pass gives up")
	require.Equal(t, float64(1), a.api.metric(`cutline_broker_lifecycle_errors_total{stage="budget"}`))
	require.Equal(t, float64(1), a.api.metric(`cutline_broker_lifecycle_passes_total{result="error"}`))

	g.shut.Store(false)
	close(g.open)
	c.runPass(t, a)
	require.Equal(t, float64(1), a.api.metric(`cutline_broker_lifecycle_passes_total{result="ok"}`))
	require.Equal(t, float64(1), a.api.metric("cutline_broker_segments_written_total"))
	checkStream(t, a.api.consume("orders"), sent)
}

// A node that does not hold the grant runs no pass, and -compact-interval
// 0 runs none at all.
func TestLifecycleOnlyTheHolder(t *testing.T) {
	c := newLifecycleCluster(t)
	a := c.join("node-a")
	waitHolding(t, a.Node)
	b := c.join("node-b")
	c.runPass(t, a)
	require.Zero(t, b.LifecyclePasses.Load())
	require.Zero(t, b.api.metric(`cutline_broker_lifecycle_passes_total{result="ok"}`))

	off := newClusterWith(t, "-compact-interval", "0")
	n := off.join("node-c")
	require.Nil(t, n.lifecycleStop, "no loop")
}

// The lifecycle's flags, their bounds and their environment variables.
func TestLifecycleFlags(t *testing.T) {
	parse := func(env map[string]string, args ...string) (*Settings, error) {
		return parseFlags(args, func(k string) string { return env[k] }, io.Discard)
	}
	cfg, err := parse(nil)
	require.NoError(t, err)
	require.Equal(t, LifecycleConfig{Interval: time.Minute}, cfg.lifecycleConfig(), "every minute, everything kept")
	cfg, err = parse(map[string]string{"CUTLINE_RETENTION_AGE": "168h", "CUTLINE_COMPACT_INTERVAL": "5m"},
		"-retention-bytes", "1048576", "-retention-records", "1000")
	require.NoError(t, err)
	require.Equal(t, LifecycleConfig{Interval: 5 * time.Minute, Policy: settle.Policy{MaxAge: 168 * time.Hour, MaxBytes: 1 << 20, MaxRecords: 1000}},
		cfg.lifecycleConfig())
	cfg, err = parse(nil, "-compact-interval", "0")
	require.NoError(t, err)
	require.Negative(t, cfg.lifecycleConfig().Interval, "0 turns the passes off")

	for _, bad := range [][]string{
		{"-compact-interval", "500ms"},
		{"-compact-interval", "25h"},
		{"-compact-interval", "-1s"},
		{"-retention-age", "30s"},
		{"-retention-age", "-1h"},
		{"-retention-bytes", "1000"},
		{"-retention-bytes", "-1"},
		{"-retention-records", "-1"},
		{"-compact-interval", "0", "-retention-records", "10"},
		{"-retention-age", "7d"},
	} {
		_, err := parse(nil, bad...)
		require.Error(t, err, "%v", bad)
		require.True(t, IsUsage(err), "%v: %v", bad, err)
	}
	_, err = parse(map[string]string{"CUTLINE_RETENTION_BYTES": "12"})
	require.Error(t, err)
	require.True(t, IsUsage(err), err.Error())
}
