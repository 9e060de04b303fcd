package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// emit prints v as one indented JSON document when -json is set, else
// calls text.
func (c *cmd) emit(v any, text func(w io.Writer)) error {
	if c.g.json {
		enc := json.NewEncoder(c.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(toolJSON(reflect.ValueOf(v)))
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

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	durationType  = reflect.TypeFor[time.Duration]()
)

// toolJSON is v with the tool's field names throughout: a struct's json
// tags where it has them, else its field names in snake case. The
// library's reports (fence.Report, settle.SettleReport) carry no tags, and
// Go's names (Duration, AlreadySettled) have no place in the tool's
// JSON. A duration is in seconds, its name ending in _s; a value that
// marshals itself does.
func toolJSON(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if v.Type() == durationType {
		return time.Duration(v.Int()).Seconds()
	}
	if v.Type().Implements(marshalerType) {
		return v.Interface()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return toolJSON(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts := snakeCase(f.Name), ""
			if tag, ok := f.Tag.Lookup("json"); ok {
				var n string
				n, opts, _ = strings.Cut(tag, ",")
				if n == "-" {
					continue
				}
				if n != "" {
					name = n
				}
			}
			if f.Type == durationType && name == snakeCase(f.Name) {
				name += "_s" // in seconds
			}
			if strings.Contains(opts, "omitempty") && v.Field(i).IsZero() {
				continue
			}
			m[name] = toolJSON(v.Field(i))
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Interface() // base64, as encoding/json writes bytes
		}
		fallthrough
	case reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = toolJSON(v.Index(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = toolJSON(it.Value())
		}
		return m
	}
	return v.Interface()
}

// snakeCase turns a Go field name into the tool's: AlreadySettled is
// already_settled, WalkStart walk_start.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 && !unicode.IsUpper(rune(name[i-1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
