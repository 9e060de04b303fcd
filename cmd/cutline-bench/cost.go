package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/metastore/memstore"
)

// PriceClass is one storage class's request prices, in US dollars per
// 1,000 requests. PUT-class requests are creates and lists (S3 bills
// PUT, COPY, POST and LIST alike); GET-class requests are reads (GET,
// ranged GET). Deletes are free on S3.
type PriceClass struct {
	Name string  `json:"name"`
	Flag string  `json:"-"`
	Put  float64 `json:"put_per_1000"`
	Get  float64 `json:"get_per_1000"`
}

// defaultPrices are list prices (us-east-1) when this command was
// written; they change, and the output says so.
func defaultPrices() []PriceClass {
	return []PriceClass{
		{Name: "S3 Standard", Flag: "standard", Put: 0.005, Get: 0.0004},
		{Name: "S3 Express One Zone", Flag: "express", Put: 0.00113, Get: 0.00003},
	}
}

// priceFlags registers -price-<class>-put and -price-<class>-get for
// every class of prices, which they set.
func priceFlags(fs *flag.FlagSet, prices []PriceClass) {
	for i := range prices {
		p := &prices[i]
		fs.Float64Var(&p.Put, "price-"+p.Flag+"-put", p.Put, fmt.Sprintf("%s: USD per 1,000 PUT-class requests (creates, lists); check the current list price", p.Name))
		fs.Float64Var(&p.Get, "price-"+p.Flag+"-get", p.Get, fmt.Sprintf("%s: USD per 1,000 GET-class requests (reads); check the current list price", p.Name))
	}
}

// checkPrices refuses a negative or non-finite price.
func checkPrices(prices []PriceClass) error {
	for _, p := range prices {
		for kind, v := range map[string]float64{"put": p.Put, "get": p.Get} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return &cutline.ConfigError{Field: "-price-" + p.Flag + "-" + kind, Value: v, Reason: "a price is a finite number ≥ 0"}
			}
		}
	}
	return nil
}

// CostLine is the object-store request cost of one thing (a million
// appends, a takeover, a month of idleness): its requests by billing
// class and their price at each class, in the order of Cost.Classes.
type CostLine struct {
	ID      string    `json:"id"`
	What    string    `json:"what"`
	Put     float64   `json:"put_requests"`
	Get     float64   `json:"get_requests"`
	Deletes float64   `json:"delete_requests"`
	USD     []float64 `json:"usd"`
	From    string    `json:"from"` // the row measured
}

// Cost is the cost model: request counts measured in this run, priced.
type Cost struct {
	Classes []PriceClass `json:"classes"`
	Lines   []CostLine   `json:"lines"`
	Notes   []string     `json:"notes"`
}

// month is what "per month" means: 30 days.
const month = 30 * 24 * time.Hour

