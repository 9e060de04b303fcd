package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/lease"
)

func fakeClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// Every record is acknowledged in order, with offsets from 0, and reads
// back exactly once.
func TestAcksInOrder(t *testing.T) {
	w := newWorld(t, "orders")
	p := w.producer(batch.Options{MaxRecords: 7})
	const n = 100
	acks := make([]*batch.Ack, n)
	for i := range n {
		acks[i] = add(t, p, "orders", rec("orders", i))
	}
	var last chain.Position
	for i, a := range acks {
		pos, off, err := wait(t, a)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if off != uint64(i) || a.Offset() != uint64(i) {
			t.Fatalf("record %d acknowledged at offset %d (Offset %d)", i, off, a.Offset())
		}
		if pos.Compare(last) < 0 {
			t.Fatalf("record %d at %v, before the previous record's %v", i, pos, last)
		}
		last = pos
	}
	st := p.Stats()
	if st.Records != n || st.Failed != 0 || st.Flights < n/7 {
		t.Fatalf("stats %+v: want %d records in at least %d flights", st, n, n/7)
	}
	if err := p.Close(bounded(t)); err != nil {
		t.Fatalf("close: %v", err)
	}
	w.closeStar()
	got := w.read("orders")
	want := make([]string, n)
	for i := range want {
		want[i] = rec("orders", i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read back %d records, want %d in order:\n%q", len(got), n, got)
	}
}

// A flight goes when it is full, by bytes or by records, without waiting
// for Linger.
func TestSizeTriggered(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts batch.Options
		per  int // records per full flight
	}{
		{"records", batch.Options{MaxRecords: 5}, 5},
		// 4 + 10 header bound, 40 + 1 directory bound, 101 per record.
		{"bytes", batch.Options{MaxBytes: 55 + 4*101}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "s")
			clk := fakeClock()
			tc.opts.Linger, tc.opts.Clock = batch.MaxLinger, clk
			p := w.producer(tc.opts)
			var acks []*batch.Ack
			for i := range tc.per + 1 {
				acks = append(acks, add(t, p, "s", fmt.Sprintf("%0100d", i)))
			}
			pos, _, err := wait(t, acks[tc.per-1])
			if err != nil {
				t.Fatalf("the full flight: %v", err)
			}
			for i, a := range acks[:tc.per] {
				if got, _, err := wait(t, a); err != nil || got != pos {
					t.Fatalf("record %d: %v at %v, want the full flight's %v", i, err, got, pos)
				}
			}
			// The last record waits for its linger time, which has not
			// come.
			if acks[tc.per].Decided() {
				t.Fatal("a record of a flight that is not full went before its linger time")
			}
			if st := p.Stats(); st.Flights != 1 || st.Records != uint64(tc.per) {
				t.Fatalf("stats %+v, want one flight of %d records", st, tc.per)
			}
			clk.Advance(time.Hour)
			if pos2, _, err := wait(t, acks[tc.per]); err != nil || pos2.Compare(pos) <= 0 {
				t.Fatalf("the lingering record: %v at %v, after %v", err, pos2, pos)
			}
		})
	}
}

// A flight that is not full goes when its first record has lingered for
// Linger, on the clock.
func TestLingerTriggered(t *testing.T) {
	w := newWorld(t, "s")
	clk := fakeClock()
	p := w.producer(batch.Options{Linger: 5 * time.Millisecond, Clock: clk})
	a := add(t, p, "s", "one")
	failfast.Timers(t, clk, 1, "the first record's linger timer")
	clk.Advance(4 * time.Millisecond)
	b := add(t, p, "s", "two")
	if a.Decided() || b.Decided() {
		t.Fatal("records went before their linger time")
	}
	if n := clk.Waiters(); n != 1 {
		t.Fatalf("%d timers pending, want one for the flight", n)
	}
	clk.Advance(time.Millisecond)
	pa, _, err := wait(t, a)
	if err != nil {
		t.Fatal(err)
	}
	pb, off, err := wait(t, b)
	if err != nil || pb != pa || off != 1 {
		t.Fatalf("second record: %v at %v offset %d, want the first's flight %v, offset 1", err, pb, off, pa)
	}
	if st := p.Stats(); st.Flights != 1 || st.Records != 2 {
		t.Fatalf("stats %+v, want one flight of 2", st)
	}
	// The next record starts a flight, and a timer, of its own.
	c := add(t, p, "s", "three")
	failfast.Timers(t, clk, 1, "the third record's linger timer")
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	if pc, _, err := wait(t, c); err != nil || pc.Compare(pa) <= 0 {
		t.Fatalf("third record: %v at %v", err, pc)
	}
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("Flush left %d timers", n)
	}
}

