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
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// broker is the host of the demonstration: a tiny log broker process that
// serves one stream from its star's chain, through a lease.Star. It is what
// a real host (a message broker, a queue) does with the packages, reduced
// to the steps that matter for a takeover:
//
//   - start: a metastore session and a lease.Star bound to it (lease.Start
//     registers the star, settles what an earlier run of it left and mints
//     its epoch);
//   - open: Star.Open takes the stream's lease and passes the open gate,
//     which settles the last writer's epoch when nothing certifies it, or
//     refuses for now (*lease.DeferredError) while that writer may be
//     alive; then the producers' state is rebuilt from the stream;
//   - Produce: deduplicate by (producer, sequence), submit the record at
//     the stream's next offset through Star.Submit, pipelined;
//   - acknowledge in order; the Star absorbs (covers acknowledged flights
//     in the RefIndex and advances the epoch's checkpoint) every
//     AbsorbEvery acknowledgements, lagging behind them;
//   - crash (Star.Abort; the session is left to expire) or shut down
//     cleanly (Star.Close: the stream leaves through Finish, which stamps
//     the clean-release mark).
type broker struct {
	cfg    brokerConfig
	sess   metastore.Session
	star   *lease.Star
	cover  *coverage
	rec    *epoch.Record // the star's epoch
	reader *chain.Reader
	fencer *fence.Fencer

	ctx     context.Context // cancelled when the broker dies
	cancel  context.CancelFunc
	pending chan *appendReq // appends in submission order, for run
	runDone chan struct{}

	submitMu sync.Mutex // orders offset assignment with slot assignment
	opened   bool
	closed   bool
	// base is the stream offset of slot 0 of the star's epoch: where the
	// tenure began (the star leads this one stream, opened before its
	// first append).
	base uint64
	// absorbedTo is the offset up to which waitAbsorbed saw the Star's
	// absorbs finish.
	absorbedTo uint64

	mu       sync.Mutex
	seen     map[producerSeq]uint64 // in the stream: acknowledged or covered
	inflight map[producerSeq]*ack
	acked    int
	err      error // the first failure of the acknowledgement path
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
	// SessionTTL is the TTL of the process's metastore session.
	SessionTTL time.Duration
	// Abandon is what the process's death does to its session: no
	// keep-alive and no revocation is sent any more, and the store expires
	// it one TTL later.
	Abandon func(metastore.Session)
}

// openReport says what opening the stream took.
type openReport struct {
	// Tenure is the gate's admission: its decision, the predecessor it
	// judged, the settlement it ran, where the stream continues.
	Tenure    lease.Tenure
	Producers int // records the producer state was rebuilt from
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
	f   *lease.Future
	key producerSeq
	off uint64
	ack *ack
}

var errBrokerDown = errors.New("broker is down")

