// Package cliflags is the command-line plumbing of the example programs:
// parsing a flag.FlagSet without printing the whole usage on a mistake,
// the defaults of flags from environment variables, and usage errors
// (exit status 2) that say what a flag allows.
package cliflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// FlagError refuses the value of one flag, saying what it allows.
type FlagError struct {
	Flag, Value, Want string
}

func (e *FlagError) Error() string { return fmt.Sprintf("-%s %s: want %s", e.Flag, e.Value, e.Want) }

// Refuse returns the *FlagError of flag name given value; format and
// args say what it allows.
func Refuse(name string, value any, format string, args ...any) error {
	return &FlagError{Flag: name, Value: fmt.Sprint(value), Want: fmt.Sprintf(format, args...)}
}

// UsageError is a flag or argument the parser refused, or flags that do
// not go together.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() + " (-h lists the flags)" }
func (e *UsageError) Unwrap() error { return e.Err }

// IsUsage reports whether err is a usage error (a *UsageError or a
// *FlagError): exit status 2, never "FAILED".
func IsUsage(err error) bool {
	_, parse := errors.AsType[*UsageError](err)
	_, value := errors.AsType[*FlagError](err)
	return parse || value
}

// Parse parses args with fs, refuses positional arguments, and returns
// the names of the flags given. A bad flag is named with a pointer to -h
// (a *UsageError), not followed by the whole usage; -h prints the usage
// and returns flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) (map[string]bool, error) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return nil, err
	case err != nil:
		return nil, &UsageError{Err: err}
	case fs.NArg() > 0:
		return nil, &UsageError{Err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set, nil
}

// EnvName is the variable of flag name: prefix, then the name in upper
// case with '-' as '_' (CUTLINE_ and s3-secret-key: CUTLINE_S3_SECRET_KEY).
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Env sets every flag of fs not in set from its variable (EnvName) when
// getenv gives it one, and adds it to set. A value the flag refuses is
// an error naming the variable.
func Env(fs *flag.FlagSet, set map[string]bool, prefix string, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := EnvName(prefix, f.Name)
		if v := getenv(env); v != "" && !set[f.Name] && err == nil {
			if ferr := fs.Set(f.Name, v); ferr != nil {
				err = fmt.Errorf("%s: %w", env, ferr)
			}
			set[f.Name] = true
		}
	})
	return err
}

// List splits a comma-separated flag value; "" is none.
func List(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