// Records of several streams share one flight; each stream reads back
// its own.
func TestStreamsShareFlight(t *testing.T) {
	streams := []string{"a", "b", "c"}
	w := newWorld(t, streams...)
	p := w.producer(batch.Options{Linger: batch.MaxLinger, Clock: fakeClock()})
	var acks []*batch.Ack
	for i := range 4 {
		for _, s := range streams {
			acks = append(acks, add(t, p, s, rec(s, i)))
		}
	}
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	pos, _, err := wait(t, acks[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		if got, _, err := wait(t, a); err != nil || got != pos {
			t.Fatalf("%s/%d: %v at %v, want %v", a.Stream(), a.Offset(), err, got, pos)
		}
	}
	payload, err := w.reader.Reader.Read(w.ctx, starName, pos)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := batch.Locate(payload)
	if err != nil || len(spans) != 3 {
		t.Fatalf("the flight carries %v (%v), want three spans", spans, err)
	}
	for _, s := range streams {
		recs, err := batch.Entries(payload, s)
		if err != nil || len(recs) != 4 || string(recs[3].Data) != rec(s, 3) || recs[3].Offset != 3 {
			t.Fatalf("records of %s in the flight: %v %v", s, recs, err)
		}
	}
	if err := p.Close(bounded(t)); err != nil {
		t.Fatal(err)
	}
	w.closeStar()
	for _, s := range streams {
		if got := w.read(s); !slices.Equal(got, []string{rec(s, 0), rec(s, 1), rec(s, 2), rec(s, 3)}) {
			t.Fatalf("stream %s reads %q", s, got)
		}
	}
}

// Producers on several goroutines, several streams, a small buffer: every
// acknowledged record reads back exactly once, in each stream's order.
func TestConcurrentReadBack(t *testing.T) {
	streams := []string{"a", "b", "c"}
	w := newWorld(t, streams...)
	p := w.producer(batch.Options{MaxBytes: 2048, MaxBuffered: 4096})
	const n = 300
	ctx := bounded(t)
	var wg sync.WaitGroup
	errs := make(chan error, len(streams))
	for _, s := range streams {
		wg.Go(func() {
			var acks []*batch.Ack
			for i := range n {
				a, err := p.Add(ctx, s, []byte(rec(s, i)+fmt.Sprintf("%0*d", i%50, 0)))
				if err != nil {
					errs <- err
					return
				}
				acks = append(acks, a)
			}
			for i, a := range acks {
				if _, off, err := wait(t, a); err != nil || off != uint64(i) {
					errs <- fmt.Errorf("%s record %d: offset %d: %v", s, i, off, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := p.Close(bounded(t)); err != nil {
		t.Fatal(err)
	}
	w.closeStar()
	for _, s := range streams {
		got := w.read(s)
		if len(got) != n {
			t.Fatalf("stream %s reads %d records, want %d", s, len(got), n)
		}
		for i, r := range got {
			if want := rec(s, i) + fmt.Sprintf("%0*d", i%50, 0); r != want {
				t.Fatalf("stream %s offset %d reads %q, want %q", s, i, r, want)
			}
		}
	}
	if st := p.Stats(); st.Records != 3*n || st.Flights >= 3*n {
		t.Fatalf("stats %+v: want %d records in fewer flights", st, 3*n)
	}
}

// The star goes away mid-stream: what was acknowledged stays, the
// records gathering and everything after them fail, and the stream
// refuses more until Reset.
func TestStarAbortedMidStream(t *testing.T) {
	w := newWorld(t, "a", "b")
	p := w.producer(batch.Options{Linger: batch.MaxLinger, Clock: fakeClock()})
	first := add(t, p, "a", "a0")
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wait(t, first); err != nil {
		t.Fatalf("the first record: %v", err)
	}
	var later []*batch.Ack
	for i := range 3 {
		later = append(later, add(t, p, "a", fmt.Sprint("a", i+1)), add(t, p, "b", fmt.Sprint("b", i)))
	}
	w.star.Abort()
	w.closed = true
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	for _, a := range later {
		_, _, err := wait(t, a)
		var re *batch.RecordError
		if !errors.As(err, &re) || !errors.Is(err, batch.ErrFailed) || !closedBy(err, "lease: star closed") || re.Stream != a.Stream() || re.Offset != a.Offset() {
			t.Fatalf("%s/%d after the star closed: %v", a.Stream(), a.Offset(), err)
		}
	}
	_, err := p.Add(bounded(t), "a", []byte("refused"))
	var se *batch.StreamError
	if !errors.As(err, &se) || se.Stream != "a" || !errors.Is(err, batch.ErrFailed) || !closedBy(err, "lease: star closed") {
		t.Fatalf("Add on the failed stream: %v", err)
	}
	p.Reset("a")
	a, err := p.Add(bounded(t), "a", []byte("after reset"))
	if err != nil {
		t.Fatalf("Add after Reset: %v", err)
	}
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wait(t, a); !closedBy(err, "lease: star closed") {
		t.Fatalf("a record for a closed star: %v", err)
	}
	if st := p.Stats(); st.Records != 1 || st.Failed != 7 {
		t.Fatalf("stats %+v: want 1 record acknowledged, 7 failed", st)
	}
}

// A stream that departs fails alone: the flight it shared goes on
// without it, and its records queued behind fail too (or are refused,
// once the stream is known failed).
func TestDepartedStreamFailsAlone(t *testing.T) {
	w := newWorld(t, "a", "b")
	p := w.producer(batch.Options{MaxRecords: 4, Linger: batch.MaxLinger, Clock: fakeClock()})
	a0, b0 := add(t, p, "a", "a0"), add(t, p, "b", "b0")
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*batch.Ack{a0, b0} {
		if _, _, err := wait(t, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.star.Finish(w.ctx, "a", lease.ReasonHandoff); err != nil {
		t.Fatal(err)
	}
	var as, bs []*batch.Ack
	for i := range 4 { // two flights of four
		// The first flight may fail a before the second is gathered:
		// then a's later records are refused at once.
		a, err := p.Add(bounded(t), "a", []byte(fmt.Sprint("a", i+1)))
		switch {
		case err == nil:
			as = append(as, a)
		case !errors.Is(err, batch.ErrFailed) || !errors.Is(err, lease.ErrNotHeld):
			t.Fatalf("add a%d after a left: %v", i+1, err)
		}
		bs = append(bs, add(t, p, "b", fmt.Sprint("b", i+1)))
	}
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if _, _, err := wait(t, a); !errors.Is(err, batch.ErrFailed) || !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("a/%d after a left: %v", a.Offset(), err)
		}
	}
	for i, a := range bs {
		if _, off, err := wait(t, a); err != nil || off != uint64(i+1) {
			t.Fatalf("b/%d: offset %d: %v", i+1, off, err)
		}
	}
	if _, err := p.Add(bounded(t), "b", []byte("b5")); err != nil {
		t.Fatalf("b goes on: %v", err)
	}
	if err := p.Close(bounded(t)); err != nil {
		t.Fatal(err)
	}
	w.closeStar()
	if got := w.read("a"); !slices.Equal(got, []string{"a0"}) {
		t.Fatalf("a reads %q", got)
	}
	if got := w.read("b"); !slices.Equal(got, []string{"b0", "b1", "b2", "b3", "b4", "b5"}) {
		t.Fatalf("b reads %q", got)
	}
}

// A record on a stream the star does not hold is refused at once.
func TestNotHeld(t *testing.T) {
	w := newWorld(t, "a")
	p := w.producer(batch.Options{})
	if _, err := p.Add(bounded(t), "nosuch", []byte("x")); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Add on a stream not held: %v", err)
	}
	if _, err := p.Add(bounded(t), "bad name", []byte("x")); !errors.Is(err, cutline.ErrInvalid) {
		t.Fatalf("Add on a bad stream name: %v", err)
	}
	_, err := p.Add(bounded(t), "a", make([]byte, batch.DefaultMaxBytes))
	var se *batch.SizeError
	if !errors.As(err, &se) || !errors.Is(err, batch.ErrTooLarge) || se.Max >= batch.DefaultMaxBytes {
		t.Fatalf("a record larger than a flight: %v", err)
	}
}

func TestOptions(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		field string
		opts  batch.Options
	}{
		{"MaxBytes", batch.Options{MaxBytes: 10}},
		{"MaxBytes", batch.Options{MaxBytes: chain.MaxPayload + 1}},
		{"MaxRecords", batch.Options{MaxRecords: -1}},
		{"Linger", batch.Options{Linger: -time.Second}},
		{"MaxBuffered", batch.Options{MaxBytes: 4096, MaxBuffered: 4095}},
		{"MaxBuffered", batch.Options{MaxBuffered: -1}},
		{"MaxBuffered", batch.Options{MaxBuffered: batch.MaxMaxBuffered + 1}},
		{"MaxRecords", batch.Options{MaxRecords: batch.MaxMaxRecords + 1}},
		{"Linger", batch.Options{Linger: batch.MaxLinger + 1}},
	} {
		_, err := batch.New(w.star, tc.opts)
		var ce *cutline.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, cutline.ErrInvalid) {
			t.Errorf("options %+v: %v, want a refused %s", tc.opts, err, tc.field)
		}
	}
	if _, err := batch.New(nil, batch.Options{}); !errors.Is(err, cutline.ErrInvalid) {
		t.Errorf("nil star: %v", err)
	}
	if _, err := batch.NewTarget(nil, batch.Options{}); !errors.Is(err, cutline.ErrInvalid) {
		t.Errorf("nil target: %v", err)
	}
}

// heldTarget takes flights and decides them only when the test says.
type heldTarget struct {
	mu      sync.Mutex
	next    uint64
	flights []*heldFlight
	added   chan struct{}
	decide  bool // decide every flight from now on
}

// release decides every flight, and every later one at once.
func (h *heldTarget) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.decide = true
	for _, f := range h.flights {
		close(f.done)
	}
}

type heldFlight struct {
	payload []byte
	done    chan struct{}
	slot    uint64
}

func (h *heldTarget) Submit(ctx context.Context, payload []byte) (batch.Pending, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := &heldFlight{payload: payload, done: make(chan struct{}), slot: uint64(len(h.flights))}
	h.flights = append(h.flights, f)
	if h.decide {
		close(f.done)
	}
	select {
	case h.added <- struct{}{}:
	default:
	}
	return f, nil
}

func (h *heldTarget) Next(string) (uint64, error) { return h.next, nil }

func (f *heldFlight) Wait(ctx context.Context) (chain.Position, error) {
	select {
	case <-f.done:
		return chain.Position{Epoch: 1, Slot: f.slot}, nil
	case <-ctx.Done():
		return chain.Position{}, ctx.Err()
	}
}

// Add blocks while MaxBuffered bytes are undecided, and goes on when a
// flight releases them.
func TestMemoryBound(t *testing.T) {
	h := &heldTarget{next: 40, added: make(chan struct{}, 1)}
	p, err := batch.NewTarget(h, batch.Options{MaxBytes: 1024, MaxBuffered: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.Close(ctx)
	}()
	rec := make([]byte, 200)
	var acks []*batch.Ack
	for range 3 { // 3 × (200 + 64) bytes held
		acks = append(acks, add(t, p, "s", string(rec)))
	}
	full, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Add(full, "s", rec); !errors.Is(err, context.Canceled) {
		t.Fatalf("Add past MaxBuffered: %v, want it to block until its context ends", err)
	}
	h.release()
	for i, a := range acks {
		if _, off, err := wait(t, a); err != nil || off != uint64(40+i) {
			t.Fatalf("record %d: offset %d, %v", i, off, err)
		}
	}
	a, err := p.Add(bounded(t), "s", rec)
	if err != nil || a.Offset() != 43 {
		t.Fatalf("Add once bytes are released: %v", err)
	}
	if _, off, err := wait(t, a); err != nil || off != 43 {
		t.Fatalf("the record that waited: offset %d, %v", off, err)
	}
}

// Close ends a producer whose flights are never decided once its context
// ends: their records fail with ErrClosed.
func TestCloseGivesUp(t *testing.T) {
	h := &heldTarget{added: make(chan struct{}, 1)}
	p, err := batch.NewTarget(h, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := add(t, p, "s", "never decided")
	select {
	case <-h.added:
	case <-bounded(t).Done():
		t.Fatal("no flight was sent")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("close: %v", err)
	}
	if _, _, err := wait(t, a); !closedBy(err, "batch: producer closed") || !errors.Is(err, batch.ErrFailed) {
		t.Fatalf("a record pending at close: %v", err)
	}
	if _, err := p.Add(bounded(t), "s", nil); !closedBy(err, "batch: producer closed") {
		t.Fatalf("Add after Close: %v", err)
	}
	if err := p.Close(bounded(t)); !closedBy(err, "batch: producer closed") {
		t.Fatalf("second Close: %v", err)
	}
}

// The star's session ends mid-stream, with records gathering: they fail,
// what was acknowledged stays, and a successor star continues the stream
// right after it. Every acknowledged record reads back exactly once.
func TestSessionLostTakeover(t *testing.T) {
	w := newWorld(t, "s")
	clk := fakeClock()
	p := w.producer(batch.Options{Linger: batch.MaxLinger, Clock: clk})
	var acked []string
	for i := range 5 {
		acked = append(acked, rec("s", i))
		add(t, p, "s", rec("s", i))
	}
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	var lost []*batch.Ack
	for i := 5; i < 8; i++ {
		lost = append(lost, add(t, p, "s", rec("s", i)))
	}
	w.store.Expire(w.sess)
	select {
	case <-w.star.Lost():
	case <-bounded(t).Done():
		t.Fatal("the star did not see its session end")
	}
	if err := p.Flush(bounded(t)); err != nil {
		t.Fatal(err)
	}
	// The star may have taken the flight before it saw its session end:
	// then it is acknowledged (and the successor finds it), or it failed.
	failed := 0
	for _, a := range lost {
		_, _, err := wait(t, a)
		switch {
		case err == nil:
			if failed > 0 {
				t.Fatalf("s/%d acknowledged after a record before it failed", a.Offset())
			}
			acked = append(acked, rec("s", int(a.Offset())))
		case errors.Is(err, batch.ErrFailed) && (errors.Is(err, lease.ErrSessionLost) || errors.Is(err, lease.ErrDeparting) || errors.Is(err, lease.ErrNotHeld)):
			failed++
		default:
			t.Fatalf("s/%d after the session ended: %v", a.Offset(), err)
		}
	}
	if failed > 0 {
		if _, err := p.Add(bounded(t), "s", []byte("refused")); !errors.Is(err, batch.ErrFailed) {
			t.Fatalf("Add on the failed stream: %v", err)
		}
	}
	t.Logf("%d records gathering when the session ended failed, %d were acknowledged", failed, len(lost)-failed)

	// The successor opens the stream where the acknowledged records end.
	succ, _ := w.start("star-2")
	defer succ.Abort()
	ten, err := succ.OpenWait(bounded(t), "s", lease.OpenOptions{}, time.Millisecond)
	if err != nil {
		t.Fatalf("successor open: %v", err)
	}
	next := uint64(len(acked))
	if ten.Next != next {
		t.Fatalf("the successor continues at %d, want %d", ten.Next, next)
	}
	// The lost star's fenced epochs as they lie in the zones: each
	// published cut a dead slot, every slot below it committed. (A star
	// that saw its session end in time leaves its epoch released, not
	// fenced.)
	for rec, err := range w.reader.Minter.Epochs(bounded(t), starName) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Fenced() {
			w.env.VerifyEpoch(starName, rec.Epoch, nil)
		}
	}
	q, err := batch.New(succ, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r := fmt.Sprint("retried-", i)
		acked = append(acked, r)
		if _, off, err := wait(t, add(t, q, "s", r)); err != nil || off != next+uint64(i) {
			t.Fatalf("successor record %d: offset %d, %v", i, off, err)
		}
	}
	if err := q.Close(bounded(t)); err != nil {
		t.Fatal(err)
	}
	if err := succ.Close(bounded(t)); err != nil {
		t.Fatal(err)
	}
	if got := w.read("s"); !slices.Equal(got, acked) {
		t.Fatalf("the stream reads %q, want %q", got, acked)
	}
}

// closedBy tells whether err is a closed error, and the one of the object
// its message names ("lease: star closed", "batch: producer closed"):
// both match cutline.ErrClosed.
func closedBy(err error, msg string) bool {
	return errors.Is(err, cutline.ErrClosed) && strings.Contains(err.Error(), msg)
}
