// Package script runs tests written as scripts: files of commands, each
// followed by the output it is expected to produce.
//
// A command is one line: a name, then arguments separated by spaces,
// each a bare key, key=value or key=(a,b,c). Lines after the command and
// before "----" are its input. The expected output follows "----" up to
// the first blank line; an output that holds blank lines sits between
// "----" "----" and "----" "----" lines. Lines starting with '#' between
// commands are comments.
//
//	# the holder renews its grant
//	heartbeat node=node-a progress=1/5
//	----
//	node-a → ctl: heartbeat token=1 progress=1/5
//
// Run calls a handler for each command and compares what it returns with
// the expected output; a difference fails the test at file:line with a
// line diff. With -rewrite, the expected outputs are replaced with what
// the handlers returned.
package script

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scripts run")

// Arg is one argument of a command: key=value has one value, key=(a,b)
// several, a bare key none.
type Arg struct {
	Key  string
	Vals []string
}

// Cmd is one command of a script.
type Cmd struct {
	Pos   string // file:line of the command
	Name  string
	Args  []Arg
	Input string
	Want  string
	// The lines of the expected output (0-based, end exclusive) in the
	// file, and whether it used the double separator.
	from, to int
}

func (c *Cmd) String() string { return c.Pos + ": " + c.Name }

// Has reports whether the command has the argument key.
func (c *Cmd) Has(key string) bool {
	_, ok := c.Vals(key)
	return ok
}

// Vals returns the values of the argument key.
func (c *Cmd) Vals(key string) ([]string, bool) {
	for _, a := range c.Args {
		if a.Key == key {
			return a.Vals, true
		}
	}
	return nil, false
}

// Get returns the single value of the argument key, or def without it.
func (c *Cmd) Get(key, def string) string {
	if v, ok := c.Vals(key); ok && len(v) > 0 {
		return v[0]
	}
	return def
}

// Parse reads a script; name is used in positions.
func Parse(name, text string) ([]*Cmd, error) {
	lines := strings.Split(text, "\n")
	var cmds []*Cmd
	for i := 0; i < len(lines); {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		pos := fmt.Sprintf("%s:%d", name, i+1)
		if l == "----" {
			return nil, fmt.Errorf("%s: expected output without a command", pos)
		}
		c := &Cmd{Pos: pos}
		var err error
		if c.Name, c.Args, err = parseLine(l); err != nil {
			return nil, fmt.Errorf("%s: %w", pos, err)
		}
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			if strings.TrimSpace(lines[i]) == "" && len(input) == 0 {
				return nil, fmt.Errorf("%s: %s has no expected output (----)", pos, c.Name)
			}
			input = append(input, lines[i])
			i++
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: %s has no expected output (----)", pos, c.Name)
		}
		c.Input = strings.Join(input, "\n")
		i++ // the separator
		c.from = i
		var out []string
		if i < len(lines) && lines[i] == "----" { // double separator
			i++
			for ; ; i++ {
				if i+1 >= len(lines) {
					return nil, fmt.Errorf("%s: %s: output not closed by ----/----", pos, c.Name)
				}
				if lines[i] == "----" && lines[i+1] == "----" {
					i += 2
					break
				}
				out = append(out, lines[i])
			}
		} else {
			for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
				out = append(out, lines[i])
			}
		}
		c.to = i
		c.Want = strings.Join(out, "\n")
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// parseLine splits a command line into its name and arguments.
func parseLine(l string) (string, []Arg, error) {
	var words []string
	for l = strings.TrimSpace(l); l != ""; l = strings.TrimSpace(l) {
		end := strings.IndexAny(l, " \t(")
		if end >= 0 && l[end] == '(' {
			closing := strings.IndexByte(l, ')')
			if closing < 0 {
				return "", nil, fmt.Errorf("unclosed ( in %q", l)
			}
			end = closing + 1
		}
		if end < 0 {
			end = len(l)
		}
		words = append(words, l[:end])
		l = l[end:]
	}
	var args []Arg
	for _, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		a := Arg{Key: k}
		switch {
		case k == "":
			return "", nil, fmt.Errorf("argument without a key: %q", w)
		case !ok:
		case strings.HasPrefix(v, "("):
			if !strings.HasSuffix(v, ")") {
				return "", nil, fmt.Errorf("bad list in %q", w)
			}
			for _, x := range strings.Split(v[1:len(v)-1], ",") {
				if x = strings.TrimSpace(x); x != "" {
					a.Vals = append(a.Vals, x)
				}
			}
		default:
			a.Vals = []string{v}
		}
		args = append(args, a)
	}
	return words[0], args, nil
}

// Handler runs one command and returns its output.
type Handler func(t *testing.T, c *Cmd) string

// Run runs the script at path on disk.
func Run(t *testing.T, path string, h Handler) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t, path, string(b), path, h); err != nil {
		t.Fatal(err)
	}
}

// RunFS runs the script name read from fsys. With -rewrite, the script is
// rewritten at the path on disk given (when empty, -rewrite fails).
func RunFS(t *testing.T, fsys fs.FS, name, disk string, h Handler) {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t, name, string(b), disk, h); err != nil {
		t.Fatal(err)
	}
}

// run runs a script: the first command whose output differs ends it with
// an error naming its file:line; with -rewrite, every command runs and
// the file on disk is rewritten.
func run(t *testing.T, name, text, disk string, h Handler) error {
	cmds, err := Parse(name, text)
	if err != nil {
		return err
	}
	var got []string
	for _, c := range cmds {
		out := strings.TrimRight(h(t, c), "\n")
		if t.Failed() {
			return fmt.Errorf("%s: failed", c)
		}
		got = append(got, out)
		if !*rewrite && out != c.Want {
			return fmt.Errorf("%s: output differs (- want, + got):\n%s", c, Diff(c.Want, out))
		}
	}
	if !*rewrite {
		return nil
	}
	if disk == "" {
		return fmt.Errorf("%s: -rewrite: no file on disk to rewrite", name)
	}
	return os.WriteFile(disk, []byte(Rewrite(text, cmds, got)), 0o644)
}

// Rewrite returns text, a script parsed as cmds, with the expected
// output of cmds[i] replaced by got[i].
func Rewrite(text string, cmds []*Cmd, got []string) string {
	lines := strings.Split(text, "\n")
	var b strings.Builder
	at := 0
	for i, c := range cmds {
		b.WriteString(strings.Join(lines[at:c.from], "\n"))
		b.WriteString("\n")
		switch g := "\n" + got[i] + "\n"; {
		case got[i] == "":
		case strings.Contains(g, "\n\n") || strings.Contains(g, "\n----\n"):
			b.WriteString("----\n" + got[i] + "\n----\n----\n")
		default:
			b.WriteString(got[i] + "\n")
		}
		at = c.to
	}
	rest := strings.Join(lines[at:], "\n")
	if rest == "" {
		return strings.TrimRight(b.String(), "\n") + "\n"
	}
	if !strings.HasPrefix(rest, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(rest)
	return b.String()
}

// Diff returns a line diff of want and got: "- " lines only in want, "+ "
// only in got, "  " in both.
func Diff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var d strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			d.WriteString("  " + a[i] + "\n")
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			d.WriteString("+ " + b[j] + "\n")
			j++
		default:
			d.WriteString("- " + a[i] + "\n")
			i++
		}
	}
	return d.String()
}
