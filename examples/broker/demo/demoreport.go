package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/examples/broker/node"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// verify reads the stream back through the successor's API and checks it
// against what the producer saw acknowledged; then it stops the nodes and
// checks cutline's guarantees over the finished run (cutlinetest.Check).
func (d *demo) verify(ctx context.Context) error {
	p := d.prod
	acks := p.acknowledgements()
	got, err := p.read(ctx, d.successor.name)
	if err != nil {
		return err
	}
	seqOf := make(map[string]uint64, d.cfg.records)
	for seq := range uint64(d.cfg.records) {
		seqOf[string(p.data(seq))] = seq
	}
	count, at := map[uint64]int{}, map[uint64]uint64{}
	for i, r := range got {
		seq, ok := seqOf[string(r.Data)]
		switch {
		case r.Offset != uint64(i):
			d.problems = append(d.problems, fmt.Sprintf("the read returned offset %d at position %d", r.Offset, i))
		case !ok:
			d.problems = append(d.problems, fmt.Sprintf("offset %d holds a record nobody acknowledged: %q", r.Offset, r.Data))
		}
		count[seq]++
		at[seq] = r.Offset
	}
	lost, duplicated := 0, 0
	for seq, a := range acks {
		if off, ok := at[seq]; !ok || off != a.Offset {
			lost++
		}
	}
	for _, n := range count {
		duplicated += n - 1
	}
	d.findings = append(d.findings, fmt.Sprintf("read back through %s's API: offsets 0–%d without a gap, each record compared with its acknowledgement", d.successor.name, len(got)-1))

	// Where the index serves each acknowledged record: what the producer
	// saw, as cutlinetest.Check reads it.
	refs, err := settle.NewRefIndex(d.be.Store, "", node.Locate)
	if err != nil {
		return err
	}
	byOffset := map[uint64]settle.Ref{}
	for r, err := range refs.Refs(ctx, demoStream) {
		if err != nil {
			return err
		}
		byOffset[r.Offset] = r
	}
	var hist cutlinetest.History
	for _, seq := range slices.Sorted(maps.Keys(acks)) {
		a := acks[seq]
		r, ok := byOffset[a.Offset]
		if ok && (r.Epoch != a.Epoch || r.Slot != a.Slot || (!a.Duplicate && r.Star != a.peer)) {
			d.problems = append(d.problems, fmt.Sprintf("record %d was acknowledged by %s at %d/%d, the index serves it from %s/%v", seq, a.peer, a.Epoch, a.Slot, r.Star, r.Position()))
		}
		id := fmt.Sprint(seq)
		payload := node.Record{Stream: demoStream, Offset: a.Offset, Producer: p.id, Seq: seq, Data: p.data(seq)}.Encode()
		of := hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Submitted, Star: r.Star, ID: id, Payload: payload})
		if ok {
			hist.Add(cutlinetest.HistoryEvent{Op: cutlinetest.Acked, Star: r.Star, ID: id, Of: of, Pos: r.Position()})
		}
	}

	// The run ends as SIGTERM ends it: every node's star closes through
	// Finish; then the guarantees are checked over the zones and the store.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, n := range append(slices.DeleteFunc(slices.Clone(d.nodes), func(n *demoNode) bool { return n == d.successor }), d.successor) {
		if err := d.stop(sctx, n); err != nil {
			return fmt.Errorf("%s shuts down: %w", n.name, err)
		}
	}
	vs := cutlinetest.Check(ctx, cutlinetest.Run{History: &hist, Store: d.be.Store, Zones: d.be.Zones, Locate: node.Locate})
	d.findings = append(d.findings, fmt.Sprintf("cutline's six guarantees (cutlinetest.Check: every zone read directly, every fenced epoch fenced again, the store's history replayed): %d violations", len(vs)))
	for _, v := range vs {
		d.problems = append(d.problems, v.Error())
	}
	d.verdict = fmt.Sprintf("acknowledged %d, readable %d, lost %d, duplicated %d", len(acks), len(got), lost, duplicated)
	if lost > 0 || duplicated > 0 || len(got) != len(acks) || len(acks) != d.cfg.records {
		d.problems = append(d.problems, d.verdict)
	}
	if len(d.problems) > 0 {
		return fmt.Errorf("%w: %s", errDidNotHold, d.problems[0])
	}
	return nil
}

