package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// Exit codes of the command (see the package documentation).
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailed: the operation failed (an unknown star or epoch, a
	// refusal by the library, a corrupt record, a bucket that is not
	// create-only).
	ExitFailed = 1
	// ExitUsage: bad flags or arguments; nothing was read or written.
	ExitUsage = 2
	// ExitRefused: the operator did not confirm, or the tool refused to
	// act because acting could lose data; nothing was written by the
	// refused step.
	ExitRefused = 3
	// ExitUnreachable: the metastore or a bucket did not answer (or the
	// -timeout ran out waiting for one).
	ExitUnreachable = 4
)

// Env is what run works with: the standard streams, the environment and,
// for tests and embedding, already-built backends. A nil Store is built
// from -etcd, nil Buckets from -fs-zones or the S3 flags. Getenv reads the
// CUTLINE_ variables (nil: none).
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Store          metastore.Store
	Buckets        []objstore.Bucket
}

// UsageError is a bad flag or argument (exit 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// RefusedError is an action that was not confirmed or that the tool
// refuses to take (exit 3). Nothing was written by the refused step.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// NoChainError reports a star that never minted an epoch (exit 1). Hint,
// when set, says where else the chain may be.
type NoChainError struct{ Star, Hint string }

func (e *NoChainError) Error() string {
	msg := fmt.Sprintf("unknown star %q: it has no chain (no epoch was ever minted)", e.Star)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// rootHint is what to say when nothing was found and no -etcd-root was
// given: the model broker keeps its state under an etcd key root of its
// own, which -root (the cutline root inside it) does not reach.
func (c *cmd) rootHint() string {
	if c.g.etcdRoot != "" {
		return ""
	}
	return "the model broker's state lies under -etcd-root /cutline-broker/ (-root is the cutline root inside the etcd key root)"
}

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ue *UsageError
	var re *RefusedError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &re):
		return ExitRefused
	case errors.Is(err, metastore.ErrUnavailable), errors.Is(err, objstore.ErrUnavailable),
		errors.Is(err, fence.ErrUndecided), errors.Is(err, context.DeadlineExceeded):
		return ExitUnreachable
	}
	return ExitFailed
}

// globals are the flags every command takes, before or after its name.
type globals struct {
	etcd     string
	etcdRoot string
	etcdAuth etcdAuth
	root     string
	fsZones  string
	s3       s3Flags
	azure    azureFlags
	prefix   string
	yes      bool
	json     bool
	timeout  time.Duration
}

type s3Flags struct {
	endpoint, buckets, region, accessKey, secretKey string
}

// register adds the global flags to fs. Every subcommand's flag set carries
// them too, so that `cutline slots -json …` and `cutline -json slots …`
// mean the same.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.etcd, "etcd", g.etcd, "etcd endpoints, comma-separated (host:port,…)")
	fs.StringVar(&g.etcdRoot, "etcd-root", g.etcdRoot, "key root of the etcd store (metastore/etcd Options.Root; empty: its default)")
	g.etcdAuth.register(fs)
	fs.StringVar(&g.root, "root", g.root, "cutline metastore root (\"\" or ending in '/'), as in epoch.Options.Root")
	fs.StringVar(&g.fsZones, "fs-zones", g.fsZones, "filesystem zones, comma-separated: dir or name=dir (name defaults to the directory's base name)")
	fs.StringVar(&g.s3.endpoint, "s3-endpoint", g.s3.endpoint, "S3 endpoint URLs, comma-separated: one for every zone, or one per zone")
	fs.StringVar(&g.s3.buckets, "s3-buckets", g.s3.buckets, "S3 zones, comma-separated: bucket or name=bucket (name defaults to the bucket)")
	fs.StringVar(&g.s3.region, "s3-region", g.s3.region, "S3 region")
	fs.StringVar(&g.s3.accessKey, "s3-access-key", g.s3.accessKey, "S3 access key (default $AWS_ACCESS_KEY_ID; never printed)")
	fs.StringVar(&g.s3.secretKey, "s3-secret-key", g.s3.secretKey, "S3 secret key (default $AWS_SECRET_ACCESS_KEY; prefer CUTLINE_S3_SECRET_KEY; never printed)")
	g.azure.register(fs)
	fs.StringVar(&g.prefix, "prefix", g.prefix, "object key prefix the credentials reach (verify-zones probes under it; epochs use their own recorded prefix)")
	fs.BoolVar(&g.yes, "yes", g.yes, "do not ask for confirmation before writing")
	fs.BoolVar(&g.json, "json", g.json, "print one JSON document on stdout")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up after this long (unreachable zones make a fence wait)")
}

