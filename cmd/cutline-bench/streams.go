package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

const (
	// streamsRecord is the size of one record of the streams figure.
	streamsRecord = 100
	// streamsLinger is the producer's Linger.
	streamsLinger = 5 * time.Millisecond
	// streamsTTL is the stars' session TTL: longer than any pause of
	// the run, since a session that lapsed would evict every stream.
	streamsTTL = 30 * time.Second
)

// streamsResult is what one stream count measured.
type streamsResult struct {
	n       int
	records int           // acknowledged in the measured load
	flights uint64        // the producer's flights in it
	load    time.Duration // from the first Add to the last acknowledgement
	meta    metacount.Stats
	put     int64 // bytes put: keys and values
	keys    int   // keys created
	live    int64 // growth of the live bytes: keys and values
	absorb  lease.AbsorbStats
	bound   int // AbsorbEvery + window
	// the star's covers in the load: the spans they carried, the
	// streams each touched (summed), and their flights
	covers coverCounts

	open     time.Duration
	openMeta metacount.Stats
	openTxns time.Duration // the sum of the open's transactions

	takeover     time.Duration
	takeMeta     metacount.Stats
	takeTxns     time.Duration
	takeObjects  benchfix.Requests
	takeDecision lease.Decision
	takeSettled  *settle.SettleReport // the settlement of the holder's epoch
}

// putCounter counts the bytes the transactions of a Store put (keys and
// values): what etcd appends to its log and keeps in its history until a
// compaction, beyond what stays live. It also sums the time transactions
// take: the writes of a bulk open go one after another, so their sum is
// the part of the open spent writing.
type putCounter struct {
	metastore.Store
	bytes   atomic.Int64
	txnTime atomic.Int64 // nanoseconds
}

func (p *putCounter) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	n := 0
	for _, op := range t.Then {
		if !op.Delete {
			n += len(op.Key) + len(op.Value)
		}
	}
	start := time.Now()
	rev, err := p.Store.Txn(ctx, t)
	p.txnTime.Add(int64(time.Since(start)))
	if err == nil {
		p.bytes.Add(int64(n))
	}
	return rev, err
}

func (p *putCounter) reset() {
	p.bytes.Store(0)
	p.txnTime.Store(0)
}

// Floor keeps the wrapped store's one-read Floor (metastore.Floorer):
// without it, every Floor through this wrapper would become a List.
func (p *putCounter) Floor(ctx context.Context, prefix, key string) (metastore.KV, error) {
	return metastore.Floor(ctx, p.Store, prefix, key)
}

// ReadMany keeps the wrapped store's batched reads (metastore.ManyReader):
// without it, a bulk open would read one key per request.
func (p *putCounter) ReadMany(ctx context.Context, reads []metastore.Read) ([]metastore.ReadResult, error) {
	return metastore.ReadMany(ctx, p.Store, reads)
}

// coverCounter is a star's Index, counting what the star's covers carry:
// the spans, and per call the streams they touch. A cover writes each
// stream it touches once, up to 128 streams a transaction, and a stream's
// refs take a key per 64 spans: the two explain the transactions and keys
// per record.
type coverCounter struct {
	lease.Index
	mu sync.Mutex
	n  coverCounts
}

func (c *coverCounter) CoverFlights(ctx context.Context, star string, flights []settle.Placed) error {
	touched := map[string]bool{}
	n := 0
	for _, f := range flights {
		for _, sp := range f.Spans {
			touched[sp.Stream] = true
			n++
		}
	}
	err := c.Index.CoverFlights(ctx, star, flights)
	if err == nil {
		c.mu.Lock()
		if c.n.covers == 0 || len(flights) < c.n.least {
			c.n.least = len(flights)
		}
		c.n.most = max(c.n.most, len(flights))
		c.n.covers, c.n.spans, c.n.streams = c.n.covers+1, c.n.spans+n, c.n.streams+len(touched)
		c.mu.Unlock()
	}
	return err
}

