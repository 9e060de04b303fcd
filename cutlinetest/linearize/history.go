package linearize

import (
	"slices"
	"sync"

	"github.com/anishathalye/porcupine"
)

// History records the operations of several concurrent clients on one
// log, as they saw them: each operation's call before it is sent and its
// return once its answer is in. Times are a logical clock shared by every
// client (one tick per call or return), which orders what happened before
// what, the only thing linearizability depends on. The zero value is
// empty and ready; it is safe for concurrent use.
type History struct {
	mu    sync.Mutex
	clock int64
	ops   []*op
}

type op struct {
	client int
	in     Input
	out    Output
	call   int64
	ret    int64 // 0 while pending
	failed bool  // a read that returned no log: it is left out
	err    error // why an append failed
}

func (h *History) tick() int64 {
	h.clock++
	return h.clock
}

func (h *History) begin(client int, in Input) *op {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := &op{client: client, in: in, call: h.tick()}
	h.ops = append(h.ops, o)
	return o
}

func (h *History) end(o *op, out Output, failed bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o.ret != 0 {
		panic("linearize: an operation returned twice")
	}
	o.out, o.failed, o.err, o.ret = out, failed, err, h.tick()
}

// PendingAppend is an append whose call is recorded; exactly one of its
// methods records its return.
type PendingAppend struct {
	h  *History
	op *op
}

// Append records the call of an append of value by client. offset is
// where its host places it: call Append before the host can place it
// anywhere, and set the offset with At once the host has chosen it (a
// host that picks the offset when it submits).
func (h *History) Append(client int, value string, offset uint64) *PendingAppend {
	return &PendingAppend{h: h, op: h.begin(client, Input{Kind: Append, Value: value, Offset: offset})}
}

// At sets the offset the host placed the append at, before its return is
// recorded.
func (p *PendingAppend) At(offset uint64) {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	p.op.in.Offset = offset
}

// Acked records that the append was acknowledged: the client was told its
// value is in the log at its offset.
func (p *PendingAppend) Acked() { p.h.end(p.op, Output{Outcome: Acked}, false, nil) }

// Unknown records that the append failed with an outcome the client cannot
// know (err says why): it may be in the log at its offset or not at all.
func (p *PendingAppend) Unknown(err error) { p.h.end(p.op, Output{Outcome: Unknown}, false, err) }

// Absent records that the append certainly did not happen: it was refused
// before it was placed, or failed definitely.
func (p *PendingAppend) Absent(err error) { p.h.end(p.op, Output{Outcome: Absent}, false, err) }

// PendingRead is a read whose call is recorded; exactly one of its methods
// records its return.
type PendingRead struct {
	h  *History
	op *op
}

// Read records the call of a read of the whole log by client.
func (h *History) Read(client int) *PendingRead { return h.ReadFrom(client, 0) }

// ReadFrom records the call of a read of the log from offset by client.
func (h *History) ReadFrom(client int, offset uint64) *PendingRead {
	return &PendingRead{h: h, op: h.begin(client, Input{Kind: Read, Offset: offset})}
}

// Done records the values the read returned, in offset order from its
// offset.
func (r *PendingRead) Done(log []string) {
	r.h.end(r.op, Output{Log: slices.Clone(log)}, false, nil)
}

// Trimmed records that the read was answered trimmed: its offset lies
// below the retention point, which the answer named start.
func (r *PendingRead) Trimmed(start uint64) {
	r.h.end(r.op, Output{Trimmed: true, Start: start}, false, nil)
}

// Failed records that the read returned no log (an unreachable zone): it
// changed nothing and is left out of the check.
func (r *PendingRead) Failed(err error) { r.h.end(r.op, Output{}, true, err) }

// Admitted records, while the read goes on, that its first answer came
// and was not a trimmed one: its offset passed the check against the
// retention point, somewhere between the read's call and now. It records
// an Admit with the read's call and a return of now; call it at most
// once, before the read's own return.
func (r *PendingRead) Admitted() {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	o := r.op
	r.h.ops = append(r.h.ops, &op{client: o.client, in: Input{Kind: Admit, Offset: o.in.Offset}, out: Output{Outcome: Acked}, call: o.call, ret: r.h.tick()})
}

