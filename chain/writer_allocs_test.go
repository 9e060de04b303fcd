//go:build !race

package chain_test

import (
	"testing"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
)

// maxAllocsPerAppend bounds the allocations of one append through a
// steady pipeline on memblob buckets (K=3, W=2, 1 KiB): 4 today (the encoded
// flight, and the memblob buckets' copies of it, one per bucket; futures and
// keys are made 32 at a time), and one more is allowed before this fails.
const maxAllocsPerAppend = 5

// TestAppendAllocs fails when a pipelined append allocates more than
// maxAllocsPerAppend times (counted, not timed). The race detector
// allocates on its own, so the test is built without it (scripts/test.sh
// runs it so).
func TestAppendAllocs(t *testing.T) {
	const window = 64
	e := newEnv(t, 3)
	ctx := bounded(t) // made once: a context per append would count in the allocations
	buckets := memBuckets(3)
	rec, err := e.minter.Mint(ctx, star, epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: window, Prefix: e.keys.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	w, err := chain.NewWriter(rec, chain.MustZones(buckets...), chain.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	data := make([]byte, 1024)
	ring := make([]*chain.Future, window)
	n := 0
	appendOne := func() {
		cell := &ring[n%window]
		n++
		if *cell != nil {
			if _, err := (*cell).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		f, err := w.Submit(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		*cell = f
	}
	for range 4 * window { // fill the pipeline and the workers
		appendOne()
	}
	// AllocsPerRun rounds down: count 100 appends per run.
	const per = 100
	allocs := testing.AllocsPerRun(50, func() {
		for range per {
			appendOne()
		}
	}) / per
	t.Logf("%.2f allocations per append", allocs)
	if allocs > maxAllocsPerAppend {
		t.Fatalf("%.2f allocations per append, want at most %d", allocs, maxAllocsPerAppend)
	}
	for _, f := range ring {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
