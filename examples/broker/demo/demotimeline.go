package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cutline/cutline/authority"
)

// The demonstration's timeline is what the brokers log, filtered: every
// info line of the nodes and the controller is recorded with its time
// (a broker host would ship the same lines to its log store), and the
// durable grant changes are read from the metastore as they happen. The
// demonstration adds its own lines, for what the network and the producer
// do.

// event is one line of a node's log, one grant change, or a line of the
// demonstration's own.
type event struct {
	at    time.Time
	who   string         // a node, "controller", "producer", "network"
	msg   string         // the log message; "" for a line of the demonstration's
	text  string         // the demonstration's line
	attrs map[string]any // the log line's attributes
	grant *authority.StateRecord
}

// recorder keeps the events of a run, and lets the demonstration wait for
// one.
type recorder struct {
	mu      sync.Mutex
	events  []event
	changed chan struct{} // closed and replaced with every event
	// progress, when set, shows a line while the demonstration waits,
	// so that a wait of seconds does not look like a hang; waiting is
	// the line shown ("" while none is).
	progress io.Writer
	waiting  string
	// live, once streamTo set it, receives each line of the timeline as
	// its event is recorded, timed from t0.
	live     io.Writer
	t0       time.Time
	stream   string
	lastLive *authority.StateRecord // the last grant shown
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
	if r.live != nil {
		r.printLive(e)
	}
}

// streamTo prints the timeline so far, in time order, and from then on
// each line as its event is recorded: the timeline as it happens, timed
// from t0.
func (r *recorder) streamTo(w io.Writer, t0 time.Time, stream string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live, r.t0, r.stream = w, t0, stream
	evs := slices.Clone(r.events)
	slices.SortStableFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	for _, e := range evs {
		r.printLive(e)
	}
}

// stopLive ends the stream of the timeline: what is recorded later (the
// nodes shutting down) is not part of it.
func (r *recorder) stopLive() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eraseProgress()
	r.live, r.waiting = nil, ""
}

// printLive prints e's line, if the timeline shows it, above the
// progress line. r.mu is held.
func (r *recorder) printLive(e event) {
	line := e.line(r.stream, &r.lastLive)
	if line == "" {
		return
	}
	r.eraseProgress()
	fmt.Fprintf(r.live, "%s  %-10s %s\n", timelineOffset(e.at.Sub(r.t0)), e.who, line)
	if r.waiting != "" {
		fmt.Fprint(r.progress, r.waiting)
	}
}

// eraseProgress erases the progress line, if one is shown. r.mu is held.
func (r *recorder) eraseProgress() {
	if r.progress != nil && r.waiting != "" {
		fmt.Fprintf(r.progress, "\r%s\r", strings.Repeat(" ", utf8.RuneCountInString(r.waiting)))
	}
}

// note adds a line of the demonstration's.
func (r *recorder) note(at time.Time, who, format string, args ...any) {
	r.add(event{at: at, who: who, text: fmt.Sprintf(format, args...)})
}