// coverCounts are what a coverCounter counted: covers, the spans they
// carried and the streams each touched (summed), and the fewest and
// most flights in one.
type coverCounts struct {
	covers, spans, streams int
	least, most            int
}

func (c *coverCounter) counts() coverCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// streamsStar is a lease.Star of the streams figure, its session and its
// counted Index.
type streamsStar struct {
	star   *lease.Star
	sess   metastore.Session
	covers *coverCounter
}

// startStreamsStar starts a star named name over store and zones (K=3,
// W=2, window 64, a RefIndex over bundles, lease.Star defaults).
func startStreamsStar(ctx context.Context, store metastore.Store, name string, zones []objstore.Bucket) (*streamsStar, error) {
	m, err := epoch.NewMinter(store, epoch.Options{Identity: name})
	if err != nil {
		return nil, err
	}
	cz, err := chain.NewZones(zones...)
	if err != nil {
		return nil, err
	}
	f, err := fence.New(m, cz, fence.Options{Identity: name})
	if err != nil {
		return nil, err
	}
	refs, err := settle.NewRefIndex(store, "", batch.Locate)
	if err != nil {
		return nil, err
	}
	st, err := settle.New(m, cz, refs, settle.Options{Fencer: f})
	if err != nil {
		return nil, err
	}
	sess, err := store.NewSession(ctx, streamsTTL)
	if err != nil {
		return nil, err
	}
	covers := &coverCounter{Index: refs}
	star, err := lease.Start(ctx, lease.Config{Star: name, Store: store, Session: sess, Minter: m, Settler: st, Index: covers,
		Constants: constants(zones, window)}, lease.Options{})
	if err != nil {
		_ = sess.Close(ctx)
		return nil, err
	}
	return &streamsStar{star: star, sess: sess, covers: covers}, nil
}

// kill stops the star as a crash would, and ends its session: its
// leases and its registry entry go with it.
func (s *streamsStar) kill(ctx context.Context) {
	s.star.Abort()
	_ = s.sess.Close(ctx)
}

func streamNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%05d", i)
	}
	return out
}

// firstError returns the first error of a bulk open and how many failed.
func firstError(names []string, errs []error) error {
	failed, first := 0, -1
	for i, err := range errs {
		if err != nil {
			if first < 0 {
				first = i
			}
			failed++
		}
	}
	if first < 0 {
		return nil
	}
	return fmt.Errorf("%d of %d streams failed; %s: %w", failed, len(names), names[first], errs[first])
}