// startBroker starts a broker process: its session and its Star. It serves
// nothing until open admits it to the stream.
func startBroker(ctx context.Context, cfg brokerConfig) (*broker, error) {
	zones, err := chain.NewZones(cfg.Buckets...)
	if err != nil {
		return nil, err
	}
	fencer, err := fence.New(cfg.Minter, zones, fence.Options{Identity: cfg.Star})
	if err != nil {
		return nil, err
	}
	settler, err := settle.New(cfg.Minter, zones, cfg.Refs, settle.Options{Fencer: fencer})
	if err != nil {
		return nil, err
	}
	reader, err := chain.NewReader(cfg.Minter, zones, chain.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	sess, err := cfg.Store.NewSession(ctx, cfg.SessionTTL)
	if err != nil {
		return nil, fmt.Errorf("%s: new session: %w", cfg.Star, err)
	}
	cover := newCoverage(cfg.Refs)
	star, err := lease.Start(ctx, lease.Config{
		Star: cfg.Star, Store: cfg.Store, Session: sess,
		Minter: cfg.Minter, Settler: settler, Index: cover,
		Constants: epoch.Constants{
			Class: cfg.Class, Buckets: chain.Names(cfg.Buckets...), W: cfg.W, Window: cfg.Window, Prefix: cfg.Keys.Prefix,
		},
	}, lease.Options{AbsorbEvery: cfg.AbsorbEvery})
	if err != nil {
		_ = sess.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	bctx, cancel := context.WithCancel(context.Background())
	b := &broker{
		cfg: cfg, sess: sess, star: star, cover: cover, rec: star.Epoch(), reader: reader, fencer: fencer,
		ctx: bctx, cancel: cancel,
		pending: make(chan *appendReq, cfg.Window+1), runDone: make(chan struct{}),
		seen: make(map[producerSeq]uint64), inflight: make(map[producerSeq]*ack),
	}
	go b.run()
	return b, nil
}

// open opens the stream through the Star's open gate and rebuilds the
// producers' state from it. A *lease.DeferredError is a refusal for now:
// open again later.
func (b *broker) open(ctx context.Context) (openReport, error) {
	start := time.Now()
	ten, err := b.star.Open(ctx, b.cfg.Stream, lease.OpenOptions{})
	if err != nil {
		return openReport{}, err
	}
	// The gate restored coverage before it admitted the tenure: the refs
	// cover every acknowledged record, so they say which producer
	// sequences the stream holds.
	stored, err := readStream(ctx, b.cfg.Refs, b.reader, b.cfg.Stream)
	if err != nil {
		return openReport{}, fmt.Errorf("rebuild producer state: %w", err)
	}
	if uint64(len(stored)) != ten.Next {
		return openReport{}, fmt.Errorf("the refs cover %d records of %s, the gate says it continues at offset %d", len(stored), b.cfg.Stream, ten.Next)
	}
	b.mu.Lock()
	for _, s := range stored {
		b.seen[producerSeq{s.rec.Producer, s.rec.Seq}] = s.rec.Offset
	}
	b.mu.Unlock()
	b.submitMu.Lock()
	b.opened, b.base, b.absorbedTo = true, ten.Next, ten.Next
	b.submitMu.Unlock()
	return openReport{Tenure: ten, Producers: len(stored), Duration: time.Since(start)}, nil
}

// Produce appends one record of producer with sequence seq, or, when that
// record is in the stream already, acknowledges it at its offset (an
// idempotent producer: retrying is always safe).
func (b *broker) Produce(ctx context.Context, producer string, seq uint64, data []byte) (*ack, error) {
	key := producerSeq{producer, seq}
	b.submitMu.Lock()
	defer b.submitMu.Unlock()
	if b.closed || !b.opened {
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

	off, err := b.star.Next(b.cfg.Stream)
	if err != nil {
		return nil, err
	}
	payload := record{Stream: b.cfg.Stream, Offset: off, Producer: producer, Seq: seq, Data: data}.encode()
	f, err := b.star.Submit(ctx, payload)
	if err != nil {
		return nil, err
	}
	a := &ack{done: make(chan struct{})}
	b.mu.Lock()
	b.inflight[key] = a
	b.mu.Unlock()
	b.pending <- &appendReq{f: f, key: key, off: off, ack: a}
	return a, nil
}

// run acknowledges appends in submission order: the Star answers them in
// that order, after recording each acknowledged flight for its absorb.
func (b *broker) run() {
	defer close(b.runDone)
	for p := range b.pending {
		var pos chain.Position
		var err error
		select {
		case <-p.f.Done():
			pos, err = p.f.Wait(b.ctx)
		case <-b.ctx.Done():
		}
		if b.ctx.Err() != nil {
			err = errBrokerDown // a dead process acknowledges nothing
		}
		if err == nil && (pos.Epoch != b.rec.Epoch || pos.Slot+b.base != p.off) {
			err = fmt.Errorf("slot %v does not hold offset %d", pos, p.off)
			b.fail(err)
		}
		b.mu.Lock()
		delete(b.inflight, p.key)
		if err == nil {
			b.seen[p.key] = p.off
			b.acked++
		}
		b.mu.Unlock()
		p.ack.resolve(p.off, err)
	}
}

// waitAbsorbed waits until the absorb that the acknowledgements given so
// far started has finished. The Star starts one on its own when
// AbsorbEvery acknowledged flights have piled up, and runs it behind the
// acknowledgement that completed the batch: without the wait, what state
// reports (and the checkpoint a successor's fence walks from) would depend
// on timing. Call it once every append submitted is acknowledged, with at
// most AbsorbEvery of them since the previous call: then the Star's
// absorb covers exactly the batch, since nothing else was acknowledged
// while it ran.
func (b *broker) waitAbsorbed(ctx context.Context) error {
	b.submitMu.Lock()
	defer b.submitMu.Unlock()
	next, err := b.star.Next(b.cfg.Stream)
	if err != nil {
		return err
	}
	switch since, every := next-b.absorbedTo, uint64(b.cfg.AbsorbEvery); {
	case since < every:
		return nil // the Star started no absorb
	case since > every:
		return fmt.Errorf("%d acknowledgements since the last absorb, more than AbsorbEvery=%d: the Star's batches would depend on timing", since, every)
	}
	if err := b.cover.wait(ctx, next); err != nil {
		b.fail(err)
		return err
	}
	// The refs are written; Absorb waits for the absorb to finish (it
	// moves the checkpoint after them) and finds nothing more to cover.
	if err := b.star.Absorb(ctx); err != nil {
		b.fail(err)
		return err
	}
	b.absorbedTo = next
	return nil
}

// waitSent waits until the writer has sent every bucket a first PUT of
// every slot submitted so far, or skipped it as no longer needed. A slot is
// acknowledged at W copies and its other PUTs follow: without the wait,
// how many of them a crash right after the acknowledgement cut off would
// depend on timing. The writer signals nothing for this, so it polls the
// counters of the Star's current writer.
func (b *broker) waitSent(ctx context.Context) error {
	want := uint64(len(b.cfg.Buckets)) * b.star.Stats().Submitted
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		st := b.star.Stats()
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

// brokerState is a snapshot for the timeline.
type brokerState struct {
	acked, absorbed int
	checkpoint      uint64
	err             error
}

// state reports the acknowledgements, how many of them the Star covered
// (absorbs and release flush), and the checkpoint of the star's epoch, as
// its record in the metastore holds it.
func (b *broker) state(ctx context.Context) (brokerState, error) {
	rec, err := b.cfg.Minter.Get(ctx, b.cfg.Star, b.rec.Epoch)
	if err != nil {
		return brokerState{}, err
	}
	absorbed := 0
	if end := b.cover.end(); end > b.base {
		absorbed = int(end - b.base)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return brokerState{acked: b.acked, absorbed: absorbed, checkpoint: rec.Cursors.Checkpoint, err: b.err}, nil
}

// slotOf is the slot of the star's epoch that holds offset off.
func (b *broker) slotOf(off uint64) uint64 { return off - b.base }

// stop ends the process's work at once: the Star is aborted (no Finish,
// no mark, no absorb; its writer is aborted and every unacknowledged
// append fails), the broker acknowledges nothing more.
func (b *broker) stop() {
	b.cancel()
	b.star.Abort()
	b.submitMu.Lock()
	if !b.closed {
		b.closed = true
		close(b.pending)
	}
	b.submitMu.Unlock()
	<-b.runDone
}

// crash is the process dying: stop, and its session is abandoned: no
// keep-alive, no revocation. Its lease and registry entry live until the
// session expires. Requests already on the network are not recalled.
func (b *broker) crash() {
	b.stop()
	b.cfg.Abandon(b.sess)
}

// discard releases what the broker still holds when the demonstration
// ends early: it stops, and its session is closed. After shutdown, or a
// crash whose session ended, it changes nothing.
func (b *broker) discard() {
	b.stop()
	_ = b.sess.Close(context.Background())
}

// shutdown stops taking appends, waits for every acknowledgement, absorbs
// what the last batch left, and closes the Star, which lets the stream go
// through Finish (the clean-release mark) and closes the writer; then the
// session is closed.
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
		b.discard()
		return ctx.Err()
	}
	err := b.star.Absorb(ctx)
	if cerr := b.star.Close(ctx); err == nil {
		err = cerr
	}
	if serr := b.sess.Close(ctx); err == nil {
		err = serr
	}
	if err != nil {
		b.discard()
		return err
	}
	b.cancel()
	return b.failure()
}

// failure is the first failure of the acknowledgement or absorb path.
func (b *broker) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// coverage is the Index the broker's Star keeps current: the RefIndex,
// watched, so that the broker knows how far the Star's own covers (its
// absorbs and its release flush) have reached, and can wait for an absorb
// the Star started on its own. Settlement covers the RefIndex directly.
type coverage struct {
	*settle.RefIndex

	mu      sync.Mutex
	covered uint64        // the end of the highest span covered
	err     error         // the first cover that failed
	changed chan struct{} // closed and renewed at every cover
}

var _ lease.Index = (*coverage)(nil)

func newCoverage(refs *settle.RefIndex) *coverage {
	return &coverage{RefIndex: refs, changed: make(chan struct{})}
}

// CoverSpan implements lease.Index.
func (c *coverage) CoverSpan(ctx context.Context, star string, pos chain.Position, s settle.Span) error {
	err := c.RefIndex.CoverSpan(ctx, star, pos, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.covered = max(c.covered, s.Offset+s.Count)
	case c.err == nil:
		c.err = err
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return err
}

// end is the end of the highest span covered so far.
func (c *coverage) end() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.covered
}

// wait waits until every offset below end is covered; a cover that failed
// ends the wait with its error.
func (c *coverage) wait(ctx context.Context, end uint64) error {
	for {
		c.mu.Lock()
		covered, err, changed := c.covered, c.err, c.changed
		c.mu.Unlock()
		switch {
		case covered >= end:
			return nil
		case err != nil:
			return fmt.Errorf("absorb: %w", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
