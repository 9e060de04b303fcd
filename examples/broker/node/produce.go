package node

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// produceReq is one record to append.
type produceReq struct {
	stream   string
	data     []byte
	producer string // "" for none: no deduplication
	seq      uint64
	token    string // the producer's fencing token, "" for none
	tokenGen uint64 // the holding's tokenInstalls when the token was judged
}

// produce appends one record and returns where it was acknowledged. A
// record of a producer sequence the stream holds already is not appended
// again: its first acknowledgement is returned (Duplicate); one in flight
// is waited for.
func (n *Node) produce(ctx context.Context, p produceReq) (Ack, error) {
	h, err := n.holder()
	if err != nil {
		return Ack{}, err
	}
	p.tokenGen = h.tokenInstalls.Load()
	if err := h.Star.CheckToken(ctx, p.stream, p.token); err != nil {
		return Ack{}, err
	}
	s, err := h.stream(ctx, p.stream, p.token)
	if err != nil {
		return Ack{}, err
	}
	a, err := h.produce(ctx, s, p)
	if err == nil && a.Duplicate {
		err = n.samePayload(ctx, h, p, a.Offset)
	}
	return a, err
}

// samePayload checks that the record a retry was judged a duplicate of
// holds the retry's payload: the same producer sequence with other bytes
// is refused (errPayloadConflict). The producer table keeps no payloads
// (its snapshots stay small), so the record is read back; retries are
// rare. A record that retention dropped meanwhile cannot be compared.
func (n *Node) samePayload(ctx context.Context, h *Holding, p produceReq, off uint64) error {
	if err := h.Star.Absorb(ctx); err != nil {
		return err
	}
	rec, _, err := n.readRecord(ctx, p.stream, off)
	switch {
	case errors.Is(err, settle.ErrBelowRetention):
		return nil
	case err == nil && !bytes.Equal(rec.Data, p.data):
		return fmt.Errorf("%w: %s's sequence %d is at offset %d", errPayloadConflict, p.producer, p.seq, off)
	}
	return err
}

// produce submits p through the stream's state s and waits for its
// outcome. A state that was replaced (the stream was reopened, or left
// and opened again) or is suspect judges nothing more: the produce takes
// the current one, which knows what went through the replaced one.
func (h *Holding) produce(ctx context.Context, s *streamState, p produceReq) (Ack, error) {
	for {
		pd, err := h.submit(ctx, s, p)
		switch {
		case errors.Is(err, errTokenInstalled):
			p.tokenGen = h.tokenInstalls.Load()
			err = h.Star.CheckToken(ctx, p.stream, p.token)
		case errors.Is(err, errStateReplaced):
			s, err = h.stream(ctx, p.stream, p.token)
		case err == nil:
			select {
			case <-pd.done:
				return pd.ack, pd.err
			case <-ctx.Done():
				return Ack{}, ctx.Err()
			}
		}
		if err != nil {
			return Ack{}, err
		}
	}
}

