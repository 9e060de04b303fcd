package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cutline/cutline/examples/broker/node"
)

// The producer's retry backoff, and the page size of its reads.
const (
	retryMin, retryMax = 20 * time.Millisecond, 320 * time.Millisecond
	readPage           = 100
)

// producer is a client of the brokers' API, as a team would write one:
// it sends the numbered records of one producer id, each until it is
// acknowledged, always with the same sequence (a retry is safe, also
// after a takeover: the brokers deduplicate), to the node a 503 names as
// the holder, or to the next node when none is named.
type producer struct {
	id     string
	stream string
	hc     *http.Client
	token  string
	names  []string          // the nodes, in order
	urls   map[string]string // peer → base URL of its API

	wg sync.WaitGroup

	mu      sync.Mutex
	target  string           // where a record goes first
	acks    map[uint64]acked // sequence → its acknowledgement
	answers []answer         // every answer to a produce, in order
	errs    []error          // deliveries that gave up
	changed chan struct{}    // closed and replaced with every acknowledgement
}

// acked is an acknowledgement: where the record is, by whom and when.
type acked struct {
	node.Ack
	peer string
	at   time.Time
}

// answer is one answer to a produce: its status (0 when the request got
// no answer).
type answer struct {
	peer string
	at   time.Time
	code int
}

func newProducer(hc *http.Client, token, stream string, names []string, urls map[string]string) *producer {
	return &producer{id: "producer-1", stream: stream, hc: hc, token: token, names: names, urls: urls, target: names[0],
		acks: map[uint64]acked{}, changed: make(chan struct{})}
}

// data is the content of record seq.
func (p *producer) data(seq uint64) []byte {
	return fmt.Appendf(nil, "order %d: %d units of item %d", seq, 1+seq%7, seq*37%101)
}

// start delivers seqs in the background, workers at a time; wait waits
// for every delivery started.
func (p *producer) start(ctx context.Context, seqs []uint64, workers int) {
	next := make(chan uint64)
	for range workers {
		p.wg.Go(func() {
			for seq := range next {
				if err := p.deliver(ctx, seq); err != nil {
					p.mu.Lock()
					p.errs = append(p.errs, err)
					p.mu.Unlock()
				}
			}
		})
	}
	p.wg.Go(func() {
		defer close(next)
		for _, seq := range seqs {
			select {
			case next <- seq:
			case <-ctx.Done():
				return
			}
		}
	})
}

// wait waits for every delivery started, and returns the first that
// gave up.
func (p *producer) wait() error {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) > 0 {
		return fmt.Errorf("%d records not delivered; the first: %w", len(p.errs), p.errs[0])
	}
	return nil
}

// deliver sends record seq until a node acknowledges it. 503 (this node
// cannot take it now), 500 and a request without an answer are retried;
// any other answer is an error.
func (p *producer) deliver(ctx context.Context, seq uint64) error {
	peer, code, a, e, err := p.send(ctx, seq)
	switch {
	case err != nil:
		return err
	case code != http.StatusOK:
		return fmt.Errorf("record %d: %s answered %d: %s", seq, peer, code, e.Error)
	}
	return p.acknowledged(seq, peer, a)
}

// send sends record seq, always with the same sequence, until a node
// answers other than 503 or 500, and returns that node and its answer.
func (p *producer) send(ctx context.Context, seq uint64) (string, int, node.Ack, node.ErrorBody, error) {
	backoff := retryMin
	for {
		p.mu.Lock()
		peer := p.target
		p.mu.Unlock()
		code, a, e, err := p.post(ctx, peer, p.id, seq, p.data(seq))
		switch {
		case ctx.Err() != nil:
			return peer, 0, a, e, fmt.Errorf("record %d: %w", seq, ctx.Err())
		case err == nil && code != http.StatusServiceUnavailable && code != http.StatusInternalServerError:
			return peer, code, a, e, nil
		}
		p.follow(peer, e.Holder)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return peer, 0, a, e, fmt.Errorf("record %d: %w", seq, ctx.Err())
		}
		backoff = min(2*backoff, retryMax)
	}
}

// resent counts the answers to records sent again.
type resent struct {
	duplicates, tooOld int
}

