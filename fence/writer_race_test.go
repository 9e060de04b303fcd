package fence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// raceBound bounds one writer race, and haltBound the writer's halt once
// the fence returned (it meets the dead cut within a few requests). They
// only turn a hang into a failure with a message; nothing is timed.
const (
	raceBound = time.Minute
	haltBound = 20 * time.Second
)

// producer appends to a writer continuously, payload(i) at the i-th
// submission, until Submit refuses (the writer halted or closed), ctx ends,
// or it made limit submissions. It keeps every future so that the test can
// check every outcome. Before submitting slot holdAt (if set) it waits for
// resume, so that a test can pause the writer at a point of its choosing.
type producer struct {
	w       *chain.Writer
	mu      sync.Mutex
	futures []*chain.Future
	marks   map[uint64]chan struct{} // closed once the slot is submitted
	err     error                    // Submit's refusal
	done    chan struct{}
	resume  chan struct{}
}

type producerPlan struct {
	limit  uint64 // most submissions; 0 means none
	holdAt uint64 // 0: never hold
	marks  []uint64
}

func startProducer(ctx context.Context, w *chain.Writer, plan producerPlan) *producer {
	p := &producer{w: w, marks: map[uint64]chan struct{}{}, done: make(chan struct{}), resume: make(chan struct{})}
	for _, m := range plan.marks {
		p.marks[m] = make(chan struct{})
	}
	go func() {
		defer close(p.done)
		for i := uint64(0); i < plan.limit; i++ {
			if i == plan.holdAt && i > 0 {
				select {
				case <-p.resume:
				case <-ctx.Done():
					p.mu.Lock()
					p.err = ctx.Err()
					p.mu.Unlock()
					return
				}
			}
			f, err := w.Submit(ctx, payload(i))
			p.mu.Lock()
			if err != nil {
				p.err = err
				p.mu.Unlock()
				return
			}
			p.futures = append(p.futures, f)
			if ch, ok := p.marks[i]; ok {
				close(ch)
				delete(p.marks, i)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// reached blocks until slot n was submitted (or ctx ends, or the producer
// stopped before reaching it).
func (p *producer) reached(ctx context.Context, n uint64) {
	p.mu.Lock()
	ch, ok := p.marks[n]
	p.mu.Unlock()
	if ok {
		select {
		case <-ch:
		case <-p.done:
		case <-ctx.Done():
		}
	}
}

// acked blocks until slot n was submitted and has its outcome (or ctx
// ends, or the producer stopped before reaching it).
func (p *producer) acked(ctx context.Context, n uint64) {
	p.reached(ctx, n)
	p.mu.Lock()
	var f *chain.Future
	if n < uint64(len(p.futures)) {
		f = p.futures[n]
	}
	p.mu.Unlock()
	if f != nil {
		select {
		case <-f.Done():
		case <-ctx.Done():
		}
	}
}

// outcomes waits for the producer to stop and returns every future.
func (p *producer) outcomes() ([]*chain.Future, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.futures, p.err
}

// checkOutcomes asserts what a fenced writer's futures must show: exactly
// the slots below the cut are acknowledged, at their own positions, and
// every slot at or above the cut failed with ErrFenced (or was aborted, if
// aborted is set) — never acknowledged.
func checkOutcomes(t testing.TB, futures []*chain.Future, ep, cut uint64, aborted bool) (acked uint64) {
	t.Helper()
	for i, f := range futures {
		require.Equal(t, uint64(i), f.Slot(), "slots are assigned in order")
		select {
		case <-f.Done():
		default:
			t.Fatalf("future of slot %d still pending after the writer stopped", f.Slot())
		}
		pos, err := f.Result()
		if err == nil {
			require.Less(t, pos.Slot, cut, "an acknowledged slot is below the cut")
			require.Equal(t, chain.Position{Epoch: ep, Slot: f.Slot()}, pos)
			require.Equal(t, acked, pos.Slot, "acknowledgements form a prefix")
			acked++
			continue
		}
		if aborted && errors.Is(err, chain.ErrAborted) {
			continue
		}
		require.ErrorIs(t, err, chain.ErrFenced, "slot %d", f.Slot())
		require.GreaterOrEqual(t, f.Slot(), cut, "slot %d below the cut %d failed: %v", f.Slot(), cut, err)
	}
	return acked
}

// checkReadable reads the fenced epoch back from the backend buckets and
// compares every payload.
func (e *env) checkReadable(cut uint64) {
	e.t.Helper()
	r, err := chain.NewReader(e.minter, chain.MustZones(e.raw...), chain.ReaderOptions{})
	require.NoError(e.t, err)
	n := uint64(0)
	for f, err := range r.Flights(context.Background(), star, chain.Position{Epoch: e.rec.Epoch}) {
		require.NoError(e.t, err)
		require.Equal(e.t, chain.Position{Epoch: e.rec.Epoch, Slot: n}, f.Position)
		require.Equal(e.t, string(payload(n)), string(f.Payload))
		n++
	}
	require.Equal(e.t, cut, n, "the reader serves exactly [0, cut)")
}

// raceWriter runs a live pipelined writer over writerView and, once slot
// startAfter is decided, a fencer over fencerView. The writer never stops
// appending: the fence must end anyway (it plants a barrier ahead of a
// writer it keeps losing slots to). It checks that the writer halts exactly
// at the cut, every future's outcome and every invariant of the cut.
func raceWriter(t testing.TB, e *env, writerView, fencerView []objstore.Bucket, startAfter uint64) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), raceBound)
	defer cancel()
	w := e.writer(writerView, chain.WriterOptions{Backoff: clock.Backoff{Min: 100 * time.Microsecond, Max: 5 * time.Millisecond}})
	p := startProducer(ctx, w, producerPlan{limit: ^uint64(0), marks: []uint64{startAfter}})
	p.acked(ctx, startAfter)

	f := e.fencerOn(chain.MustZones(fencerView...), Options{Identity: "racing-fencer", Backoff: clock.Backoff{Min: 100 * time.Microsecond, Max: 5 * time.Millisecond}})
	rep, err := f.FenceReport(ctx, star, e.rec.Epoch)
	require.NoError(t, err)
	cut := rep.Cut

	// The writer must find the cut dead and halt there.
	select {
	case <-w.Halted():
	case <-time.After(haltBound):
		t.Fatalf("the writer did not halt within %v after the fence at %d (released %d)", haltBound, cut, w.Released())
	case <-ctx.Done():
		t.Fatalf("the writer did not halt after the fence at %d (released %d)", cut, w.Released())
	}
	futures, refusal := p.outcomes()
	require.ErrorIs(t, refusal, chain.ErrFenced, "Submit refuses once halted")
	require.NoError(t, w.Close(ctx))
	var fe *chain.FencedError
	require.ErrorAs(t, w.Err(), &fe)
	require.Equal(t, cut, fe.Slot, "the writer halts exactly at the cut")
	require.LessOrEqual(t, w.Released(), cut)

	acked := checkOutcomes(t, futures, e.rec.Epoch, cut, false)
	require.Equal(t, cut, acked, "every slot below the cut was acknowledged")
	require.GreaterOrEqual(t, acked, min(startAfter+1, uint64(len(futures))), "the fence started after slot %d was decided", startAfter)
	e.checkCut(cut)
	e.checkReadable(cut)
	lost := 0 // slots below the cut where the fencer's poison lost to the writer
	for s := uint64(0); s < cut; s++ {
		if countOf(e.state(s), 'P') > 0 {
			lost++
		}
	}
	t.Logf("cut %d: %d submitted, fence rounds %d, repaired %d, poisoned %d, barriers %d of %d tried, lost races below the cut %d, cut slot %s",
		cut, len(futures), rep.Rounds, rep.Repaired, rep.Poisoned, rep.Barriers, rep.BarrierAttempts, lost, e.state(cut))
	return cut
}

func TestWriterRace(t *testing.T) {
	cases := []struct{ k, w int }{{3, 2}, {1, 1}, {5, 3}}
	for _, c := range cases {
		for _, window := range []int{4, 17, 64} {
			for _, after := range []uint64{0, uint64(window) / 2, 3 * uint64(window)} {
				t.Run(fmt.Sprintf("K=%d,W=%d,window=%d,after=%d", c.k, c.w, window, after), func(t *testing.T) {
					e := newEnv(t, c.k, c.w, window)
					raceWriter(t, e, e.view(nil), e.view(nil), after)
				})
			}
		}
	}
}

// TestWriterRaceWithLatency gives every request a small random latency, so
// that the writer's creates are really in flight while the fencer reads and
// poisons the same slots: the fencer finds slots half written (repair),
// loses slots to the writer after poisoning one bucket, and wins slots
// whose flight is still on its way (which then lands beside the poison).
func TestWriterRaceWithLatency(t *testing.T) {
	cases := []struct{ k, w, window int }{{3, 2, 4}, {3, 2, 16}, {3, 2, 64}, {1, 1, 8}, {5, 3, 16}}
	for _, c := range cases {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("K=%d,W=%d,window=%d,seed=%d", c.k, c.w, c.window, seed), func(t *testing.T) {
				e := newEnv(t, c.k, c.w, c.window)
				writer := e.view(func(i int, b objstore.Bucket) objstore.Bucket {
					return latency.Wrap(b, latency.Options{Seed: seed*100 + uint64(i),
						Create: latency.Uniform(100*time.Microsecond, time.Millisecond), Default: latency.Uniform(0, 100*time.Microsecond)})
				})
				fencer := e.view(func(i int, b objstore.Bucket) objstore.Bucket {
					return latency.Wrap(b, latency.Options{Seed: seed*100 + 50 + uint64(i), Default: latency.Uniform(0, 50*time.Microsecond)})
				})
				raceWriter(t, e, writer, fencer, uint64(c.window))
			})
		}
	}
}
