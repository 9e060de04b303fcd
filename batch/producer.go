package batch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
)

// Target is where a Producer's flights go: *lease.Star through New, or
// anything with the same contract (a payload's spans continue their
// streams at Next; nothing of a payload is placed when Submit returns an
// error) through NewTarget.
type Target interface {
	// Submit appends one bundle. It may block while the target's window
	// is full.
	Submit(ctx context.Context, payload []byte) (Pending, error)
	// Next returns the stream's next offset.
	Next(stream string) (uint64, error)
}

// Pending is a submitted flight's outcome: *lease.Future is one.
type Pending interface {
	Wait(ctx context.Context) (chain.Position, error)
}

type starTarget struct{ s *lease.Star }

func (t starTarget) Submit(ctx context.Context, payload []byte) (Pending, error) {
	f, err := t.s.Submit(ctx, payload)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (t starTarget) Next(stream string) (uint64, error) { return t.s.Next(stream) }

// Options tunes a Producer. The zero value works.
type Options struct {
	// MaxBytes bounds a flight's payload, the bundle's header and
	// directory included. A flight is sent when the next record of the
	// same size would not fit. 0 means DefaultMaxBytes; at least
	// MinMaxBytes, at most chain.MaxPayload.
	MaxBytes int
	// MaxRecords, when set, sends a flight once it holds that many
	// records. 0 means no bound but MaxBytes.
	MaxRecords int
	// Linger is how long the first record of a flight waits for more
	// before the flight is sent, on Clock. 0 sends a flight as soon as
	// the target takes one: records gather only while the target's window
	// is full.
	Linger time.Duration
	// MaxBuffered bounds the bytes of records the producer holds that
	// are not decided yet (gathering, queued, or in flight): Add blocks
	// while one more record would pass it. Each record counts its length
	// and 64 bytes of bookkeeping. 0 means DefaultMaxBuffered or 4 ×
	// MaxBytes, whichever is larger; at least MaxBytes. To keep a star's
	// whole window busy, it must hold a window of flights.
	MaxBuffered int
	// Clock drives Linger. Nil means the wall clock.
	Clock clock.Clock
}

// Bounds of Options.
const (
	DefaultMaxBytes    = 1 << 20
	MinMaxBytes        = 256
	DefaultMaxBuffered = 32 << 20
	// MaxMaxBuffered bounds Options.MaxBuffered.
	MaxMaxBuffered = 4 << 30
	// MaxMaxRecords bounds Options.MaxRecords.
	MaxMaxRecords = 1 << 20
	// MaxLinger bounds Options.Linger.
	MaxLinger = time.Minute
)

func (o *Options) validate() error {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxBytes < MinMaxBytes || o.MaxBytes > chain.MaxPayload {
		return &cutline.ConfigError{Field: "MaxBytes", Value: o.MaxBytes, Reason: fmt.Sprintf("must satisfy %d ≤ MaxBytes ≤ %d (chain.MaxPayload; 0 means %d)", MinMaxBytes, chain.MaxPayload, DefaultMaxBytes)}
	}
	if o.MaxRecords < 0 || o.MaxRecords > MaxMaxRecords {
		return &cutline.ConfigError{Field: "MaxRecords", Value: o.MaxRecords, Reason: fmt.Sprintf("must satisfy 0 ≤ MaxRecords ≤ %d (0 means no bound but MaxBytes)", MaxMaxRecords)}
	}
	if o.Linger < 0 || o.Linger > MaxLinger {
		return &cutline.ConfigError{Field: "Linger", Value: o.Linger, Reason: fmt.Sprintf("must satisfy 0 ≤ Linger ≤ %v", MaxLinger)}
	}
	if o.MaxBuffered == 0 {
		o.MaxBuffered = max(DefaultMaxBuffered, 4*o.MaxBytes)
	}
	if o.MaxBuffered < o.MaxBytes || o.MaxBuffered > MaxMaxBuffered {
		return &cutline.ConfigError{Field: "MaxBuffered", Value: o.MaxBuffered, Reason: fmt.Sprintf("must satisfy MaxBytes (%d) ≤ MaxBuffered ≤ %d", o.MaxBytes, MaxMaxBuffered)}
	}
	o.Clock = clock.Or(o.Clock)
	return nil
}

// Cost bounds of the bundle format, used to keep a flight under MaxBytes
// before its exact size is known.
const (
	headerBound = headerLen + maxUvarint
	// entryBound is a directory entry without its name: four varints.
	entryBound = 4 * maxUvarint
)

// recordCost is what a record of n bytes adds to its section.
func recordCost(n int) int { return uvarintLen(uint64(n)) + n }

// held is what a record of n bytes counts against MaxBuffered: its bytes
// and a little for its length and its Ack.
func held(n int) int { return n + 64 }

// outcome is the decision shared by the records of one flight.
type outcome struct {
	done chan struct{}
	pos  chain.Position
	err  error
}

func failed(err error) *outcome {
	o := &outcome{done: make(chan struct{}), err: err}
	close(o.done)
	return o
}

// Ack is the pending acknowledgement of one record: what this layer adds
// is the record's own offset in its stream (Offset, known at once), among
// the records that share its flight. Its position is the lease.Future's
// of that flight.
type Ack struct {
	stream string
	offset uint64
	out    atomic.Pointer[outcome]
}

// Stream is the record's stream.
func (a *Ack) Stream() string { return a.stream }

// Offset is the record's stream offset, assigned by Add.
func (a *Ack) Offset() uint64 { return a.offset }

// Decided tells whether the record is decided: Wait would return at once.
func (a *Ack) Decided() bool {
	for {
		o := a.out.Load()
		select {
		case <-o.done:
		default:
			return false
		}
		if a.out.Load() == o {
			return true
		}
	}
}

// Wait blocks until the record is decided or ctx ends (which only stops
// the wait). A nil error is an acknowledgement: the record is durable at
// offset of its stream, in the flight at pos. Otherwise the error is a
// *RecordError (ErrFailed and the cause): the record may or may not be
// durable.
func (a *Ack) Wait(ctx context.Context) (pos chain.Position, offset uint64, err error) {
	for {
		o := a.out.Load()
		select {
		case <-o.done:
		case <-ctx.Done():
			return chain.Position{}, a.offset, ctx.Err()
		}
		// A record taken out of its flight before it was sent gets an
		// outcome of its own, decided before its flight's.
		if a.out.Load() != o {
			continue
		}
		if o.err != nil {
			return chain.Position{}, a.offset, &RecordError{Stream: a.stream, Offset: a.offset, Err: o.err}
		}
		return o.pos, a.offset, nil
	}
}

// chunk is the size of the pieces a section keeps its records' bytes in.
const chunk = 16 << 10

// section is one stream's records in a batch.
type section struct {
	name   string
	offset uint64
	lens   []byte   // the records' lengths, varints
	data   [][]byte // the records' bytes, in chunks that are never copied to grow
	size   int      // the bytes in data
	acks   []*Ack
	held   int
}

// batch is one flight in the making.
type batch struct {
	seq     uint64
	secs    []*section // in the order their streams came
	byName  map[string]*section
	bytes   int // a bound of the encoded size
	records int
	held    int
	out     *outcome
}

func newBatch(seq uint64) *batch {
	return &batch{seq: seq, bytes: headerBound, byName: map[string]*section{}, out: &outcome{done: make(chan struct{})}}
}

func (b *batch) section(stream string) *section { return b.byName[stream] }

// cost is what a record of n bytes of stream adds to b's bound.
func (b *batch) cost(stream string, n int) int {
	c := recordCost(n)
	if b.section(stream) == nil {
		c += entryBound + len(stream)
	}
	return c
}

func (b *batch) add(stream string, offset uint64, rec []byte) *Ack {
	b.bytes += b.cost(stream, len(rec))
	s := b.section(stream)
	if s == nil {
		s = &section{name: stream, offset: offset}
		b.secs = append(b.secs, s)
		b.byName[stream] = s
	}
	s.lens = binary.AppendUvarint(s.lens, uint64(len(rec)))
	if n := len(s.data); n == 0 || cap(s.data[n-1])-len(s.data[n-1]) < len(rec) {
		s.data = append(s.data, make([]byte, 0, max(chunk, len(rec))))
	}
	last := &s.data[len(s.data)-1]
	*last = append(*last, rec...)
	s.size += len(rec)
	a := &Ack{stream: stream, offset: offset}
	a.out.Store(b.out)
	s.acks = append(s.acks, a)
	s.held += held(len(rec))
	b.held += held(len(rec))
	b.records++
	return a
}

// strip takes stream's records out of b, failing them with err, and
// returns how many there were and the bytes they held.
func (b *batch) strip(stream string, err error) (records, held int) {
	for i, s := range b.secs {
		if s.name != stream {
			continue
		}
		o := failed(err)
		for _, a := range s.acks {
			a.out.Store(o)
		}
		b.secs = append(b.secs[:i], b.secs[i+1:]...)
		delete(b.byName, stream)
		b.records -= len(s.acks)
		b.bytes -= entryBound + len(s.name) + len(s.lens) + s.size
		b.held -= s.held
		return len(s.acks), s.held
	}
	return 0, 0
}

// encode writes b as a bundle.
func (b *batch) encode() []byte {
	size := headerLen + uvarintLen(uint64(len(b.secs)))
	for _, s := range b.secs {
		sec := uint64(len(s.lens) + s.size)
		size += uvarintLen(uint64(len(s.name))) + len(s.name) + uvarintLen(s.offset) + uvarintLen(uint64(len(s.acks))) + uvarintLen(sec) + int(sec)
	}
	out := make([]byte, 0, size)
	out = append(out, magic...)
	out = append(out, version)
	out = binary.AppendUvarint(out, uint64(len(b.secs)))
	for _, s := range b.secs {
		out = binary.AppendUvarint(out, uint64(len(s.name)))
		out = append(out, s.name...)
		out = binary.AppendUvarint(out, s.offset)
		out = binary.AppendUvarint(out, uint64(len(s.acks)))
		out = binary.AppendUvarint(out, uint64(len(s.lens)+s.size))
	}
	for _, s := range b.secs {
		out = append(out, s.lens...)
		for _, c := range s.data {
			out = append(out, c...)
		}
	}
	return out
}

// streamState is what the producer knows of a stream.
type streamState struct {
	next uint64
	err  error // the failure that stopped it, until Reset
}

// flight is a batch handed to the acknowledgement loop: submitted (p),
// or already decided (err, or nothing left in it).
type flight struct {
	b   *batch
	p   Pending
	err error
}

// Stats counts what a Producer did.
type Stats struct {
	// Flights and Records acknowledged, and the bytes of their payloads.
	Flights, Records, Bytes uint64
	// Failed counts the records not acknowledged.
	Failed uint64
}

// Producer gathers records of one or many streams into flights by size
// and linger time, assigns each its stream offset, and acknowledges each
// when its flight is. Its methods are safe for concurrent use.
type Producer struct {
	target Target
	opts   Options

	ctx    context.Context // ends when Close gives up
	cancel context.CancelFunc

	mu       sync.Mutex
	streams  map[string]*streamState
	open     *batch   // gathering
	ready    []*batch // sealed, in order
	seq      uint64   // the last batch made
	decided  uint64   // the last batch decided
	buffered int
	closing  bool
	linger   clock.Timer
	space    chan struct{} // closed and renewed when bytes are released
	progress chan struct{} // closed and renewed when a batch is decided
	closed   chan struct{} // closed when Close begins
	stats    Stats

	wake    chan struct{} // wakes the send loop
	flights chan flight
	stopped chan struct{} // closed when the acknowledgement loop ends
	timers  sync.WaitGroup
}

// New returns a Producer appending to star. It appends to streams the
// star holds (lease.Star.Open); while it serves a stream, nothing else
// may Submit to that stream.
func New(star *lease.Star, opts Options) (*Producer, error) {
	if star == nil {
		return nil, &cutline.ConfigError{Field: "star", Value: nil, Reason: "required"}
	}
	return NewTarget(starTarget{star}, opts)
}

// NewTarget returns a Producer appending to t.
func NewTarget(t Target, opts Options) (*Producer, error) {
	if t == nil {
		return nil, &cutline.ConfigError{Field: "target", Value: nil, Reason: "required"}
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	p := &Producer{target: t, opts: opts, streams: map[string]*streamState{},
		space: make(chan struct{}), progress: make(chan struct{}), closed: make(chan struct{}),
		wake: make(chan struct{}, 1), flights: make(chan flight, 256), stopped: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.send()
	go p.acknowledge()
	return p, nil
}

// fits tells whether a record of n bytes of stream can ever go in a
// flight.
func (p *Producer) fits(stream string, n int) bool {
	return n <= p.opts.MaxBytes && headerBound+entryBound+len(stream)+recordCost(n) <= p.opts.MaxBytes
}

// Add gives the producer one record of stream, a stream its target holds.
// It assigns the record the stream's next offset and returns its Ack. Add
// blocks while the producer holds MaxBuffered bytes (ctx bounds the
// wait). The record is copied. A stream whose records failed refuses Add
// with a *StreamError until Reset; a record that can never fit a flight
// is a *SizeError.
func (p *Producer) Add(ctx context.Context, stream string, record []byte) (*Ack, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return nil, err
	}
	if !p.fits(stream, len(record)) {
		return nil, &SizeError{Size: len(record), Max: p.opts.MaxBytes - headerBound - entryBound - len(stream) - maxUvarint}
	}
	h := held(len(record))
	p.mu.Lock()
	for {
		if p.closing {
			p.mu.Unlock()
			return nil, errClosed
		}
		if st := p.streams[stream]; st != nil && st.err != nil {
			p.mu.Unlock()
			return nil, &StreamError{Stream: stream, Err: st.err}
		}
		if p.buffered == 0 || p.buffered+h <= p.opts.MaxBuffered {
			break
		}
		// Full: what gathers goes now, and the record waits for
		// acknowledgements to release bytes.
		p.sealLocked()
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-p.closed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	st := p.streams[stream]
	if st == nil {
		next, err := p.target.Next(stream)
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		st = &streamState{next: next}
		p.streams[stream] = st
	}
	if b := p.open; b != nil && (b.bytes+b.cost(stream, len(record)) > p.opts.MaxBytes) {
		p.sealLocked()
	}
	if p.open == nil {
		p.seq++
		p.open = newBatch(p.seq)
		if p.opts.Linger > 0 {
			b := p.open
			p.timers.Add(1)
			p.linger = p.opts.Clock.AfterFunc(p.opts.Linger, func() {
				defer p.timers.Done()
				p.lingered(b)
			})
		}
	}
	b := p.open
	a := b.add(stream, st.next, record)
	st.next++
	p.buffered += h
	switch {
	case p.opts.MaxRecords > 0 && b.records >= p.opts.MaxRecords,
		b.bytes+b.cost(stream, len(record)) > p.opts.MaxBytes:
		p.sealLocked()
	case p.opts.Linger == 0:
		p.kick()
	}
	p.mu.Unlock()
	return a, nil
}

func (p *Producer) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// sealLocked queues the gathering batch for sending.
func (p *Producer) sealLocked() {
	b := p.open
	if b == nil {
		return
	}
	p.open = nil
	p.stopLingerLocked()
	p.ready = append(p.ready, b)
	p.kick()
}

func (p *Producer) stopLingerLocked() {
	if p.linger != nil {
		if p.linger.Stop() {
			p.timers.Done()
		}
		p.linger = nil
	}
}

// lingered seals b when its linger time is up.
func (p *Producer) lingered(b *batch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == b {
		p.linger = nil
		p.open = nil
		p.ready = append(p.ready, b)
		p.kick()
	}
}

// send submits the sealed batches in order and hands them to the
// acknowledgement loop.
func (p *Producer) send() {
	defer close(p.flights)
	for {
		p.mu.Lock()
		for len(p.ready) == 0 {
			if p.open != nil && p.opts.Linger == 0 {
				p.sealLocked()
				continue
			}
			if p.closing && p.open == nil {
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			select {
			case <-p.wake:
			case <-p.ctx.Done():
			}
			p.mu.Lock()
			if p.ctx.Err() != nil && len(p.ready) == 0 {
				p.mu.Unlock()
				return
			}
		}
		b := p.ready[0]
		p.ready = p.ready[1:]
		// Streams that failed since b was sealed leave it before it goes.
		for _, s := range append([]*section(nil), b.secs...) {
			if st := p.streams[s.name]; st != nil && st.err != nil {
				p.stripLocked(b, s.name, st.err)
			}
		}
		p.mu.Unlock()
		p.flights <- p.submit(b)
	}
}

// submit sends b. A refusal that names one stream of several (not held,
// departing, an offset that does not continue it) placed nothing: that
// stream fails and the others go on without it.
func (p *Producer) submit(b *batch) flight {
	for len(b.secs) > 0 {
		if err := p.ctx.Err(); err != nil {
			return flight{b: b, err: fmt.Errorf("%w before the flight was sent: %w", errClosed, err)}
		}
		payload := b.encode()
		pend, err := p.target.Submit(p.ctx, payload)
		if err == nil {
			b.bytes = len(payload)
			for _, s := range b.secs {
				s.lens, s.data = nil, nil // the payload holds them now
			}
			return flight{b: b, p: pend}
		}
		name := refused(err)
		if name == "" || len(b.secs) == 1 || b.section(name) == nil {
			return flight{b: b, err: err}
		}
		p.mu.Lock()
		p.failLocked(name, err)
		p.stripLocked(b, name, err)
		p.mu.Unlock()
	}
	return flight{b: b}
}

// refused names the stream a Submit error is about, when it is one of
// the refusals that place nothing.
func refused(err error) string {
	if se := (*lease.StreamError)(nil); errors.As(err, &se) {
		return se.Stream
	}
	if oe := (*lease.OffsetError)(nil); errors.As(err, &oe) {
		return oe.Stream
	}
	return ""
}

// acknowledge decides the flights in order.
func (p *Producer) acknowledge() {
	defer close(p.stopped)
	for fl := range p.flights {
		pos, err := chain.Position{}, fl.err
		if fl.p != nil {
			pos, err = fl.p.Wait(p.ctx)
			if err != nil && p.ctx.Err() != nil {
				err = fmt.Errorf("%w before the flight was decided (its outcome is unknown): %w", errClosed, err)
			}
		}
		p.mu.Lock()
		b := fl.b
		if err != nil {
			for _, s := range b.secs {
				p.failLocked(s.name, err)
			}
			p.stats.Failed += uint64(b.records)
		} else if b.records > 0 {
			p.stats.Flights++
			p.stats.Records += uint64(b.records)
			p.stats.Bytes += uint64(b.bytes)
		}
		p.releaseLocked(b.held)
		p.decided = b.seq
		close(p.progress)
		p.progress = make(chan struct{})
		p.mu.Unlock()
		b.out.pos, b.out.err = pos, err
		close(b.out.done)
	}
}

func (p *Producer) releaseLocked(n int) {
	if n == 0 {
		return
	}
	p.buffered -= n
	close(p.space)
	p.space = make(chan struct{})
}

// failLocked stops stream with err: every record of it not sent yet
// fails with err too.
func (p *Producer) failLocked(stream string, err error) {
	st := p.streams[stream]
	if st == nil {
		st = &streamState{}
		p.streams[stream] = st
	}
	if st.err == nil {
		st.err = err
	}
	for _, b := range p.ready {
		p.stripLocked(b, stream, err)
	}
	if b := p.open; b != nil {
		p.stripLocked(b, stream, err)
		if len(b.secs) == 0 {
			// Nothing gathers any more: decide the empty batch in its
			// turn.
			p.open = nil
			p.stopLingerLocked()
			p.ready = append(p.ready, b)
			p.kick()
		}
	}
}

func (p *Producer) stripLocked(b *batch, stream string, err error) {
	records, held := b.strip(stream, err)
	p.stats.Failed += uint64(records)
	p.releaseLocked(held)
}

// Flush sends every record added before it without waiting for Linger,
// and waits until each is decided (acknowledged or failed; its Ack
// tells) or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.sealLocked()
	target := p.seq
	for p.decided < target {
		ch := p.progress
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// Reset lets a failed stream go on: its next Add reads the stream's next
// offset from the target again. The host calls it once it has handled
// the failed records (see the package documentation).
func (p *Producer) Reset(stream string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.streams[stream]; st != nil && st.err != nil {
		delete(p.streams, stream)
	}
}

// Stats returns a snapshot of the producer's counters.
func (p *Producer) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close refuses further Adds, sends what gathers and waits until every
// record is decided. If ctx ends first, the records still pending fail
// with cutline.ErrClosed (their outcome unknown) and Close returns ctx's error.
// Close leaves the target open: the star is the host's.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return errClosed
	}
	p.closing = true
	close(p.closed)
	p.sealLocked()
	p.kick()
	p.mu.Unlock()
	var err error
	select {
	case <-p.stopped:
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.cancel()
	<-p.stopped
	p.mu.Lock()
	p.stopLingerLocked()
	p.mu.Unlock()
	p.timers.Wait()
	return err
}
