package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// broker is the host of the demonstration: a tiny log broker process that
// serves one stream from its star's chain. It is what a real host (a
// message broker, a queue) does with the packages, reduced to the steps
// that matter for a takeover:
//
//   - open: settle every epoch that may hold the stream's acknowledged
//     records (the last writer's and its own), find where the stream
//     continues, rebuild the producers' state, mint an epoch, record itself
//     as the stream's writer;
//   - Produce: deduplicate by (producer, sequence), assign the next offset,
//     append the record through a pipelined chain.Writer;
//   - acknowledge in order, then absorb: cover acknowledged flights in the
//     RefIndex and advance the epoch's checkpoint, in batches, lagging
//     behind the acknowledgements;
//   - crash (abort, nothing else) or shut down cleanly.
type broker struct {
	cfg     brokerConfig
	rec     *epoch.Record
	w       *chain.Writer
	reader  *chain.Reader
	fencer  *fence.Fencer
	base    uint64 // the stream offset of slot 0 of this broker's epoch
	absorbM sync.Mutex

	ctx     context.Context // cancelled when the broker dies
	cancel  context.CancelFunc
	pending chan *appendReq // appends in slot order, for run
	runDone chan struct{}

	submitMu sync.Mutex // orders offset assignment with slot assignment
	next     uint64     // next offset to assign
	closed   bool

	mu         sync.Mutex
	seen       map[producerSeq]uint64 // in the stream: acknowledged or covered
	inflight   map[producerSeq]*ack
	unabsorbed []chain.Flight
	checkpoint uint64
	acked      int
	absorbed   int
	err        error // the first failure of the absorb path
	// absorbing counts the absorbs run has started and not finished;
	// absorbIdle is signalled when it drops to 0.
	absorbing  int
	absorbIdle *sync.Cond
}

// brokerConfig is what one broker process is started with.
type brokerConfig struct {
	Star   string
	Stream string
	Store  metastore.Store
	Minter *epoch.Minter
	Refs   *settle.RefIndex
	// Buckets is this process's view of the zones, in zone order.
	Buckets     []objstore.Bucket
	Keys        wire.Keys
	Class       string
	W, Window   int
	AbsorbEvery int
}

// openReport says what opening the stream took.
type openReport struct {
	Previous  string          // the stream's last writer, "" for a new stream
	Settled   []settle.Report // epochs fenced and settled before serving
	Next      uint64          // where the stream continues
	Producers int             // records the producer state was rebuilt from
	Epoch     *epoch.Record   // the epoch minted for this tenure
	Duration  time.Duration
}

type producerSeq struct {
	producer string
	seq      uint64
}

// ack is the broker's answer to one Produce.
type ack struct {
	done   chan struct{}
	offset uint64
	// dup: the record was in the stream already (an earlier copy was
	// acknowledged or covered by settlement); it was acknowledged at that
	// offset and not appended again.
	dup bool
	err error
}

func (a *ack) resolve(off uint64, err error) {
	a.offset, a.err = off, err
	close(a.done)
}

type appendReq struct {
	f       *chain.Future
	key     producerSeq
	off     uint64
	payload []byte
	ack     *ack
}

var errBrokerDown = errors.New("broker is down")

// writerRecord is the host's record of who writes a stream (what the
// library's planned tenure layer keeps as streams/<id>/writer).
type writerRecord struct {
	metastore.Header
	Star  string `json:"star"`
	Epoch uint64 `json:"epoch"`
}

const writerKind = "stream-writer"

func writerKey(stream string) string { return "streams/" + stream + "/writer" }

