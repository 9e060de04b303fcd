package script

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo prints each argument, then the input; blank joins its two
// arguments with a blank line.
func echo(t *testing.T, c *Cmd) string {
	var out []string
	if c.Name == "blank" {
		return c.Get("first", "") + "\n\n" + c.Get("second", "")
	}
	for _, a := range c.Args {
		if a.Vals == nil {
			out = append(out, a.Key)
			continue
		}
		out = append(out, a.Key+"="+strings.Join(a.Vals, ","))
	}
	if c.Input != "" {
		out = append(out, c.Input)
	}
	return strings.Join(out, "\n")
}

func TestEcho(t *testing.T) { Run(t, "testdata/echo.txt", echo) }

func TestParse(t *testing.T) {
	cmds, err := Parse("f.txt", "# comment\n\ncmd k=v l=(a, b,c) bare\nin 1\n\nin 2\n----\nout\n\nnext\n----\n----\nx\n\ny\n----\n----\nlast\n----\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 3 {
		t.Fatalf("%d commands", len(cmds))
	}
	c := cmds[0]
	if c.Pos != "f.txt:3" || c.Name != "cmd" || c.Input != "in 1\n\nin 2" || c.Want != "out" {
		t.Fatalf("%+v", c)
	}
	if v, _ := c.Vals("l"); strings.Join(v, "|") != "a|b|c" || c.Get("k", "") != "v" || !c.Has("bare") || c.Has("v") || c.Get("none", "def") != "def" {
		t.Fatalf("args %+v", c.Args)
	}
	if cmds[1].Pos != "f.txt:10" || cmds[1].Want != "x\n\ny" {
		t.Fatalf("%+v", cmds[1])
	}
	if cmds[2].Pos != "f.txt:18" || cmds[2].Want != "" {
		t.Fatalf("%+v", cmds[2])
	}
	for _, bad := range []struct{ text, err string }{
		{"cmd\n", "f.txt:1: cmd has no expected output"},
		{"cmd\n\n----\n", "f.txt:1: cmd has no expected output"},
		{"----\nx\n", "f.txt:1: expected output without a command"},
		{"a\n----\nb\n\ncmd l=(a,b\n----\n", "f.txt:5: unclosed ("},
		{"cmd =v\n----\n", "f.txt:1: argument without a key"},
		{"cmd\n----\n----\nx\n", "f.txt:1: cmd: output not closed"},
	} {
		_, err := Parse("f.txt", bad.text)
		if err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("%q: %v, want %q", bad.text, err, bad.err)
		}
	}
}

func TestDiff(t *testing.T) {
	got := Diff("a\nb\nc", "a\nx\nc\nd")
	want := "  a\n+ x\n- b\n  c\n+ d\n"
	if got != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", got, want)
	}
}

// A wrong expectation fails the test, naming the command's file:line and
// the differing lines.
func TestWrongExpectation(t *testing.T) {
	text := "# wrong\necho a=1\n----\na=1\n\necho a=2\n----\na=3\n"
	err := run(t, "wrong.txt", text, "", echo)
	if err == nil {
		t.Fatal("a wrong expectation passed")
	}
	for _, s := range []string{"wrong.txt:6: echo: output differs", "- a=3", "+ a=2"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the failure %q does not say %q", err, s)
		}
	}
}

// Rewriting replaces every expected output and keeps the rest: comments,
// inputs, the double separator where the output needs it.
func TestRewrite(t *testing.T) {
	orig, err := os.ReadFile("testdata/echo.txt")
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.NewReplacer("a=1\n", "a=9\n", "more input\n\n", "stale\n\n", "one\n\ntwo", "one two").Replace(string(orig))
	cmds, err := Parse("echo.txt", wrong)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, echo(t, c))
	}
	if out := Rewrite(wrong, cmds, got); out != string(orig) {
		t.Fatalf("rewritten:\n%s", Diff(string(orig), out))
	}
}
