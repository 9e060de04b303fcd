package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError is a flag or argument run refused before measuring anything.
type usageError struct{ Err error }

func (e *usageError) Error() string { return e.Err.Error() + " (-h lists the flags)" }
func (e *usageError) Unwrap() error { return e.Err }

// exitCode reports err on w and returns the exit status: 0 for none or
// -h, 2 for a usage error, 1 for a failed figure.
func exitCode(err error, w io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(w, "cutline-bench:", err)
	if _, ok := errors.AsType[*usageError](err); ok {
		return 2
	}
	return 1
}

// config sizes a run: the full run or -quick.
type config struct {
	quick bool

	// appends: rounds of each kind, and the length of one round
	memRounds, fsRounds, s3Rounds int
	memRound, fsRound, s3Round    time.Duration
	// pipeline: how long each latency runs
	pipeline time.Duration
	// latency: how long, and the rate of submissions
	latency     time.Duration
	latencyRate float64
	// allocs: appends measured
	allocs int
	// fence: latency per object request
	fenceLatency time.Duration
	// takeover: repetitions
	takeovers int
	// mint: mints (and as many raw transactions)
	mints int
	// heap: appends
	heapAppends int
	// idle: the idle period, and the TTL of the lease.Star's session
	idle    time.Duration
	idleTTL time.Duration
	// takeover-stream, takeover-history: the stream's lengths and the
	// star's histories (the first of each is the reference), latency per
	// object request and repetitions of each size
	streamSizes  []int
	historySizes []int
	scaleLatency time.Duration
	scaleReps    int
	// cost: appends counted
	costAppends int
	// streams: the stream counts (the first is the reference), the
	// offered rate, how long it is offered before the counts are read and
	// then until the star is killed, and the latency per object request
	streamCounts   []int
	streamsRate    float64
	streamsLoad    time.Duration
	streamsTail    time.Duration
	streamsLatency time.Duration
}

func fullConfig() config {
	return config{
		memRounds: 4, memRound: 400 * time.Millisecond,
		fsRounds: 4, fsRound: 500 * time.Millisecond,
		s3Rounds: 3, s3Round: time.Second,
		pipeline:     2 * time.Second,
		latency:      4 * time.Second,
		latencyRate:  400,
		allocs:       30_000,
		fenceLatency: 20 * time.Millisecond,
		takeovers:    5,
		mints:        300,
		heapAppends:  1_000_000,
		idle:         time.Minute,
		idleTTL:      10 * time.Second,
		streamSizes:  []int{1_000, 10_000, 100_000, 1_000_000},
		historySizes: []int{10, 1_000, 10_000},
		scaleLatency: 20 * time.Millisecond,
		scaleReps:    3,
		costAppends:  10_000,
		streamCounts: []int{10, 100, 1_000, 10_000},
		streamsRate:  5_000, streamsLoad: 5 * time.Second, streamsTail: 200 * time.Millisecond,
		streamsLatency: 20 * time.Millisecond,
	}
}

func quickConfig() config {
	return config{
		quick:     true,
		memRounds: 2, memRound: 50 * time.Millisecond,
		fsRounds: 2, fsRound: 50 * time.Millisecond,
		s3Rounds: 2, s3Round: 100 * time.Millisecond,
		pipeline:     200 * time.Millisecond,
		latency:      300 * time.Millisecond,
		latencyRate:  400,
		allocs:       1000,
		fenceLatency: time.Millisecond,
		takeovers:    1,
		mints:        10,
		heapAppends:  20_000,
		idle:         time.Second,
		idleTTL:      2 * time.Second,
		streamSizes:  []int{1_000, 10_000, 100_000, 1_000_000},
		historySizes: []int{10, 100, 1_000},
		scaleLatency: time.Millisecond,
		scaleReps:    1,
		costAppends:  1000,
		streamCounts: []int{10, 100},
		streamsRate:  1_000, streamsLoad: 300 * time.Millisecond, streamsTail: 50 * time.Millisecond,
		streamsLatency: time.Millisecond,
	}
}

// figure measures a group of rows.
type figure struct {
	name string
	run  func(s *scope, cfg config) ([]Row, error)
}