// defaultGlobals are the global flags' defaults.
func defaultGlobals() globals { return globals{timeout: 30 * time.Second} }

// cmd is the state of one invocation: the streams, the flags, the
// backends as far as they are built.
type cmd struct {
	env  Env
	g    globals
	back *backends
}

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, c *cmd, args []string) error
}

func commands() []command {
	return []command{
		{"chain", "<star>", "list a star's epochs (read-only)", runChain},
		{"slots", "<star> <epoch> [-from N] [-to M]", "show the slot map across the zones (read-only)", runSlots},
		{"stream", "<id>", "show a stream's tenure records (read-only)", runStream},
		{"grant", "<domain>", "show a domain's authority state (read-only)", runGrant},
		{"fence", "<star> <epoch>", "fence an epoch and print its cut (writes)", runFence},
		{"settle", "<star> <epoch> [-locator none]", "fence if open, then settle an epoch (writes)", runSettle},
		{"trim", "<star> <epoch> <upTo>", "delete an epoch's slots below upTo (writes)", runTrim},
		{"verify-zones", "", "check every zone is create-only and the zones are distinct (writes probes)", runVerifyZones},
		{"index-find", "<stream> <offset>", "show the flight and bytes that hold a stream's offset (read-only)", runIndexFind},
		{"index-migrate", "", "rewrite an index of the previous release into pages; stop every star first (writes)", runIndexMigrate},
	}
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: cutline [global flags] <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %-36s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintf(w, "  %-13s %-36s %s\n", "help", "[command]", "describe the tool, or one command")
	fmt.Fprintf(w, "  %-13s %-36s %s\n", "version", "", "print the tool's version")
	fmt.Fprintln(w, "\nglobal flags (also accepted after the command):")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 operation failed, 2 usage error, 3 refused or not confirmed, 4 backend unreachable")
}

// run is the command: it parses args (without the program name), runs one
// subcommand and returns its exit code. Errors go to env.Stderr, results to
// env.Stdout.
func run(ctx context.Context, args []string, env Env) int {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	c := &cmd{env: env, g: defaultGlobals()}
	defer c.close()
	err := c.dispatch(ctx, args)
	code := exitCode(err)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case c.g.json:
		// A script asked for JSON: its errors are JSON too, on stderr,
		// so that stdout stays the one result document.
		_ = json.NewEncoder(env.Stderr).Encode(errorView{Error: err.Error(), Exit: code})
	default:
		fmt.Fprintf(env.Stderr, "cutline: %v\n", err)
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	return code
}

// errorView is an error as -json prints it.
type errorView struct {
	Error string `json:"error"`
	Exit  int    `json:"exit"`
}

func (c *cmd) dispatch(ctx context.Context, args []string) error {
	top := flag.NewFlagSet("cutline", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	c.g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(c.env.Stdout, top)
			return err
		}
		return usagef("%v (cutline -h lists the flags)", err)
	}
	if err := c.fromEnv(top); err != nil {
		return err
	}
	rest := top.Args()
	if len(rest) == 0 {
		usage(c.env.Stderr, top)
		return usagef("no command given")
	}
	switch rest[0] {
	case "help":
		return c.help(top, rest[1:])
	case "version":
		return c.version()
	}
	i := slices.IndexFunc(commands(), func(k command) bool { return k.name == rest[0] })
	if i < 0 {
		return usagef("unknown command %q (cutline -h lists the commands)", rest[0])
	}
	k := commands()[i]
	if c.g.timeout <= 0 {
		return usagef("-timeout must be positive, got %v", c.g.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, c.g.timeout)
	defer cancel()
	return k.run(ctx, c, rest[1:])
}