// costModel prices the request counts of the rows the run measured:
// appends (cost.append), takeovers, planned rolls and idleness. Lines
// whose row was not measured (-only) are left out.
func costModel(rows []Row, cfg config, prices []PriceClass) *Cost {
	byID := map[string]Row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	c := &Cost{Classes: prices}
	line := func(id, what, from string, o benchfix.Requests, scale float64) {
		l := CostLine{ID: id, What: what, From: from,
			Put: float64(o.Creates+o.Lists) * scale, Get: float64(o.Reads) * scale, Deletes: float64(o.Deletes) * scale}
		for _, p := range prices {
			l.USD = append(l.USD, (l.Put*p.Put+l.Get*p.Get)/1000)
		}
		c.Lines = append(c.Lines, l)
	}
	add := func(id, what string, scale float64) {
		r, ok := byID[id]
		if !ok || r.Objects == nil {
			return
		}
		line("cost."+strings.TrimPrefix(strings.TrimSuffix(id, ".requests"), "cost."), what, id, *r.Objects, scale)
	}
	// Appends: K creates per flight, one per zone, is what the writer
	// sends when every zone keeps up; a zone whose turn comes after the
	// slot was decided is skipped, so the measured count may be lower.
	if r, ok := byID["cost.append"]; ok && r.Objects != nil && cfg.costAppends > 0 {
		bound := *r.Objects
		bound.Creates = k * cfg.costAppends
		line("cost.append", "1,000,000 appends at K creates per flight (K=3, W=2, 1 KiB)", "cost.append", bound, 1e6/float64(cfg.costAppends))
		line("cost.append.measured", "1,000,000 appends, creates as measured in this run", "cost.append", *r.Objects, 1e6/float64(cfg.costAppends))
	}
	add("takeover.requests", "one takeover: 256 committed slots, a ragged window, 16 uncovered", 1)
	if n := len(cfg.streamSizes); n > 0 {
		last := int64(cfg.streamSizes[n-1])
		add(fmt.Sprintf("takeover.stream.%d.requests", last), fmt.Sprintf("one takeover: a stream of %s records", thousands(last)), 1)
	}
	if n := len(cfg.historySizes); n > 0 {
		last := int64(cfg.historySizes[n-1])
		add(fmt.Sprintf("takeover.history.%d.requests", last), fmt.Sprintf("one takeover after %s past epochs", thousands(last)), 1)
	}
	add("roll.requests", "one planned roll, nothing in flight", 1)
	perMonth := float64(month) / float64(cfg.idle)
	add("idle.writer", "idle chain.Writer, per chain per month", perMonth)
	add("idle.roller", "idle roll.Roller, per chain per month", perMonth)
	add("idle.star", fmt.Sprintf("idle lease.Star (%d open streams), per chain per month", idleStreams), perMonth)
	add("idle.authority", "idle authority controller and holder, per domain per month", perMonth)
	if rd := cfg.retentionDay(); rd.day > 0 {
		add("retention.maintenance", fmt.Sprintf("retention maintenance (compact, trim, collect) per month at %d records/min", rd.perMinute),
			float64(month)/float64(rd.day))
	}
	if len(c.Lines) == 0 {
		return nil
	}
	var ps []string
	for _, p := range prices {
		ps = append(ps, fmt.Sprintf("%s $%s PUT, $%s GET per 1,000", p.Name, strconv.FormatFloat(p.Put, 'f', -1, 64), strconv.FormatFloat(p.Get, 'f', -1, 64)))
	}
	c.Notes = append(c.Notes,
		"prices: "+strings.Join(ps, "; ")+". Defaults are list prices (us-east-1) when this command was written: check the current ones and set them with -price-standard-put, -price-standard-get, -price-express-put, -price-express-get",
		"PUT class: creates and lists; GET class: reads; deletes are counted but priced at 0 (free on S3). Request counts are measured in this run on counted in-memory zones; idle counts are scaled from the idle period to 30 days",
		"appends: K creates per flight is the writer's most (one per zone); it skips a zone whose turn comes after W others decided the slot, which a loaded machine or a lagging zone makes more frequent, hence the measured line",
		"not modelled: bytes stored, charges per GB transferred, uploaded or retrieved, metastore (etcd) costs")
	if r, ok := byID["idle.star.keepalives"]; ok {
		c.Notes = append(c.Notes, fmt.Sprintf("a lease.Star's metastore session sends keep-alives whatever it does: %s in %v, %s per month (not object requests; not priced)",
			num(r.Value), cfg.idle, num(r.Value*perMonth)))
	}
	return c
}

func (c *Cost) writeTable(w io.Writer) {
	fmt.Fprint(w, "| object-store request cost | PUT-class requests | GET-class requests |")
	for _, p := range c.Classes {
		fmt.Fprintf(w, " %s, USD |", p.Name)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| --- | ---: | ---: |")
	for range c.Classes {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w)
	for _, l := range c.Lines {
		fmt.Fprintf(w, "| %s | %s | %s |", l.What, num(l.Put), num(l.Get))
		for _, usd := range l.USD {
			fmt.Fprintf(w, " %s |", usdString(usd))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, n := range c.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

// usdString prints an amount of dollars: cents from a dollar up, four
// significant digits below, never with an exponent.
func usdString(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.*f", 3-int(math.Floor(math.Log10(v))), v)
	}
}

// figCost: the object requests of appends, per append, on counted
// in-memory zones (K=3, W=2, 1 KiB, window 64): the input of the cost
// model's append line. The writer creates one copy per zone of every
// flight (fewer when a zone's turn comes after the slot was decided by W
// others: WriterStats.Skipped), and reads nothing.
func figCost(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	if err != nil {
		return nil, err
	}
	_, counted, views := countedZones(0)
	wr, err := newWriter(ctx, m, views, window)
	if err != nil {
		return nil, err
	}
	n, _, err := pipeline(ctx, wr, make([]byte, payload), pipe{n: cfg.costAppends})
	if cerr := wr.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if n != cfg.costAppends {
		return nil, fmt.Errorf("cost: %d appends of %d", n, cfg.costAppends)
	}
	o := benchfix.Count(counted)
	return []Row{
		Row{ID: "cost.append", Figure: "object requests per append (K=3, W=2)", Value: float64(o.Total()) / float64(n), Unit: "requests"}.
			ref("K creates per flight", k, "requests").objects(o).
			note("%s over %s appends and the writer's Close; %d copies skipped, their slot decided before the bucket's turn", o, thousands(int64(n)), wr.Stats().Skipped),
	}, nil
}