// openBroker takes the stream over (or opens it for the first time) and
// starts serving it.
func openBroker(ctx context.Context, cfg brokerConfig) (*broker, openReport, error) {
	start := time.Now()
	var rep openReport
	zones, err := chain.NewZones(cfg.Buckets...)
	if err != nil {
		return nil, rep, err
	}
	fencer, err := fence.New(cfg.Minter, zones, fence.Options{Identity: cfg.Star})
	if err != nil {
		return nil, rep, err
	}
	settler, err := settle.New(cfg.Minter, zones, cfg.Refs, settle.Options{Fencer: fencer})
	if err != nil {
		return nil, rep, err
	}
	reader, err := chain.NewReader(cfg.Minter, zones, chain.ReaderOptions{})
	if err != nil {
		return nil, rep, err
	}

	// Who wrote the stream last? Its unsettled epochs may hold
	// acknowledged records that no ref covers yet.
	wkey := writerKey(cfg.Stream)
	var prev writerRecord
	var prevRev int64
	switch kv, err := cfg.Store.Get(ctx, wkey); {
	case errors.Is(err, metastore.ErrNotFound):
	case err != nil:
		return nil, rep, fmt.Errorf("read the stream's writer: %w", err)
	default:
		if err := metastore.DecodeRecord(wkey, kv.Value, writerKind, 1, &prev); err != nil {
			return nil, rep, err
		}
		prevRev = kv.Revision
		rep.Previous = prev.Star
	}
	stars := []string{cfg.Star}
	if prev.Star != "" && prev.Star != cfg.Star {
		stars = []string{prev.Star, cfg.Star}
	}
	for _, star := range stars {
		reps, err := settler.SettleAll(ctx, star)
		rep.Settled = append(rep.Settled, reps...)
		if err != nil {
			return nil, rep, fmt.Errorf("settle %s: %w", star, err)
		}
	}

	// Settlement restored coverage: the refs now cover every acknowledged
	// record, so they say where the stream continues and which producer
	// sequences it holds.
	if rep.Next, err = cfg.Refs.Next(ctx, cfg.Stream); err != nil {
		return nil, rep, err
	}
	stored, err := readStream(ctx, cfg.Refs, reader, cfg.Stream)
	if err != nil {
		return nil, rep, fmt.Errorf("rebuild producer state: %w", err)
	}
	seen := make(map[producerSeq]uint64, len(stored))
	for _, s := range stored {
		seen[producerSeq{s.rec.Producer, s.rec.Seq}] = s.rec.Offset
	}
	rep.Producers = len(stored)

	rec, err := cfg.Minter.Mint(ctx, cfg.Star, epoch.Constants{
		Class: cfg.Class, Buckets: chain.Names(cfg.Buckets...), W: cfg.W, Window: cfg.Window, Prefix: cfg.Keys.Prefix,
	})
	if err != nil {
		return nil, rep, err
	}
	rep.Epoch = rec
	// Record this tenure before the first acknowledgement can exist, by
	// CAS on what was read: a concurrent opener makes this fail.
	v, err := metastore.EncodeRecord(&writerRecord{Header: metastore.Header{Kind: writerKind, Format: 1}, Star: cfg.Star, Epoch: rec.Epoch})
	if err != nil {
		return nil, rep, err
	}
	if _, err := metastore.Put(ctx, cfg.Store, wkey, v, prevRev); err != nil {
		return nil, rep, fmt.Errorf("record the stream's writer: %w", err)
	}
	w, err := chain.NewWriter(rec, zones, chain.WriterOptions{})
	if err != nil {
		return nil, rep, err
	}
	bctx, cancel := context.WithCancel(context.Background())
	b := &broker{
		cfg: cfg, rec: rec, w: w, reader: reader, fencer: fencer, base: rep.Next,
		ctx: bctx, cancel: cancel,
		pending: make(chan *appendReq, cfg.Window+1), runDone: make(chan struct{}),
		next: rep.Next, seen: seen, inflight: make(map[producerSeq]*ack),
	}
	b.absorbIdle = sync.NewCond(&b.mu)
	go b.run()
	rep.Duration = time.Since(start)
	return b, rep, nil
}

// Produce appends one record of producer with sequence seq, or, when that
// record is in the stream already, acknowledges it at its offset (an
// idempotent producer: retrying is always safe).
func (b *broker) Produce(ctx context.Context, producer string, seq uint64, data []byte) (*ack, error) {
	key := producerSeq{producer, seq}
	b.submitMu.Lock()
	defer b.submitMu.Unlock()
	if b.closed {
		return nil, errBrokerDown
	}
	b.mu.Lock()
	if off, ok := b.seen[key]; ok {
		b.mu.Unlock()
		a := &ack{done: make(chan struct{}), dup: true}
		a.resolve(off, nil)
		return a, nil
	}
	if a, ok := b.inflight[key]; ok {
		b.mu.Unlock()
		return a, nil
	}
	b.mu.Unlock()

	off := b.next
	payload := record{Stream: b.cfg.Stream, Offset: off, Producer: producer, Seq: seq, Data: data}.encode()
	f, err := b.w.Submit(ctx, payload)
	if err != nil {
		return nil, err
	}
	b.next++
	a := &ack{done: make(chan struct{})}
	b.mu.Lock()
	b.inflight[key] = a
	b.mu.Unlock()
	b.pending <- &appendReq{f: f, key: key, off: off, payload: payload, ack: a}
	return a, nil
}