// fromEnv gives each global flag not given before the command the value
// of its variable CUTLINE_<NAME> (upper case, '-' as '_'): -etcd is
// CUTLINE_ETCD, -etcd-password CUTLINE_ETCD_PASSWORD. A flag given beats
// its variable, before the command or after it. -yes has none: a write
// is confirmed on the command line or on stdin.
func (c *cmd) fromEnv(top *flag.FlagSet) error {
	if c.env.Getenv == nil {
		return nil
	}
	given := map[string]bool{"yes": true}
	top.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	top.VisitAll(func(f *flag.Flag) {
		env := "CUTLINE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := c.env.Getenv(env); v != "" && !given[f.Name] && err == nil {
			if serr := top.Set(f.Name, v); serr != nil {
				// The value is not echoed: it may be a credential.
				err = usagef("%s: not a valid value of -%s", env, f.Name)
			}
		}
	})
	return err
}

// flags returns a flag set for subcommand name carrying the global flags.
// Their defaults in its help are the flags' own, never the values given
// before the command or by the environment, which may be credentials.
func (c *cmd) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("cutline "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.g.register(fs)
	own := flag.NewFlagSet("defaults", flag.ContinueOnError)
	d := defaultGlobals()
	d.register(own)
	own.VisitAll(func(f *flag.Flag) { fs.Lookup(f.Name).DefValue = f.DefValue })
	return fs
}

// parse parses args with flags and positional arguments interleaved and
// checks the number of positional arguments.
func (c *cmd) parse(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				commandHelp(c.env.Stdout, fs)
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != len(names) {
		want := "no arguments"
		if len(names) > 0 {
			want = strings.Join(names, " ")
		}
		return nil, usagef("%s: want %s, got %d argument(s)", fs.Name(), want, len(pos))
	}
	return pos, nil
}

// commandHelp describes the command fs parses for: what it does, its
// arguments and its own flags, then the global flags.
func commandHelp(w io.Writer, fs *flag.FlagSet) {
	name := strings.TrimPrefix(fs.Name(), "cutline ")
	i := slices.IndexFunc(commands(), func(k command) bool { return k.name == name })
	if i < 0 {
		return
	}
	k := commands()[i]
	fmt.Fprintf(w, "usage: cutline [global flags] %s %s\n\n%s\n", k.name, k.args, k.summary)
	global := flag.NewFlagSet("globals", flag.ContinueOnError)
	g := defaultGlobals()
	g.register(global)
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if global.Lookup(f.Name) == nil {
			own.Var(f.Value, f.Name, f.Usage)
			own.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	n := 0
	own.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		own.SetOutput(w)
		own.PrintDefaults()
	}
	// The global flags follow, with their own defaults (fs's), never a
	// value given.
	fmt.Fprintln(w, "\nglobal flags (also accepted before the command):")
	gl := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if global.Lookup(f.Name) != nil {
			gl.Var(f.Value, f.Name, f.Usage)
			gl.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	gl.SetOutput(w)
	gl.PrintDefaults()
}

// help is the help command: the tool's usage, or one command's.
func (c *cmd) help(top *flag.FlagSet, args []string) error {
	switch len(args) {
	case 0:
		usage(c.env.Stdout, top)
		return nil
	case 1:
		if !slices.ContainsFunc(commands(), func(k command) bool { return k.name == args[0] }) {
			return usagef("unknown command %q (cutline -h lists the commands)", args[0])
		}
		commandHelp(c.env.Stdout, c.flags(args[0]))
		return nil
	}
	return usagef("help: want at most one command, got %d", len(args))
}

// version prints the tool's module version and the commit it was built
// from, as the Go toolchain recorded them.
func (c *cmd) version() error {
	v := VersionView{Version: "(unknown)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Version, v.Go = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return c.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "cutline %s", v.Version)
		if v.Revision != "" {
			fmt.Fprintf(w, " (commit %s", v.Revision)
			if v.Modified {
				fmt.Fprint(w, ", modified")
			}
			fmt.Fprint(w, ")")
		}
		fmt.Fprintf(w, " %s\n", v.Go)
	})
}

// VersionView is what version prints.
type VersionView struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// parseName checks a star, stream or domain name.
func parseName(what, s string) (string, error) {
	if err := epoch.ValidateName(what, s); err != nil {
		return "", usagef("bad %s %q: %v", what, s, err)
	}
	return s, nil
}

// parseUint parses a slot or epoch number.
func parseUint(what, s string) (uint64, error) {
	var n uint64
	if _, err := fmt.Sscan(s, &n); err != nil || fmt.Sprint(n) != s {
		return 0, usagef("bad %s %q: want a non-negative integer", what, s)
	}
	return n, nil
}

func (c *cmd) close() {
	if c.back != nil {
		c.back.close()
	}
}