// PendingRetain is a retain whose call is recorded; exactly one of its
// methods records its return.
type PendingRetain struct {
	h  *History
	op *op
}

// Retain records the call of a move of the retention point up to offset
// by client.
func (h *History) Retain(client int, offset uint64) *PendingRetain {
	return &PendingRetain{h: h, op: h.begin(client, Input{Kind: Retain, Offset: offset})}
}

// Acked records that the retention point moved (or already was at or past
// the offset).
func (p *PendingRetain) Acked() { p.h.end(p.op, Output{Outcome: Acked}, false, nil) }

// Unknown records that the retain failed in a way that leaves open
// whether the point moved (err says why).
func (p *PendingRetain) Unknown(err error) { p.h.end(p.op, Output{Outcome: Unknown}, false, err) }

// Absent records that the retain certainly changed nothing: it was
// refused before it wrote.
func (p *PendingRetain) Absent(err error) { p.h.end(p.op, Output{Outcome: Absent}, false, err) }

// Stats counts a history's operations.
type Stats struct {
	// Ops is the number of operations checked: appends and retains of
	// every outcome, admits, and the reads that returned a log or a
	// trimmed answer.
	Ops int
	// Appends by outcome; Pending are appends that never returned, checked
	// as Unknown.
	Acked, Unknown, Absent, Pending int
	// Reads that returned a log, those answered trimmed, and those that
	// failed (left out); Admits of reads.
	Reads, Trimmed, FailedReads, Admits int
	// Retains of every outcome (one that never returned is checked as
	// Unknown), and the highest retention point an acknowledged one set.
	Retains int
	Start   uint64
	// Clients is the number of distinct clients.
	Clients int
	// Longest is the length of the longest log a read returned.
	Longest int
}

// Stats counts the operations recorded so far.
func (h *History) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s Stats
	clients := map[int]bool{}
	for _, o := range h.ops {
		clients[o.client] = true
		switch {
		case o.in.Kind == Read && (o.ret == 0 || o.failed):
			s.FailedReads++
			continue
		case o.in.Kind == Read && o.out.Trimmed:
			s.Trimmed++
		case o.in.Kind == Read:
			s.Reads++
			s.Longest = max(s.Longest, len(o.out.Log))
		case o.in.Kind == Admit:
			s.Admits++
		case o.in.Kind == Retain:
			s.Retains++
			if o.ret != 0 && o.out.Outcome == Acked {
				s.Start = max(s.Start, o.in.Offset)
			}
		case o.ret == 0:
			s.Pending++
		case o.out.Outcome == Acked:
			s.Acked++
		case o.out.Outcome == Unknown:
			s.Unknown++
		case o.out.Outcome == Absent:
			s.Absent++
		}
		s.Ops++
	}
	s.Clients = len(clients)
	return s
}

// Operations returns the history as porcupine sees it. A read that failed
// or never returned is left out (a read changes nothing). An append or a
// retain whose outcome is unknown, or that never returned, gets a return
// time after every other operation's, so that the checker may linearize
// it anywhere after its call, including after every read (where no read
// sees it).
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	late := h.clock + 1
	out := make([]porcupine.Operation, 0, len(h.ops))
	for _, o := range h.ops {
		if o.in.Kind == Read && (o.ret == 0 || o.failed) {
			continue
		}
		p := porcupine.Operation{ClientId: o.client, Input: o.in, Call: o.call, Output: o.out, Return: o.ret}
		if (o.in.Kind == Append || o.in.Kind == Retain) && (o.ret == 0 || o.out.Outcome == Unknown) {
			p.Output = Output{Outcome: Unknown}
			p.Return = late
			late++
		}
		out = append(out, p)
	}
	return out
}

// Clone returns a copy of the history so far, to which operations can be
// added without changing h (a test that plants a violation in a real
// history). Operations still pending in h stay pending in the copy.
func (h *History) Clone() *History {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := &History{clock: h.clock, ops: make([]*op, len(h.ops))}
	for i, o := range h.ops {
		cp := *o
		c.ops[i] = &cp
	}
	return c
}
