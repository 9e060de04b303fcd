package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// emit prints v as one indented JSON document when -json is set, else
// calls text.
func (c *cmd) emit(v any, text func(w io.Writer)) error {
	if c.g.json {
		enc := json.NewEncoder(c.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 0, 2, ' ', 0)
	text(tw)
	return tw.Flush()
}

// confirm asks the operator before a write unless -yes is set: it prints
// what is about to happen and reads one line from stdin, which must be
// "yes". Anything else, or end of input, is a *RefusedError.
func (c *cmd) confirm(what string) error {
	if c.g.yes {
		return nil
	}
	fmt.Fprintf(c.env.Stderr, "cutline will %s.\ntype yes to continue: ", what)
	line, err := bufio.NewReader(c.env.Stdin).ReadString('\n')
	if strings.TrimSpace(line) == "yes" && (err == nil || err == io.EOF) {
		return nil
	}
	fmt.Fprintln(c.env.Stderr)
	return &RefusedError{Msg: fmt.Sprintf("not confirmed: nothing was written (would %s; answer yes or pass -yes)", what)}
}

// progress is a single status line on stderr for long walks, redrawn at
// most every interval and erased by done.
type progress struct {
	w        io.Writer
	label    string
	total    uint64
	interval time.Duration
	last     time.Time
	drawn    bool
}

func (c *cmd) progress(label string, total uint64) *progress {
	return &progress{w: c.env.Stderr, label: label, total: total, interval: 200 * time.Millisecond, last: time.Now()}
}

// step reports that n of total units are done.
func (p *progress) step(n uint64) {
	if now := time.Now(); now.Sub(p.last) >= p.interval {
		p.last = now
		p.drawn = true
		fmt.Fprintf(p.w, "\r%s %d/%d", p.label, n, p.total)
	}
}

// done erases the line if it was drawn.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", len(p.label)+42))
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
