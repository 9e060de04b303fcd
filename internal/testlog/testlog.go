// Package testlog holds the sink a test points a logger or a process's
// output at: a buffer that several goroutines write at once and the test
// reads back whole. It is internal test scaffolding, shared by the
// packages of this repository and its nested modules.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it, safe for concurrent writes and
// reads. The zero value keeps everything.
type Buffer struct {
	// Limit, when positive, bounds what is kept: a write that finds more
	// than Limit bytes first drops all but the last Limit/2.
	Limit int

	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Limit > 0 && b.buf.Len() > b.Limit {
		rest := b.buf.Bytes()[b.buf.Len()-b.Limit/2:]
		b.buf = *bytes.NewBuffer(append([]byte(nil), rest...))
	}
	return b.buf.Write(p)
}

// String returns what the buffer holds.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