// submit appends p through s, unless s judges it a duplicate (or too
// old), or is no longer the stream's current state (errStateReplaced), or
// a fencing token was installed since p's was judged (errTokenInstalled).
// It holds submitMu from the check to the Submit: open waits for it
// before it starts a new tenure, so that nothing judged by a replaced
// state reaches the new one.
func (h *Holding) submit(ctx context.Context, s *streamState, p produceReq) (*pending, error) {
	key := producerSeq{p.producer, p.seq}
	h.submitMu.Lock()
	defer h.submitMu.Unlock()
	if h.tokenInstalls.Load() != p.tokenGen {
		return nil, errTokenInstalled
	}
	h.mu.Lock()
	if h.streams[p.stream] != s || s.suspect {
		h.mu.Unlock()
		return nil, errStateReplaced
	}
	var v batch.Verdict
	var r batch.Receipt
	var pd *pending
	if p.producer != "" {
		r, v = s.table.Lookup(p.producer, p.seq)
		pd = s.inflight[key]
	}
	h.mu.Unlock()
	switch {
	case pd != nil && pd.sum != sha256.Sum256(p.data):
		return nil, fmt.Errorf("%w: %s's sequence %d is in flight", errPayloadConflict, p.producer, p.seq)
	case pd != nil:
		return pd, nil
	case p.producer == "":
	case v == batch.Duplicate:
		pd = &pending{done: make(chan struct{}), ack: ackOf(r, true)}
		close(pd.done)
		return pd, nil
	case v == batch.TooOld:
		return nil, fmt.Errorf("%w: %s's sequence %d", errSequenceTooOld, p.producer, p.seq)
	}
	off, err := h.Star.Next(p.stream)
	if err != nil {
		h.forget(p.stream, s, err)
		return nil, err
	}
	start := h.n.clk.Now()
	// Counted before it can be decided: a drain or a close that waits
	// for the appends sees it.
	h.acks.Add(1)
	f, err := h.Star.Submit(ctx, Record{Stream: p.stream, Offset: off, Producer: p.producer, Seq: p.seq, Data: p.data}.Encode())
	if err != nil {
		h.acks.Done()
		h.forget(p.stream, s, err)
		return nil, err
	}
	pd = &pending{done: make(chan struct{}), sum: sha256.Sum256(p.data)}
	if p.producer != "" {
		h.mu.Lock()
		s.inflight[key] = pd
		h.mu.Unlock()
	}
	go h.await(f, s, key, off, pd, start)
	return pd, nil
}

// await decides one append: every Future is answered, at the latest when
// the star closes or aborts.
func (h *Holding) await(f *lease.Future, s *streamState, key producerSeq, off uint64, pd *pending, start time.Time) {
	defer h.acks.Done()
	<-f.Done()
	pos, err := f.Wait(context.Background())
	if err == nil {
		pd.ack = ackOf(batch.Receipt{Offset: off, Position: pos}, false)
		h.n.acknowledged(pos, h.n.clk.Now().Sub(start))
	} else {
		pd.err = fmt.Errorf("%w: %w", errUnknownOutcome, err)
	}
	h.mu.Lock()
	if err == nil {
		// Applied in offset order: a retry finds the record in flight
		// until it is in the table.
		s.acked[off] = ackedRecord{key: key, r: batch.Receipt{Offset: off, Position: pos}}
		h.applyLocked(s)
	} else {
		if key.producer != "" {
			delete(s.inflight, key)
		}
		s.broken = true
	}
	if err != nil && !errors.Is(err, roll.ErrDropped) {
		s.suspect = true
	}
	h.mu.Unlock()
	close(pd.done)
}

const defaultMaxStreams = 1024 // the streams a holder leads at most

func (c NodeConfig) maxStreams() int { return cmp.Or(c.MaxStreams, defaultMaxStreams) }

var (
	// errStreamQuota is a produce to a stream past -max-streams: each
	// stream held costs a producer table in memory and keys in the
	// metastore.
	errStreamQuota = errors.New("broker: this broker leads as many streams as it may (-max-streams); not appended")
	// errSequenceTooOld is a producer sequence below the window the
	// table keeps: it may be in the stream already.
	errSequenceTooOld  = errors.New("broker: the producer sequence is too old to judge (it may be in the stream already); not appended")
	errPayloadConflict = errors.New("broker: the producer sequence was sent before with another payload; not appended")
	// errUnknownOutcome is an append that was not acknowledged: it may or
	// may not be in the stream, and a retry with the same producer
	// sequence is safe.
	errUnknownOutcome = errors.New("broker: the append was not acknowledged; retry with the same producer sequence")
	// errStateReplaced is a submit through a stream's state that is no
	// longer the current one, or is suspect.
	errStateReplaced = errors.New("broker: the stream's state was replaced")
)