// run acknowledges appends in slot order and absorbs them in batches.
func (b *broker) run() {
	defer close(b.runDone)
	for p := range b.pending {
		var pos chain.Position
		var err error
		select {
		case <-p.f.Done():
			pos, err = p.f.Result()
		case <-b.ctx.Done():
		}
		if b.ctx.Err() != nil {
			err = errBrokerDown // a dead process acknowledges nothing
		}
		if err == nil && pos.Slot+b.base != p.off {
			err = fmt.Errorf("slot %v does not hold offset %d", pos, p.off)
			b.fail(err)
		}
		b.mu.Lock()
		delete(b.inflight, p.key)
		if err == nil {
			b.seen[p.key] = p.off
			b.acked++
			b.unabsorbed = append(b.unabsorbed, chain.Flight{Position: pos, Payload: p.payload})
		}
		due := len(b.unabsorbed) >= b.cfg.AbsorbEvery
		if due {
			// Counted before the acknowledgement is given, so that
			// waitAbsorbed after an acknowledgement sees the absorb it
			// started.
			b.absorbing++
		}
		b.mu.Unlock()
		p.ack.resolve(p.off, err)
		if due {
			if err := b.absorb(b.ctx); err != nil && b.ctx.Err() == nil {
				b.fail(err)
			}
			b.mu.Lock()
			b.absorbing--
			b.absorbIdle.Broadcast()
			b.mu.Unlock()
		}
	}
}

// waitAbsorbed waits until every absorb started for the acknowledgements
// given so far has finished. An absorb runs after the acknowledgement that
// completes its batch: without the wait, what state reports (and the
// checkpoint a successor's fence walks from) would depend on timing.
func (b *broker) waitAbsorbed() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.absorbing > 0 {
		b.absorbIdle.Wait()
	}
}

// waitSent waits until the writer has sent every bucket a first PUT of
// every slot submitted so far, or skipped it as no longer needed. A slot is
// acknowledged at W copies and its other PUTs follow: without the wait,
// how many of them a crash right after the acknowledgement cut off would
// depend on timing. The writer signals nothing for this, so it polls.
func (b *broker) waitSent(ctx context.Context) error {
	want := uint64(len(b.cfg.Buckets)) * b.w.Stats().Submitted
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		st := b.w.Stats()
		if st.Creates-st.CreateRetries+st.Skipped >= want {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *broker) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

// absorb covers the acknowledged flights not covered yet and advances the
// epoch's checkpoint past them: from then on, the refs alone find them.
func (b *broker) absorb(ctx context.Context) error {
	b.absorbM.Lock()
	defer b.absorbM.Unlock()
	b.mu.Lock()
	batch := b.unabsorbed
	b.unabsorbed = nil
	b.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	for _, f := range batch {
		if err := b.cfg.Refs.Cover(ctx, b.cfg.Star, f); err != nil {
			return fmt.Errorf("absorb %v: %w", f.Position, err)
		}
	}
	cp := batch[len(batch)-1].Slot + 1
	if _, err := b.w.Checkpoint(ctx, cp); err != nil {
		return fmt.Errorf("advance the checkpoint to %d: %w", cp, err)
	}
	b.mu.Lock()
	b.checkpoint = cp
	b.absorbed += len(batch)
	b.mu.Unlock()
	return nil
}

// brokerState is a snapshot for the timeline.
type brokerState struct {
	acked, absorbed int
	checkpoint      uint64
	err             error
}

func (b *broker) state() brokerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return brokerState{acked: b.acked, absorbed: b.absorbed, checkpoint: b.checkpoint, err: b.err}
}

// slotOf is the slot of this broker's epoch that holds offset off.
func (b *broker) slotOf(off uint64) uint64 { return off - b.base }

// crash is the process dying: the writer is aborted (no close, no release,
// no absorb), every unacknowledged append fails, nothing else happens.
// Requests already on the network are not recalled.
func (b *broker) crash() {
	b.cancel()
	b.w.Abort()
	b.submitMu.Lock()
	if !b.closed {
		b.closed = true
		close(b.pending)
	}
	b.submitMu.Unlock()
	<-b.runDone
}

// shutdown stops taking appends, waits for every acknowledgement, absorbs
// them all and closes the writer.
func (b *broker) shutdown(ctx context.Context) error {
	b.submitMu.Lock()
	if !b.closed {
		b.closed = true
		close(b.pending)
	}
	b.submitMu.Unlock()
	select {
	case <-b.runDone:
	case <-ctx.Done():
		b.crash()
		return ctx.Err()
	}
	err := b.absorb(ctx)
	if cerr := b.w.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		b.crash()
		return err
	}
	b.cancel()
	return b.state().err
}