// offer adds 100-byte records to the streams round robin, starting at
// the from-th, at rate records/s for d, and returns how many it added. A
// producer that cannot keep up makes Add wait, and the rate achieved
// falls below the rate offered.
func offer(ctx context.Context, p *batch.Producer, names []string, from int, rate float64, d time.Duration) (int, error) {
	rec := make([]byte, streamsRecord)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	added := 0
	for {
		el := time.Since(start)
		if el >= d {
			return added, nil
		}
		for due := int(el.Seconds() * rate); added < due; added++ {
			if _, err := p.Add(ctx, names[(from+added)%len(names)], rec); err != nil {
				return added, err
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return added, ctx.Err()
		}
	}
}

// live counts the keys under the store's root and their bytes.
func live(ctx context.Context, st metastore.Store) (int, int64, error) {
	kvs, _, err := st.List(ctx, "")
	var b int64
	for _, kv := range kvs {
		b += int64(len(kv.Key) + len(kv.Value))
	}
	return len(kvs), b, err
}

// streamsRun measures one stream count, under its own root of the etcd
// member: a star opens n fresh streams; a producer offers records to
// them round robin for the load period, then every record is
// acknowledged and covered; the load goes on for a moment and the star
// is killed in the middle of it; a successor takes every stream over.
func streamsRun(ctx context.Context, cli *clientv3.Client, n int, cfg config) (streamsResult, error) {
	r := streamsResult{n: n, bound: lease.DefaultAbsorbEvery + window}
	base, err := etcd.New(cli, etcd.Options{Root: fmt.Sprintf("/streams-%d/", n)})
	if err != nil {
		return r, err
	}
	puts := &putCounter{Store: base}
	meta := metacount.Wrap(puts)
	_, counted, zones := countedZones(cfg.streamsLatency)
	names := streamNames(n)

	holder, err := startStreamsStar(ctx, meta, "holder", zones)
	if err != nil {
		return r, err
	}
	defer holder.kill(ctx)
	meta.Reset()
	puts.reset()
	start := time.Now()
	tens, errs := holder.star.OpenMany(ctx, names, lease.OpenOptions{})
	r.open, r.openMeta, r.openTxns = time.Since(start), meta.Stats(), time.Duration(puts.txnTime.Load())
	if err := firstError(names, errs); err != nil {
		return r, fmt.Errorf("fresh open: %w", err)
	}
	for _, t := range tens {
		if t.Decision != lease.Fresh || t.Next != 0 {
			return r, fmt.Errorf("fresh open of %s: %s at %d", t.Stream, t.Decision, t.Next)
		}
	}

	keys0, live0, err := live(ctx, base)
	if err != nil {
		return r, err
	}
	p, err := batch.New(holder.star, batch.Options{Linger: streamsLinger})
	if err != nil {
		return r, err
	}
	defer func() { _ = p.Close(ctx) }()
	meta.Reset()
	puts.reset()
	start = time.Now()
	added, err := offer(ctx, p, names, 0, cfg.streamsRate, cfg.streamsLoad)
	if err != nil {
		return r, err
	}
	if err := p.Flush(ctx); err != nil {
		return r, err
	}
	r.load = time.Since(start)
	// The records acknowledged since the last absorb are covered too, so
	// that the keys counted are those of every record.
	if err := holder.star.Absorb(ctx); err != nil {
		return r, err
	}
	r.meta, r.put, r.absorb = meta.Stats(), puts.bytes.Load(), holder.star.AbsorbStats()
	r.covers = holder.covers.counts()
	st := p.Stats()
	if added == 0 || st.Failed != 0 || int(st.Records) != added {
		return r, fmt.Errorf("load: %d records added, %d acknowledged, %d failed", added, st.Records, st.Failed)
	}
	r.records, r.flights = added, st.Flights
	keys1, live1, err := live(ctx, base)
	if err != nil {
		return r, err
	}
	r.keys, r.live = keys1-keys0, live1-live0

	// Killed under load: acknowledged flights not yet absorbed, and
	// appends in flight, are the successor's to settle.
	tail, err := offer(ctx, p, names, added, cfg.streamsRate, cfg.streamsTail)
	if err != nil {
		return r, err
	}
	holder.kill(ctx)
	_ = p.Close(ctx) // what was in flight fails with the star

	succ, err := startStreamsStar(ctx, meta, "successor", zones)
	if err != nil {
		return r, err
	}
	defer succ.kill(ctx)
	meta.Reset()
	puts.reset()
	benchfix.Reset(counted)
	start = time.Now()
	tens, errs = succ.star.OpenMany(ctx, names, lease.OpenOptions{})
	r.takeover, r.takeMeta, r.takeObjects = time.Since(start), meta.Stats(), benchfix.Count(counted)
	r.takeTxns = time.Duration(puts.txnTime.Load())
	if err := firstError(names, errs); err != nil {
		return r, fmt.Errorf("takeover: %w", err)
	}
	// Every acknowledged record is in the stream the successor took; of
	// those added after, only some are.
	for i, t := range tens {
		acked := uint64(added / n)
		if i < added%n {
			acked++
		}
		all := uint64((added + tail) / n)
		if i < (added+tail)%n {
			all++
		}
		if t.Predecessor == nil || t.Predecessor.Star != "holder" || t.Next < acked || t.Next > all {
			return r, fmt.Errorf("takeover of %s: %s at %d, want %d to %d after the holder", t.Stream, t.Decision, t.Next, acked, all)
		}
	}
	r.takeDecision, r.takeSettled = tens[0].Decision, tens[0].Settled
	return r, nil
}

// figStreams: many streams on one lease.Star, on an embedded etcd
// member, three in-memory zones each 20 ms per request: for each stream
// count, the metastore cost per record of 100-byte records offered at a
// fixed rate through batch.Producer (Linger 5 ms), the largest absorb
// backlog, a fresh open of every stream, and a successor's takeover of
// every stream of a killed star; each beside the first count.
func figStreams(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	cli := etcdClient(s)
	var res []streamsResult
	for _, n := range cfg.streamCounts {
		r, err := streamsRun(ctx, cli, n, cfg)
		if err != nil {
			return nil, fmt.Errorf("%d streams: %w", n, err)
		}
		res = append(res, r)
		runtime.GC() // the next count starts without this one's garbage
	}
	var rows []Row
	for i := range res {
		rows = append(rows, streamsRows(&res[i], &res[0], cfg)...)
	}
	return rows, nil
}

func perRecord(v float64, r *streamsResult) float64 { return v / float64(r.records) }

// streamsRows are the rows of one stream count, beside those of the
// reference count ref (the first; r == ref: this is it).
func streamsRows(r, ref *streamsResult, cfg config) []Row {
	id := fmt.Sprintf("streams.%d.", r.n)
	what := "streams " + thousands(int64(r.n)) + ": "
	refLabel := "same at " + thousands(int64(ref.n)) + " streams"
	vs := func(row Row, refValue float64) Row {
		if r == ref {
			row.Note = strings.TrimSuffix("reference count; "+row.Note, "; ")
			return row
		}
		return row.ref(refLabel, refValue, row.Unit)
	}
	load := fmt.Sprintf("%s records in %s flights", thousands(int64(r.records)), thousands(int64(r.flights)))
	c := r.covers
	rate := float64(r.records) / r.load.Seconds()
	return []Row{
		Row{ID: id + "rate", Figure: what + "records/s acknowledged", Value: rate, Unit: "records/s"}.
			ref("offered", cfg.streamsRate, "records/s").
			note("%s, %s each, Linger %v; %v per object request", load, batchSize(streamsRecord), streamsLinger, cfg.streamsLatency),
		vs(Row{ID: id + "txns", Figure: what + "metastore transactions per record", Value: perRecord(float64(r.meta.Txns), r), Unit: "txns"}.
			note("%s transactions over %s; %d covers of %d to %d flights, %s spans (%s per record), %s streams touched per cover",
				thousands(int64(r.meta.Txns)), load, c.covers, c.least, c.most, thousands(int64(c.spans)), num(perRecord(float64(c.spans), r)),
				num(float64(c.streams)/float64(max(1, c.covers)))), perRecord(float64(ref.meta.Txns), ref)),
		vs(Row{ID: id + "reads", Figure: what + "metastore reads per record", Value: perRecord(float64(r.meta.Reads()), r), Unit: "reads"}.
			note("%d gets, %d floors, %d lists, %d batched reads", r.meta.Gets, r.meta.Floors, r.meta.Lists, r.meta.Manys), perRecord(float64(ref.meta.Reads()), ref)),
		vs(Row{ID: id + "keys", Figure: what + "metastore keys created per record", Value: perRecord(float64(r.keys), r), Unit: "keys"}.
			note("%s keys, every record covered", thousands(int64(r.keys))), perRecord(float64(ref.keys), ref)),
		vs(Row{ID: id + "live", Figure: what + "live bytes in etcd per record", Value: perRecord(float64(r.live), r), Unit: "bytes"}.
			note("keys and values under the root, after the load less before"), perRecord(float64(ref.live), ref)),
		vs(Row{ID: id + "put", Figure: what + "bytes put in etcd per record", Value: perRecord(float64(r.put), r), Unit: "bytes"}.
			note("keys and values of every put: etcd logs them and keeps them in its history until a compaction"), perRecord(float64(ref.put), ref)),
		Row{ID: id + "backlog", Figure: what + "largest absorb backlog", Value: float64(r.absorb.MaxPending), Unit: "flights"}.
			ref("AbsorbEvery + window", float64(r.bound), "flights").
			note("%d absorbs of %d flights, %d failed; %d answers waited for room", r.absorb.Absorbs, r.absorb.Flights, r.absorb.Failures, r.absorb.Waits),
		vs(Row{ID: id + "open", Figure: what + "fresh open of every stream (OpenMany)", Value: ms(r.open), Unit: "ms"}.
			note("%d gets, %d floors, %d batched reads; %d transactions, %s ms in all", r.openMeta.Gets, r.openMeta.Floors, r.openMeta.Manys, r.openMeta.Txns, num(ms(r.openTxns))), ms(ref.open)),
		vs(Row{ID: id + "open.txns", Figure: what + "fresh open: metastore transactions", Value: float64(r.openMeta.Txns), Unit: "txns"}, float64(ref.openMeta.Txns)),
		vs(Row{ID: id + "takeover", Figure: what + "takeover of every stream of a killed star (OpenMany)", Value: ms(r.takeover), Unit: "ms"}.
			note("%s (%s); %d gets, %d floors, %d batched reads; %d transactions, %s ms in all; %s", r.takeDecision, settledString(r.takeSettled), r.takeMeta.Gets, r.takeMeta.Floors, r.takeMeta.Manys, r.takeMeta.Txns, num(ms(r.takeTxns)), r.takeObjects), ms(ref.takeover)),
		vs(Row{ID: id + "takeover.txns", Figure: what + "takeover: metastore transactions", Value: float64(r.takeMeta.Txns), Unit: "txns"}, float64(ref.takeMeta.Txns)),
	}
}

// settledString describes the settlement a takeover ran.
func settledString(rep *settle.SettleReport) string {
	if rep == nil {
		return "no settlement"
	}
	rounds := 0
	if rep.Fence != nil {
		rounds = rep.Fence.Rounds
	}
	return fmt.Sprintf("one settlement: %d fence rounds, %d flights covered", rounds, rep.Covered)
}

// streamsColumns are the compact table's columns: a heading, the row
// each reads and how it prints the row's value.
var streamsColumns = []struct {
	head, row string
	cell      func(r Row) string
}{
	{"rec/s", "rate", func(r Row) string { return num(r.Value) }},
	{"txn/rec", "txns", func(r Row) string { return num(r.Value) }},
	{"read/rec", "reads", func(r Row) string { return num(r.Value) }},
	{"key/rec", "keys", func(r Row) string { return num(r.Value) }},
	{"B/rec", "live", func(r Row) string { return num(r.Value) }},
	{"put B/rec", "put", func(r Row) string { return num(r.Value) }},
	{"backlog", "backlog", func(r Row) string { return num(r.Value) + "/" + num(r.RefValue) }},
	{"open", "open", func(r Row) string { return num(r.Value) + " ms" }},
	{"open txn", "open.txns", func(r Row) string { return num(r.Value) }},
	{"takeover", "takeover", func(r Row) string { return num(r.Value) + " ms" }},
	{"take txn", "takeover.txns", func(r Row) string { return num(r.Value) }},
}

// writeStreamsTable prints the streams figure's rows again as one line
// per stream count, then the last count's ratios to the first, and a
// legend. It prints nothing when the figure did not run.
func writeStreamsTable(w io.Writer, rows []Row) {
	byID := map[string]Row{}
	var counts []string
	for _, r := range rows {
		byID[r.ID] = r
		if n, ok := strings.CutPrefix(r.ID, "streams."); ok {
			if n, ok := strings.CutSuffix(n, ".rate"); ok {
				counts = append(counts, n)
			}
		}
	}
	if len(counts) == 0 {
		return
	}
	fmt.Fprint(w, "\n| streams |")
	for _, c := range streamsColumns {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprint(w, "\n| ---: |")
	for range streamsColumns {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w)
	for _, n := range counts {
		v, _ := strconv.ParseInt(n, 10, 64)
		fmt.Fprintf(w, "| %s |", thousands(v))
		for _, c := range streamsColumns {
			fmt.Fprintf(w, " %s |", c.cell(byID["streams."+n+"."+c.row]))
		}
		fmt.Fprintln(w)
	}
	if last := counts[len(counts)-1]; len(counts) > 1 {
		first, _ := strconv.ParseInt(counts[0], 10, 64)
		lastN, _ := strconv.ParseInt(last, 10, 64)
		var parts []string
		for _, c := range streamsColumns {
			if r := byID["streams."+last+"."+c.row]; r.Ratio != 0 && c.row != "rate" && c.row != "backlog" {
				parts = append(parts, fmt.Sprintf("%s ×%s", c.head, num(r.Ratio)))
			}
		}
		fmt.Fprintf(w, "\n%s ÷ %s streams: %s\n", thousands(lastN), thousands(first), strings.Join(parts, ", "))
	}
	fmt.Fprint(w, `
- rec/s: records acknowledged per second, 100 B each, offered at a fixed rate through batch.Producer (Linger 5 ms) on one lease.Star
- txn/rec, read/rec: metastore transactions and reads (gets, floors, lists) per record under that load, its absorbs included
- key/rec: metastore keys created per record; B/rec: live bytes (keys and values) added per record; put B/rec: bytes of every put per record, which etcd keeps in its history until a compaction
- backlog: the largest absorb backlog (acknowledged flights not yet covered) / AbsorbEvery + window
- open: OpenMany of every stream on a fresh star; takeover: a successor's OpenMany of every stream of a killed star (Abort, session revoked), its fence and settle included; txn: their metastore transactions
`)
}

// streamsFlags registers the streams figure's flags; the function it
// returns applies those that were set to cfg, after checking them, and
// says which in the run's mode.
func streamsFlags(fs *flag.FlagSet) func(cfg *config, mode *string) error {
	rate := fs.Float64("streams-rate", 0, "streams figure: records/s offered (0: 5,000; 1,000 with -quick)")
	load := fs.Duration("streams-load", 0, "streams figure: how long the load runs at each stream count (0: 5s; 300ms with -quick)")
	counts := fs.String("streams-counts", "", "streams figure: comma-separated stream counts, the first the reference (default 10,100,1000,10000; 10,100 with -quick)")
	return func(cfg *config, mode *string) error {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "streams-") {
				set = append(set, "-"+f.Name+" "+f.Value.String())
			}
		})
		switch {
		case *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0):
			return &cutline.ConfigError{Field: "-streams-rate", Value: *rate, Reason: "a rate is a finite number ≥ 0 (0: the default)"}
		case *rate > 0:
			cfg.streamsRate = *rate
		}
		switch {
		case *load < 0:
			return &cutline.ConfigError{Field: "-streams-load", Value: load.String(), Reason: "a duration ≥ 0 (0: the default)"}
		case *load > 0:
			cfg.streamsLoad = *load
		}
		if *counts != "" {
			var ns []int
			for c := range strings.SplitSeq(*counts, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(c))
				if err != nil || n < 1 || n > lease.MaxOpenMany {
					return &cutline.ConfigError{Field: "-streams-counts", Value: *counts, Reason: fmt.Sprintf("stream counts are integers from 1 to %d", lease.MaxOpenMany), Err: err}
				}
				ns = append(ns, n)
			}
			cfg.streamCounts = ns
		}
		if len(set) > 0 {
			*mode += ", " + strings.Join(set, " ")
		}
		if float64(cfg.streamsLoad)/float64(time.Second)*cfg.streamsRate < 1 {
			return errors.New("-streams-rate × -streams-load: less than one record")
		}
		return nil
	}
}
