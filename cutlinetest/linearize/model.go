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
	// Read returns the whole log.
	Read
)

func (k Kind) String() string {
	switch k {
	case Append:
		return "append"
	case Read:
		return "read"
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
// the host gave the record when it submitted it), or a Read.
type Input struct {
	Kind   Kind
	Value  string
	Offset uint64
}

// Output is an operation's return: an append's Outcome, or the values a
// Read returned, in offset order.
type Output struct {
	Outcome Outcome
	Log     []string
}

// state is the model's log, a persistent list: each step shares its
// predecessor, so that Step never copies the log.
type state struct {
	n     uint64 // length
	value string // the last value (n > 0)
	prev  *state
	hash  uint64 // over every value, in order
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
	return &state{n: s.n + 1, value: v, prev: s, hash: h.Sum64()}
}

// equalLog tells whether s holds exactly log.
func (s *state) equalLog(log []string) bool {
	if uint64(len(log)) != s.n {
		return false
	}
	for i := len(log) - 1; s.n > 0; i, s = i-1, s.prev {
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
	for a != b {
		if a.n != b.n || a.hash != b.hash || a.value != b.value {
			return false
		}
		a, b = a.prev, b.prev
	}
	return true
}

// step is the sequential specification of an append-only log:
//
//   - an acknowledged append of v at offset o is legal only when the log
//     holds exactly o values, and v becomes the value at o;
//   - an append whose outcome is unknown takes effect (v at o) when the log
//     holds exactly o values where it is linearized, and is a no-op
//     anywhere else: it happened at its offset or not at all;
//   - an absent append is a no-op;
//   - a read is legal only when it returned exactly the log.
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
		return s.equalLog(o.Log), s
	}
	return false, s
}

// Model is the sequential specification every history is checked against:
// an append-only log of string values (see step above). Reads return the
// whole log, appends carry the offset their host placed them at. It is
// deterministic: an append whose outcome is unknown is made a no-op by
// placing it where the log does not end at its offset, or after every
// read.
func Model() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return empty },
		Step: step,
		Equal: func(a, b any) bool {
			return equalStates(a.(*state), b.(*state))
		},
		Hash: func(st any) uint64 { return st.(*state).hash ^ st.(*state).n },
		DescribeOperation: func(in, out any) string {
			i, o := in.(Input), out.(Output)
			if i.Kind == Read {
				return "read → " + describeLog(o.Log)
			}
			return fmt.Sprintf("append(%s)@%d → %s", i.Value, i.Offset, o.Outcome)
		},
		DescribeState: func(st any) string { return describeLog(st.(*state).values()) },
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