// header prints what the run is made of.
func (d *demo) header() {
	cfg := d.cfg
	fmt.Fprintf(d.out, "cutline broker demonstration (%s)\n", cfg.runID)
	if cfg.be.Etcd == "" {
		fmt.Fprintf(d.out, "  metadata: in-memory metastore (metastore/memstore)\n")
	} else {
		fmt.Fprintf(d.out, "  metadata: etcd at %s (metastore/etcd), keys under %s\n", cfg.be.Etcd, cfg.be.EtcdRoot)
	}
	if len(cfg.be.S3Endpoints) == 0 {
		fmt.Fprintf(d.out, "  objects:  %d filesystem zones (objstore/fs) under %s, keys under %s/\n", cfg.be.K, d.be.Dir, cfg.keyPrefix)
	} else {
		var where []string
		for i, b := range cfg.be.S3Buckets {
			ep := cfg.be.S3Endpoints[min(i, len(cfg.be.S3Endpoints)-1)]
			where = append(where, fmt.Sprintf("%s=%s/%s", node.ZoneName(i), ep, b))
		}
		fmt.Fprintf(d.out, "  objects:  %d S3 buckets (objstore/s3): %s, keys under %s/\n", cfg.be.K, strings.Join(where, " "), cfg.keyPrefix)
	}
	lat := "no injected latency"
	if cfg.latency > 0 {
		lat = fmt.Sprintf("%v–%v injected per object request", cfg.latency/2, cfg.latency*3/2)
	}
	fmt.Fprintf(d.out, "  K=%d W=%d (a slot dies at B=%d poisons), window %d, %s\n", cfg.be.K, cfg.be.W, cfg.be.K-cfg.be.W+1, cfg.be.Window, lat)
	fmt.Fprintf(d.out, "  the controller and %d broker nodes in this process (authority.Local), each node's HTTP API over TLS with a bearer token\n", demoNodes)
	var windows []string
	for i := range demoNodes {
		windows = append(windows, fmt.Sprintf("broker-%d %d", i+1, cfg.producerLimits(i).Window))
	}
	fmt.Fprintf(d.out, "  producer windows, as in a rolling change of -producer-window: %s\n", strings.Join(windows, ", "))
	fmt.Fprintf(d.out, "  stream %q: %d records from one producer over HTTP; the holder fails after %d, with %d appends in flight\n",
		demoStream, cfg.records, cfg.crashAfter, cfg.inflight)
	fmt.Fprintf(d.out, "  a position E/S is slot S of epoch E: an epoch is one incarnation of a writer, its slots hold one record each\n\n")
}

// report prints the timeline, the object requests, the findings and the
// verdict.
func (d *demo) report() {
	if d.t0.IsZero() {
		d.t0 = time.Now()
	}
	if d.streamed {
		d.rec.stopLive()
	} else {
		fmt.Fprintf(d.out, "timeline (seconds from the failure):\n")
		d.rec.print(d.out, d.t0, demoStream)
	}
	fmt.Fprintf(d.out, "\nobject requests by kind (cutline_broker_object_requests_total, all zones):\n")
	fmt.Fprintf(d.out, "  %-24s %8s %8s %10s %8s %8s   %s\n", "node", "create", "get", "get_range", "delete", "list", "creates by result")
	for _, n := range d.nodes {
		ops, creates := requestCounts(n.Node)
		role := ""
		switch n {
		case d.zombie:
			role = " (failed, zombie)"
		case d.successor:
			role = " (successor)"
		}
		var by []string
		for _, r := range slices.Sorted(maps.Keys(creates)) {
			by = append(by, fmt.Sprintf("%s %d", r, creates[r]))
		}
		fmt.Fprintf(d.out, "  %-24s %8d %8d %10d %8d %8d   %s\n", n.name+role, ops["create"], ops["get"], ops["get_range"], ops["delete"], ops["list"], strings.Join(by, ", "))
	}
	fmt.Fprintln(d.out)
	for _, f := range d.findings {
		fmt.Fprintf(d.out, "%s\n", f)
	}
	for _, pr := range d.problems {
		fmt.Fprintf(d.out, "FAILED: %s\n", pr)
	}
	if d.verdict != "" {
		fmt.Fprintf(d.out, "\n%s\n", d.verdict)
	}
}

// requestCounts sums a node's object requests over the zones, by kind,
// and its creates by result.
func requestCounts(n *node.Node) (ops, creates map[string]int) {
	ops, creates = map[string]int{}, map[string]int{}
	mfs, err := n.Metrics.Registry.Gather()
	if err != nil {
		return ops, creates
	}
	for _, mf := range mfs {
		if mf.GetName() != "cutline_broker_object_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var op, result string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "op":
					op = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			v := int(m.GetCounter().GetValue())
			ops[op] += v
			if op == "create" {
				creates[result] += v
			}
		}
	}
	return ops, creates
}

func seqRange(from, to uint64) []uint64 {
	out := make([]uint64, 0, to-from)
	for s := from; s < to; s++ {
		out = append(out, s)
	}
	return out
}

// span formats a range of numbers.
func span(first, last uint64) string {
	if first == last {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d–%d", first, last)
}

func zoneList(zones []objstore.Bucket) string {
	names := chain.Names(zones...)
	if len(names) == 0 {
		return "no zone"
	}
	return strings.Join(names, ", ")
}

// byStatus renders answers counted by HTTP status, in status order:
// "503 Service Unavailable 424, 409 Conflict 2".
func byStatus(m map[int]int) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s %d", code, http.StatusText(code), m[code]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func total(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// describeRebuild is a rebuild of a producer table in words.
func describeRebuild(rb batch.RebuildInfo, name string) string {
	if !rb.HadSnapshot {
		return fmt.Sprintf("%s rebuilt the producers of %s with no snapshot: replayed all %d records", name, rb.Stream, rb.Replayed)
	}
	return fmt.Sprintf("%s rebuilt the producers of %s from the snapshot at offset %d: replayed %d of %d records",
		name, rb.Stream, rb.Snapshot, rb.Replayed, rb.Next)
}