var figures = []figure{
	{"appends-mem", figAppendsMem},
	{"appends-fs", figAppendsFS},
	{"appends-s3", figAppendsS3},
	{"pipeline", figPipeline},
	{"latency", figLatency},
	{"allocs", figAllocs},
	{"fence", figFence},
	{"takeover", figTakeover},
	{"takeover-stream", figTakeoverStream},
	{"takeover-history", figTakeoverHistory},
	{"mint", figMint},
	{"heap", figHeap},
	{"idle", figIdle},
	{"batch", figBatch},
	{"cost", figCost},
	{"streams", figStreams},
	{"retention", figRetention},
	{"catchup", figCatchup},
}

func figureNames() []string {
	var out []string
	for _, f := range figures {
		out = append(out, f.name)
	}
	return out
}

// selected reports whether -only names the figure: its name, or the
// part before its dash ("appends").
func selected(only []string, name string) bool {
	if len(only) == 0 {
		return true
	}
	for _, o := range only {
		if o == name || strings.HasPrefix(name, o+"-") {
			return true
		}
	}
	return false
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cutline-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of a Markdown table")
	quick := fs.Bool("quick", false, "a small run: every figure, rough values (for tests)")
	only := fs.String("only", "", "comma-separated figures to run: "+strings.Join(figureNames(), ", ")+` (a name also selects the figures it prefixes with a dash: "appends", "takeover")`)
	verbose := fs.Bool("v", false, "log progress and server output to stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	prices := defaultPrices()
	priceFlags(fs, prices)
	applyStreams := streamsFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cutline-bench [-json] [-quick] [-only figure,...] [-v] [-price-<class>-<put|get> USD per 1,000 requests] [-streams-rate r] [-streams-load d] [-streams-counts n,...]")
		fs.PrintDefaults()
	}
	// A bad flag is named, not followed by the whole usage; -h prints it.
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return err
		}
		return &usageError{Err: err}
	}
	if fs.NArg() > 0 {
		return &usageError{Err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if err := checkPrices(prices); err != nil {
		return &usageError{Err: err}
	}
	var names []string
	if *only != "" {
		for n := range strings.SplitSeq(*only, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if !slices.ContainsFunc(figureNames(), func(f string) bool { return selected([]string{n}, f) }) {
				return &usageError{Err: fmt.Errorf("-only: no figure %q (figures: %s)", n, strings.Join(figureNames(), ", "))}
			}
			names = append(names, n)
		}
	}
	cfg := fullConfig()
	mode := "full"
	if *quick {
		cfg = quickConfig()
		mode = "quick"
	}
	if len(names) > 0 {
		mode += ", -only " + strings.Join(names, ",")
	}
	if err := applyStreams(&cfg, &mode); err != nil {
		return err
	}
	logw := io.Discard
	if *verbose {
		logw = stderr
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	res := &Result{Machine: machine(), Mode: mode}
	start := time.Now()
	for _, f := range figures {
		if !selected(names, f.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "cutline-bench: %s …\n", f.name)
		t0 := time.Now()
		rows, fail := runFigure(ctx, f, cfg, logw)
		res.Rows = append(res.Rows, rows...)
		if fail != nil {
			res.Failures = append(res.Failures, *fail)
			fmt.Fprintf(stderr, "cutline-bench: %s: %s\n", f.name, fail.Error)
		}
		fmt.Fprintf(stderr, "cutline-bench: %s done in %v\n", f.name, time.Since(t0).Round(time.Millisecond))
	}
	res.Elapsed = time.Since(start).Seconds()
	res.Cost = costModel(res.Rows, cfg, prices)
	if *asJSON {
		if err := res.writeJSON(stdout); err != nil {
			return err
		}
	} else {
		res.writeTable(stdout)
	}
	for _, f := range res.Failures {
		if !f.Skipped {
			return errors.New("some figures failed")
		}
	}
	return nil
}

// runFigure runs one figure in its own scope: whatever it started is
// stopped when it ends, and a Fatal, a Skip or a panic becomes a Failure.
func runFigure(ctx context.Context, f figure, cfg config, logw io.Writer) (rows []Row, fail *Failure) {
	s := newScope(ctx, f.name, logw)
	defer func() {
		if p := recover(); p != nil {
			rows = nil
			if a, ok := p.(abort); ok {
				fail = &Failure{Figure: f.name, Skipped: a.skip, Error: a.msg}
			} else {
				fail = &Failure{Figure: f.name, Error: fmt.Sprintf("panic: %v\n%s", p, debug.Stack())}
			}
		}
		s.close()
		runtime.GC() // the next figure starts without this one's garbage
	}()
	rows, err := f.run(s, cfg)
	if err != nil {
		return nil, &Failure{Figure: f.name, Error: err.Error()}
	}
	return rows, nil
}
