package cutlinetest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/roll"
)

// EventKind is what a HistoryEvent records.
type EventKind int

const (
	// Submitted: a host accepted a record and placed it in its writer.
	Submitted EventKind = iota + 1
	// Acked: the host acknowledged a submitted record at Pos.
	Acked
	// Failed: a submitted record was not acknowledged: Err says why.
	Failed
	// Refused: the writer refused the record before placing it (it was
	// halted or closed): it is certainly not in the chain.
	Refused
)

func (o EventKind) String() string {
	switch o {
	case Submitted:
		return "submitted"
	case Acked:
		return "acked"
	case Failed:
		return "failed"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// HistoryEvent is one step of a run as a producer saw it.
type HistoryEvent struct {
	Op   EventKind
	Host string
	Star string
	ID   string
	// Payload is the record's bytes (Submitted, Refused).
	Payload []byte
	// Of is the index in the History of the Submitted event that an Acked
	// or Failed event answers.
	Of int
	// Pos is where the record was acknowledged (Acked).
	Pos chain.Position
	// Err is why it failed (Failed, Refused).
	Err error
}

// History is what a run did, in order: every record submitted, every
// acknowledgement and every failure. The zero value is empty and ready;
// it is safe for concurrent use, so several hosts (a zombie and its
// successor) record into one. Hosts with a loop of their own record with
// Add.
type History struct {
	mu     sync.Mutex
	events []HistoryEvent
}

// Add appends ev and returns its index, which the Of of an Acked or Failed
// event refers to.
func (h *History) Add(ev HistoryEvent) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
	return len(h.events) - 1
}

// Events returns a copy of the events so far.
func (h *History) Events() []HistoryEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HistoryEvent(nil), h.events...)
}

// fate says what became of one submission.
type fate int

const (
	// pending: neither acknowledged nor failed (the history ends before
	// its answer); it may or may not be in the chain.
	pending fate = iota
	// acknowledged: the producer got an acknowledgement.
	acknowledged
	// absent: the failure is definite: the record was refused before it
	// was placed, its slot lies at or past a dead slot (chain.ErrFenced),
	// or a roll dropped it instead of republishing it
	// (roll.ErrDropped), so it is not in the chain.
	absent
	// unknown: the failure leaves the outcome open (an aborted writer, a
	// killed host, a blocked slot, a closed roller): the record may
	// be in the chain, and a producer that retries it may find it twice.
	unknown
)

// fateOf classifies submission i of evs given the answers (Acked or
// Failed events) by submission.
func fateOf(evs []HistoryEvent, i int, answers map[int]HistoryEvent) fate {
	if evs[i].Op == Refused {
		return absent
	}
	a, ok := answers[i]
	switch {
	case !ok:
		return pending
	case a.Op == Acked:
		return acknowledged
	case errors.Is(a.Err, chain.ErrFenced), errors.Is(a.Err, roll.ErrDropped):
		return absent
	}
	return unknown
}
