package takeover_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
)

// maxRecords bounds what a producer sends; the tests stop it long before.
const maxRecords = 5000

// host is a star's serving side over a plain chain.Writer. A producer
// goroutine submits records pipelined (sequence i at offset i, which is
// also its slot); an acknowledger waits for the futures in slot order and
// answers the producer; an absorb loop takes the acknowledged records and,
// every `every` of them, covers them in the RefIndex and advances the
// epoch's checkpoint to the start of that batch: the checkpoint lags one
// batch behind what is covered, as a host that persists its cursor lazily
// would, and coverage lags the acknowledgements. What the producer sees is
// recorded in hist, for cutlinetest.Check. (cutlinetest's reference host
// advances the checkpoint past each batch and keeps no count of what it
// covered; this one keeps the lag the tests assert on.)
type host struct {
	t     *testing.T
	p     *party
	star  string
	w     *chain.Writer
	every int
	hist  *cutlinetest.History

	items      chan item     // submitted, in slot order
	absorbQ    chan item     // acknowledged, in slot order
	dead       chan struct{} // closed when the host dies: nothing more is absorbed
	cancel     context.CancelFunc
	prodDone   chan struct{}
	ackDone    chan struct{}
	absorbDone chan struct{}

	mu         sync.Mutex
	submitted  []item
	acked      map[string]chain.Position
	failed     []failure // in submission order
	changed    chan struct{}
	covered    int
	checkpoint uint64
	errs       []error // what the absorb loop met that it must not
}

type item struct {
	id      string
	payload []byte
	f       *chain.Future
	pos     chain.Position
	of      int // the Submitted event in hist
}

type failure struct {
	id  string
	err error
}

func startHost(t *testing.T, p *party, w *chain.Writer, every int, hist *cutlinetest.History) *host {
	ctx, cancel := context.WithCancel(context.Background())
	h := &host{
		t: t, p: p, star: w.Record().Star, w: w, every: every, hist: hist,
		items: make(chan item, maxRecords), absorbQ: make(chan item, maxRecords),
		dead: make(chan struct{}), cancel: cancel,
		prodDone: make(chan struct{}), ackDone: make(chan struct{}), absorbDone: make(chan struct{}),
		acked: map[string]chain.Position{}, changed: make(chan struct{}),
	}
	go h.produce(ctx)
	go h.acknowledge()
	go h.absorb()
	t.Cleanup(h.kill)
	return h
}

func (h *host) produce(ctx context.Context) {
	defer close(h.prodDone)
	defer close(h.items)
	for i := range maxRecords {
		it := item{id: fmt.Sprintf("p%d", i), payload: record(uint64(i), fmt.Sprintf("p%d", i))}
		f, err := h.w.Submit(ctx, it.payload)
		if err != nil {
			return // stopped, or the writer is gone
		}
		it.f = f
		it.of = h.hist.Add(cutlinetest.Event{Op: cutlinetest.Submitted, Host: h.p.name, Star: h.star, ID: it.id, Payload: it.payload})
		h.mu.Lock()
		h.submitted = append(h.submitted, it)
		h.mu.Unlock()
		h.items <- it
	}
}

// acknowledge answers the producer: it waits for each future in slot order
// and records the outcome.
func (h *host) acknowledge() {
	defer close(h.ackDone)
	defer close(h.absorbQ)
	for it := range h.items {
		pos, err := it.f.Wait(context.Background())
		ev := cutlinetest.Event{Op: cutlinetest.Acked, Host: h.p.name, Star: h.star, ID: it.id, Of: it.of, Pos: pos}
		if err != nil {
			ev.Op, ev.Pos, ev.Err = cutlinetest.Failed, chain.Position{}, err
		}
		h.hist.Add(ev)
		h.mu.Lock()
		if err != nil {
			h.failed = append(h.failed, failure{it.id, err})
		} else {
			h.acked[it.id] = pos
			close(h.changed)
			h.changed = make(chan struct{})
		}
		h.mu.Unlock()
		if err == nil {
			it.pos = pos
			h.absorbQ <- it
		}
	}
}

func (h *host) absorb() {
	defer close(h.absorbDone)
	ctx := context.Background()
	var batch []item
	for it := range h.absorbQ {
		batch = append(batch, it)
		select {
		case <-h.dead:
			continue
		default:
		}
		if len(batch) < h.every {
			continue
		}
		for _, b := range batch {
			if err := h.p.refs.Cover(ctx, h.star, chain.Flight{Position: b.pos, Payload: b.payload}); err != nil {
				h.fail(fmt.Errorf("cover %s at %v: %w", b.id, b.pos, err))
				return
			}
		}
		h.mu.Lock()
		h.covered += len(batch)
		prev := h.checkpoint
		h.mu.Unlock()
		if cp := batch[0].pos.Slot; cp > prev {
			if _, err := h.w.Checkpoint(ctx, cp); err != nil {
				h.fail(fmt.Errorf("advance the checkpoint to %d: %w", cp, err))
				return
			}
			h.mu.Lock()
			h.checkpoint = cp
			h.mu.Unlock()
		}
		batch = nil
	}
}

func (h *host) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err)
}

// waitAcks waits until n records are acknowledged.
func (h *host) waitAcks(ctx context.Context, n int) {
	h.t.Helper()
	for {
		h.mu.Lock()
		k, ch, errs := len(h.acked), h.changed, h.errs
		h.mu.Unlock()
		if len(errs) > 0 {
			h.t.Fatalf("host: %v", errs)
		}
		if k >= n {
			return
		}
		select {
		case <-ch:
		case <-h.ackDone:
			h.t.Fatalf("host stopped after %d acknowledgements, waiting for %d", k, n)
		case <-ctx.Done():
			h.t.Fatalf("%d acknowledgements, waiting for %d: %v", k, n, ctx.Err())
		}
	}
}

func (h *host) ackCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

// kill is the host's death: it stops absorbing, stops its producer and
// aborts its writer mid-flight (no Close, no final absorb), then waits for
// its goroutines. Idempotent.
func (h *host) kill() {
	select {
	case <-h.dead:
	default:
		close(h.dead)
	}
	h.cancel()
	h.w.Abort()
	<-h.prodDone
	<-h.ackDone
	<-h.absorbDone
}
