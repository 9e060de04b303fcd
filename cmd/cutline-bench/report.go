package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/cutline/cutline/internal/benchfix"
)

// Row is one figure beside its reference. Value and RefValue are in Unit
// and RefUnit; Ratio is Value ÷ RefValue when both exist.
type Row struct {
	ID       string  `json:"id"`
	Figure   string  `json:"figure"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	RefLabel string  `json:"ref_label,omitempty"`
	RefValue float64 `json:"ref_value,omitempty"`
	RefUnit  string  `json:"ref_unit,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Note     string  `json:"note,omitempty"`
	// Objects breaks a count of object requests down by kind; the cost
	// model prices it.
	Objects *benchfix.Requests `json:"objects,omitempty"`
	// Zero: the figure may be 0 (requests while idle).
	Zero bool `json:"-"`
}

// ref sets the reference and the ratio.
func (r Row) ref(label string, v float64, unit string) Row {
	r.RefLabel, r.RefValue, r.RefUnit = label, v, unit
	if v != 0 {
		r.Ratio = r.Value / v
	}
	return r
}

// objects attaches the breakdown of an object request count.
func (r Row) objects(c benchfix.Requests) Row {
	r.Objects = &c
	return r
}

func (r Row) note(format string, args ...any) Row {
	r.Note = fmt.Sprintf(format, args...)
	return r
}

// Machine describes where the figures were measured.
type Machine struct {
	OS         string  `json:"os"`
	Arch       string  `json:"arch"`
	CPUs       int     `json:"cpus"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	CPUModel   string  `json:"cpu_model,omitempty"`
	Go         string  `json:"go"`
	Load       float64 `json:"load_avg_1m_at_start"`
}

func machine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), Load: -1}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscan(string(b), &m.Load)
	}
	return m
}

// Failure is a figure that could not be measured.
type Failure struct {
	Figure  string `json:"figure"`
	Skipped bool   `json:"skipped"`
	Error   string `json:"error"`
}

// Result is one run: what -json prints.
type Result struct {
	Machine  Machine   `json:"machine"`
	Mode     string    `json:"mode"`
	Elapsed  float64   `json:"elapsed_s"`
	Rows     []Row     `json:"rows"`
	Failures []Failure `json:"failures,omitempty"`
	// Cost prices the request counts of Rows (nil when no row it prices
	// was measured).
	Cost *Cost `json:"cost,omitempty"`
}

func (res *Result) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func (res *Result) writeTable(w io.Writer) {
	m := res.Machine
	fmt.Fprintf(w, "cutline bench (%s run, %s): %s/%s, %d CPUs (GOMAXPROCS %d)", res.Mode, time.Duration(res.Elapsed*float64(time.Second)).Round(time.Second), m.OS, m.Arch, m.CPUs, m.GOMAXPROCS)
	if m.CPUModel != "" {
		fmt.Fprintf(w, ", %s", m.CPUModel)
	}
	fmt.Fprintf(w, ", %s", m.Go)
	if m.Load >= 0 {
		fmt.Fprintf(w, ", load average %.2f at start", m.Load)
	}
	var skipped []string
	for _, f := range res.Failures {
		if f.Skipped {
			skipped = append(skipped, f.Figure)
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "; skipped: %s", strings.Join(skipped, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	// The notes are long: each row names its note by number and the notes
	// follow the table, so that a row fits a terminal.
	var notes []string
	noteRef := func(note string) string {
		if note == "" {
			return ""
		}
		notes = append(notes, note)
		return fmt.Sprintf("[%d]", len(notes))
	}
	fmt.Fprintln(w, "| figure | measured | reference, same run | ratio | note |")
	fmt.Fprintln(w, "| --- | ---: | --- | ---: | --- |")
	for _, r := range res.Rows {
		ref := ""
		if r.RefLabel != "" {
			ref = r.RefLabel + ": " + num(r.RefValue) + " " + r.RefUnit
		}
		ratio := ""
		if r.Ratio != 0 {
			ratio = num(r.Ratio)
		}
		fmt.Fprintf(w, "| %s | %s %s | %s | %s | %s |\n", r.Figure, num(r.Value), r.Unit, ref, ratio, noteRef(r.Note))
	}
	for _, f := range res.Failures {
		what := "FAILED"
		if f.Skipped {
			what = "skipped"
		}
		fmt.Fprintf(w, "| %s | %s | | | %s |\n", f.Figure, what, noteRef(strings.ReplaceAll(oneLine(f.Error), "|", "\\|")))
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for i, n := range notes {
			fmt.Fprintf(w, "[%d] %s\n", i+1, n)
		}
	}
	writeStreamsTable(w, res.Rows)
	if res.Cost != nil {
		fmt.Fprintln(w)
		res.Cost.writeTable(w)
	}
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// num prints a figure with about three significant digits and thousands
// separators.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1000 || (a < 1e15 && v == math.Trunc(v)):
		return thousands(int64(math.Round(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
