package linearize

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation does to the log.
type Kind uint8

const (
	// Append places one value at the end of the log.
	Append Kind = iota + 1
	// Read returns the log from its Offset to its end (the whole log from
	// offset 0), or a trimmed answer: Offset lies below the retention
	// point, which the answer names.
	Read
	// Retain moves the log's retention point up to its Offset: reads
	// below it are answered trimmed. The values stay in the model; only
	// what a read may answer changes.
	Retain
	// Admit is the first half of a read that was not answered trimmed:
	// it passed the check of its Offset against the retention point. Its
	// call is the read's, its return the read's first answer. A read is
	// not atomic (it reads the index page by page), so its check of the
	// retention point and the end of the log it sees are two moments:
	// Admit is the first, the Read the second.
	Admit
)

func (k Kind) String() string {
	switch k {
	case Append:
		return "append"
	case Read:
		return "read"
	case Retain:
		return "retain"
	case Admit:
		return "admit"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Outcome is what the client of an append was told.
type Outcome uint8

const (
	// Acked: the append was acknowledged at its offset. It took effect,
	// once, at that offset, somewhere between its call and its return.
	Acked Outcome = iota + 1
	// Unknown: the append failed in a way that leaves its fate open (a
	// crashed host, an aborted writer, a lost answer, a cover that did not
	// land). It took effect at its offset or not at all. Its return is
	// recorded after every other operation, so that the checker may place
	// it anywhere after its call, or nowhere that any read can see.
	Unknown
	// Absent: the append was refused before it was placed, or failed
	// definitely (at or past a dead slot, dropped by a roll): it never
	// takes effect.
	Absent
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Unknown:
		return "unknown"
	case Absent:
		return "absent"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Input is an operation's call: an Append of Value at Offset (the offset
// the host gave the record when it submitted it), a Read or an Admit from
// Offset, or a Retain up to Offset.
type Input struct {
	Kind   Kind
	Value  string
	Offset uint64
}

// Output is an operation's return: an append's or a retain's Outcome, or
// the values a Read returned, in offset order from its Offset; or, for a
// Read answered trimmed, Trimmed and the retention point Start the answer
// named.
type Output struct {
	Outcome Outcome
	Log     []string
	Trimmed bool
	Start   uint64
}

// state is the model's log, a persistent list: each step shares its
// predecessor, so that Step never copies the log. start is the retention
// point in effect; a Retain makes a node of its own, with the same
// values.
type state struct {
	n     uint64 // length
	value string // the last value (n > 0)
	prev  *state
	hash  uint64 // over every value, in order
	start uint64 // the retention point
}

var empty = &state{}

func (s *state) append(v string) *state {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(s.hash >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(v))
	return &state{n: s.n + 1, value: v, prev: s, hash: h.Sum64(), start: s.start}
}

// retain returns s with its retention point moved up to p (never down).
func (s *state) retain(p uint64) *state {
	if p <= s.start {
		return s
	}
	c := *s
	c.start = p
	return &c
}

// equalLog tells whether s holds exactly log.
func (s *state) equalLog(log []string) bool { return s.equalFrom(0, log) }

// equalFrom tells whether s holds exactly log from offset from to its end.
func (s *state) equalFrom(from uint64, log []string) bool {
	if from > s.n || uint64(len(log)) != s.n-from {
		return false
	}
	for i := len(log) - 1; i >= 0; i, s = i-1, s.prev {
		if log[i] != s.value {
			return false
		}
	}
	return true
}

func (s *state) values() []string {
	out := make([]string, s.n)
	for i := len(out) - 1; i >= 0; i, s = i-1, s.prev {
		out[i] = s.value
	}
	return out
}

func equalStates(a, b *state) bool {
	if a.start != b.start {
		return false
	}
	for a != b {
		if a.n != b.n || a.hash != b.hash || a.value != b.value {
			return false
		}
		a, b = a.prev, b.prev
	}
	return true
}

// step is the sequential specification of an append-only log with a
// retention point:
//
//   - an acknowledged append of v at offset o is legal only when the log
//     holds exactly o values, and v becomes the value at o;
//   - an append whose outcome is unknown takes effect (v at o) when the log
//     holds exactly o values where it is linearized, and is a no-op
//     anywhere else: it happened at its offset or not at all;
//   - an absent append is a no-op;
//   - a read from offset f is legal only when it returned exactly the
//     log's values from f to its end, or, answered trimmed, only when f
//     lies below the retention point and the answer names that point;
//   - an admit from f is legal only when f is at or past the retention
//     point;
//   - an acknowledged retain up to p is legal only when the log holds p
//     values at least (a point never passes the end), and moves the point
//     up to p (never down); one whose outcome is unknown does so where it
//     is legal and is a no-op elsewhere; an absent one is a no-op.
func step(st, in, out any) (bool, any) {
	s, i, o := st.(*state), in.(Input), out.(Output)
	switch i.Kind {
	case Append:
		switch o.Outcome {
		case Acked:
			if s.n != i.Offset {
				return false, s
			}
			return true, s.append(i.Value)
		case Unknown:
			if s.n == i.Offset {
				return true, s.append(i.Value)
			}
			return true, s
		case Absent:
			return true, s
		}
	case Read:
		if o.Trimmed {
			return i.Offset < s.start && o.Start == s.start, s
		}
		return s.equalFrom(i.Offset, o.Log), s
	case Admit:
		return i.Offset >= s.start, s
	case Retain:
		switch o.Outcome {
		case Acked:
			if i.Offset > s.n {
				return false, s
			}
			return true, s.retain(i.Offset)
		case Unknown:
			if i.Offset <= s.n {
				return true, s.retain(i.Offset)
			}
			return true, s
		case Absent:
			return true, s
		}
	}
	return false, s
}

// Model is the sequential specification every history is checked against:
// an append-only log of string values with a retention point (see step
// above). Reads return the log from an offset (the whole log from 0),
// appends carry the offset their host placed them at. It is
// deterministic: an append or a retain whose outcome is unknown is made a
// no-op by placing it where it cannot take effect, or after every read.
func Model() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return empty },
		Step: step,
		Equal: func(a, b any) bool {
			return equalStates(a.(*state), b.(*state))
		},
		Hash: func(st any) uint64 {
			s := st.(*state)
			return s.hash ^ s.n ^ s.start*0x9e3779b97f4a7c15
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(Input), out.(Output)
			switch i.Kind {
			case Read:
				if o.Trimmed {
					return fmt.Sprintf("read@%d → trimmed, starts at %d", i.Offset, o.Start)
				}
				if i.Offset == 0 {
					return "read → " + describeLog(o.Log)
				}
				return fmt.Sprintf("read@%d → %s", i.Offset, describeLog(o.Log))
			case Admit:
				return fmt.Sprintf("admit@%d", i.Offset)
			case Retain:
				return fmt.Sprintf("retain@%d → %s", i.Offset, o.Outcome)
			}
			return fmt.Sprintf("append(%s)@%d → %s", i.Value, i.Offset, o.Outcome)
		},
		DescribeState: func(st any) string {
			s := st.(*state)
			if s.start == 0 {
				return describeLog(s.values())
			}
			return fmt.Sprintf("%s, retained from %d", describeLog(s.values()), s.start)
		},
	}
}

// describeLog shows a log's length and its last values.
func describeLog(log []string) string {
	const tail = 4
	if len(log) <= tail {
		return fmt.Sprintf("[%s] (%d)", strings.Join(log, " "), len(log))
	}
	return fmt.Sprintf("[… %s] (%d)", strings.Join(log[len(log)-tail:], " "), len(log))
}