// wait returns the first event match accepts, waiting for it until ctx
// ends.
func (r *recorder) wait(ctx context.Context, what string, match func(event) bool) (event, error) {
	if r.progress != nil {
		r.mu.Lock()
		r.eraseProgress()
		r.waiting = "  waiting for " + what + " …"
		fmt.Fprint(r.progress, r.waiting)
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.eraseProgress()
			r.waiting = ""
			r.mu.Unlock()
		}()
	}
	seen := 0
	for {
		r.mu.Lock()
		for ; seen < len(r.events); seen++ {
			if e := r.events[seen]; match(e) {
				r.mu.Unlock()
				return e, nil
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return event{}, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// logged matches a log line of a node by its message.
func logged(node, msg string) func(event) bool {
	return func(e event) bool { return e.who == node && e.msg == msg }
}

// handler returns a slog.Handler that records every line at info and
// above, and passes every line inner takes on to it.
func (r *recorder) handler(inner slog.Handler) slog.Handler { return &recHandler{rec: r, inner: inner} }

type recHandler struct {
	rec   *recorder
	inner slog.Handler
	attrs []slog.Attr
}

func (h *recHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.inner.Enabled(ctx, l)
}

func (h *recHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelInfo {
		e := event{at: rec.Time, msg: rec.Message, attrs: map[string]any{}}
		add := func(a slog.Attr) bool {
			e.attrs[a.Key] = a.Value.Resolve().Any()
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		rec.Attrs(add)
		e.who, _ = e.attrs["node"].(string)
		h.rec.add(e)
	}
	if h.inner.Enabled(ctx, rec.Level) {
		return h.inner.Handle(ctx, rec)
	}
	return nil
}

func (h *recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recHandler{rec: h.rec, inner: h.inner.WithAttrs(as), attrs: append(slices.Clip(h.attrs), as...)}
}

func (h *recHandler) WithGroup(name string) slog.Handler {
	return &recHandler{rec: h.rec, inner: h.inner.WithGroup(name), attrs: h.attrs}
}

// print writes the timeline: the events it shows, in time order, with
// their times relative to t0 (the failure).
func (r *recorder) print(w io.Writer, t0 time.Time, stream string) {
	r.mu.Lock()
	evs := slices.Clone(r.events)
	r.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	var last *authority.StateRecord // the last grant shown
	for _, e := range evs {
		line := e.line(stream, &last)
		if line == "" {
			continue
		}
		fmt.Fprintf(w, "%s  %-10s %s\n", timelineOffset(e.at.Sub(t0)), e.who, line)
	}
}

// timelineOffset renders a time of the timeline in seconds, to the
// millisecond: rounded first, so that a moment just before its origin
// reads +0.000s, not -0.000s.
func timelineOffset(d time.Duration) string {
	return fmt.Sprintf("%+9.3fs", d.Round(time.Millisecond).Seconds())
}

// line renders an event, or "" for one the timeline does not show.
func (e event) line(stream string, last **authority.StateRecord) string {
	a := func(k string) any { return e.attrs[k] }
	switch e.msg {
	case "":
		return e.text
	case "grant state":
		return e.grantLine(last)
	case "grant gained", "grant lost":
		return fmt.Sprintf("grant: %s token %v", strings.TrimPrefix(e.msg, "grant "), a("token"))
	case "stream ready":
		from := "with no snapshot"
		if a("had_snapshot") == true {
			from = fmt.Sprintf("from the snapshot at offset %v", a("snapshot"))
		}
		return fmt.Sprintf("gate: %q admitted, %s (tenure %v, next offset %v); producers rebuilt %s: %v records read back for deduplication",
			stream, a("decision"), a("tenure"), a("next"), from, a("replayed"))
	case "epoch fenced":
		return fmt.Sprintf("fence: %v/%v cut at slot %v (%v rounds, %v reads, %v creates: %v flight copies repaired, %v poison written)",
			a("star"), a("epoch"), a("cut"), a("rounds"), a("reads"), a("creates"), a("repaired"), a("poisoned"))
	case "epoch settled":
		return fmt.Sprintf("settle: %v/%v deleted %v garbage copies at and past the cut, covered %v flights below it in the index",
			a("star"), a("epoch"), a("garbage_deleted"), a("covered"))
	case "stream released":
		if a("err") != nil {
			return ""
		}
		return fmt.Sprintf("%q left through Finish (%v): its clean-release mark stamped", a("stream"), a("reason"))
	case "recovered":
		return fmt.Sprintf("recovered %v's chain: every epoch settled, up to %v (the controller required %v)", a("star"), a("frontier"), a("required"))
	case "star aborted":
		return fmt.Sprintf("its star aborted (%v): no departure, no mark", a("why"))
	case "maintenance pass":
		return fmt.Sprintf("lifecycle pass: settled %s left open; wrote %s (%s, %v bytes); trimmed %s; collected %s; %s wait for compaction",
			plural(a("settled"), "epoch"), plural(a("segments_written"), "segment"), plural(a("pages_moved"), "ref page"), a("bytes_compacted"),
			plural(a("flights_deleted"), "flight copy"), plural(a("segments_deleted"), "segment"), plural(a("backlog_flights"), "flight"))
	case "authority: health link down":
		return fmt.Sprintf("health link to %v down", a("peer"))
	}
	return ""
}

// plural renders a count of a noun: "1 segment", "2 segments", "3
// flight copies".
func plural(n any, noun string) string {
	v := fmt.Sprint(n)
	switch {
	case v == "1":
		return v + " " + noun
	case strings.HasSuffix(noun, "y"):
		return v + " " + strings.TrimSuffix(noun, "y") + "ies"
	}
	return v + " " + noun + "s"
}

// grantLine renders a durable grant change, with the grant it replaced.
func (e event) grantLine(last **authority.StateRecord) string {
	st := e.grant
	switch st.Phase {
	case authority.Granted:
		prev := *last
		*last = st
		if prev == nil {
			return fmt.Sprintf("grant: %s holds token %d", st.Holder, st.Token)
		}
		return fmt.Sprintf("grant: %s (token %d) → %s (token %d)", prev.Holder, prev.Token, st.Holder, st.Token)
	case authority.Vacant:
		if st.Token == 0 {
			return ""
		}
		return fmt.Sprintf("grant: token %d ended: %s; the next holder must recover %s's chain up to %v", st.Token, st.Ended, st.Required.Star, st.Required.Pos)
	case authority.Recovering:
		if st.Required.Star == "" {
			return "" // the first grant: nothing to recover
		}
		return fmt.Sprintf("grant: %s is the candidate: it recovers %s's chain before token %d", st.Candidate, st.Required.Star, st.Token+1)
	}
	return ""
}