// resend sends every record of seqs once more, workers at a time, as a
// client that lost its answers would: each must be answered with its
// first acknowledgement (a duplicate), or refused as too old to judge
// (409); a record appended again, or any other answer, is an error.
func (p *producer) resend(ctx context.Context, seqs []uint64, workers int) (resent, error) {
	first := p.acknowledgements()
	var mu sync.Mutex
	var r resent
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, seq := range seqs {
		g.Go(func() error {
			peer, code, a, e, err := p.send(gctx, seq)
			switch {
			case err != nil:
				return err
			case code == http.StatusConflict:
				mu.Lock()
				r.tooOld++
				mu.Unlock()
				return nil
			case code != http.StatusOK:
				return fmt.Errorf("record %d sent again: %s answered %d: %s", seq, peer, code, e.Error)
			case !a.Duplicate || a.Offset != first[seq].Offset:
				return fmt.Errorf("%w: record %d, acknowledged at offset %d, sent again: %s answered offset %d (duplicate %v)",
					errDidNotHold, seq, first[seq].Offset, peer, a.Offset, a.Duplicate)
			}
			mu.Lock()
			r.duplicates++
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	return r, err
}

// follow moves the target after node failed: to the holder it named, or
// to the next node.
func (p *producer) follow(peer, holder string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case holder != "" && holder != peer && p.urls[holder] != "":
		p.target = holder
	case p.target == peer:
		p.target = p.names[(slices.Index(p.names, peer)+1)%len(p.names)]
	}
}

func (p *producer) acknowledged(seq uint64, peer string, a node.Ack) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.acks[seq]; ok && prev.Offset != a.Offset {
		return fmt.Errorf("record %d acknowledged at offset %d by %s and at offset %d by %s", seq, prev.Offset, prev.peer, a.Offset, peer)
	}
	p.acks[seq] = acked{Ack: a, peer: peer, at: time.Now()}
	close(p.changed)
	p.changed = make(chan struct{})
	return nil
}

// post sends one record to node and returns the answer.
func (p *producer) post(ctx context.Context, peer, producer string, seq uint64, data []byte) (int, node.Ack, node.ErrorBody, error) {
	var a node.Ack
	var e node.ErrorBody
	h := http.Header{node.HeaderProducer: {producer}, node.HeaderSequence: {strconv.FormatUint(seq, 10)}}
	code, body, _, err := p.do(ctx, peer, http.MethodPost, "/v1/streams/"+p.stream+"/records", h, data)
	p.mu.Lock()
	p.answers = append(p.answers, answer{peer: peer, at: time.Now(), code: code})
	p.mu.Unlock()
	if err != nil {
		return 0, a, e, err
	}
	if code == http.StatusOK {
		err = json.Unmarshal(body, &a)
	} else {
		_ = json.Unmarshal(body, &e) // a 500 may be no JSON
	}
	return code, a, e, err
}

// do sends one request with the bearer token.
func (p *producer) do(ctx context.Context, peer, method, path string, h http.Header, body []byte) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.urls[peer]+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	maps.Copy(req.Header, h)
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, raw, resp.Header, err
}

// acknowledgements returns a copy of the acknowledgements.
func (p *producer) acknowledgements() map[uint64]acked {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.acks)
}

// waitAck blocks until node has acknowledged a record, or ctx ends.
func (p *producer) waitAck(ctx context.Context, peer string) (time.Time, error) {
	for {
		p.mu.Lock()
		var first time.Time
		for _, a := range p.acks {
			if a.peer == peer && (first.IsZero() || a.at.Before(first)) {
				first = a.at
			}
		}
		ch := p.changed
		p.mu.Unlock()
		if !first.IsZero() {
			return first, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %s to acknowledge: %w", peer, ctx.Err())
		}
	}
}

// answersOf counts node's answers since t by status.
func (p *producer) answersOf(peer string, since time.Time) map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int]int{}
	for _, a := range p.answers {
		if a.peer == peer && !a.at.Before(since) {
			out[a.code]++
		}
	}
	return out
}

// read reads the whole stream back through node's API, readPage records
// a request at most, each request from where the last one said to go on
// (an answer stops early at the broker's bound of bytes).
func (p *producer) read(ctx context.Context, peer string) ([]node.Consumed, error) {
	var all []node.Consumed
	from := uint64(0)
	for {
		path := fmt.Sprintf("/v1/streams/%s/records?offset=%d&limit=%d", p.stream, from, readPage)
		code, body, h, err := p.do(ctx, peer, http.MethodGet, path, nil, nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%s answered %d: %s", peer, code, body)
		}
		var page []node.Consumed
		if err == nil {
			err = json.Unmarshal(body, &page)
		}
		var next, cont uint64
		if err == nil {
			next, err = strconv.ParseUint(h.Get(node.HeaderNext), 10, 64)
		}
		if err == nil {
			cont, err = strconv.ParseUint(h.Get(node.HeaderContinue), 10, 64)
		}
		if err == nil && cont != from+uint64(len(page)) {
			err = fmt.Errorf("%s: %d after %d records from %d", node.HeaderContinue, cont, len(page), from)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s through %s: %w", p.stream, peer, err)
		}
		all = append(all, page...)
		if from = cont; from >= next || len(page) == 0 {
			return all, nil
		}
	}
}
