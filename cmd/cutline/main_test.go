package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is an in-memory Env (three zones, zone-a … zone-c) and the tool
// run against it through the fault-injecting zones.
type fixture struct {
	t   *testing.T
	env *cutlinetest.Env
	mem *memstore.Store
}

func newFixture(t *testing.T) *fixture {
	env := cutlinetest.NewMem(t, 3)
	return &fixture{t: t, env: env, mem: env.Store.(*memstore.Store)}
}

type result struct {
	code        int
	out, stderr string
}

// run runs the tool with stdin and args.
func (f *fixture) run(stdin string, args ...string) result {
	f.t.Helper()
	var out, errb bytes.Buffer
	buckets := make([]objstore.Bucket, len(f.env.Zones))
	for i, z := range f.env.Zones {
		buckets[i] = z
	}
	code := run(f.t.Context(), args, Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Store: f.env.Store, Buckets: buckets})
	return result{code: code, out: out.String(), stderr: errb.String()}
}

// snapshot is the store's revision and every object key in every zone:
// equal snapshots mean nothing was written.
func (f *fixture) snapshot() string {
	f.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "rev %d\n", f.mem.Revision())
	for _, z := range f.env.Raw {
		var keys []string
		for o, err := range objstore.All(f.t.Context(), z, "") {
			require.NoError(f.t, err)
			keys = append(keys, o.Key)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "%s: %s\n", z.Name(), strings.Join(keys, " "))
	}
	return b.String()
}

// fencedLayout mints star-a/1 (K=3 W=2 window 8), lays out the README's
// walk, slots 0–6, and returns the record.
func (f *fixture) layout() *epoch.Record {
	p := f.env.Party("star-a")
	rec := p.Mint("star-a", f.env.Constants(2, 8))
	f.env.Layout(rec,
		"F F F", // 0 committed
		"F E F", // 1 committed
		"F F E", // 2 committed
		"E E F", // 3 one copy: the fence repairs it
		"E E E", // 4 empty: the cut
		"F E F", // 5 pipelined past the cut: garbage
		"E E F", // 6 garbage
	)
	return rec
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// fields splits each line into whitespace-separated fields.
func fields(s string) [][]string {
	var out [][]string
	for _, l := range lines(s) {
		out = append(out, strings.Fields(l))
	}
	return out
}

func TestChain(t *testing.T) {
	f := newFixture(t)
	f.layout()
	before := f.snapshot()
	r := f.run("", "chain", "star-a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	got := fields(r.out)
	require.Equal(t, []string{"star", "star-a:", "next", "epoch", "2,", "heads", "standard=1"}, got[0])
	require.Equal(t, []string{"epoch", "class", "state", "cut", "checkpoint", "trimmed", "rewritten", "zones", "W", "window", "minted-at", "minted-by"}, got[1])
	require.Equal(t, []string{"1", "standard", "open", "-", "0", "0", "0", "zone-a,zone-b,zone-c", "2", "8"}, got[2][:10])
	require.Equal(t, "star-a", got[2][11])

	r = f.run("", "chain", "-json", "star-a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var v ChainView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.Equal(t, uint64(2), v.Next)
	require.Len(t, v.Epochs, 1)
	require.Equal(t, epoch.StateOpen, v.Epochs[0].State)
	require.Nil(t, v.Epochs[0].Cut)
	require.Equal(t, before, f.snapshot(), "chain wrote something")
}

func TestSlotsFenced(t *testing.T) {
	f := newFixture(t)
	f.layout()
	r := f.run("", "fence", "-yes", "star-a", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "star-a/1 fenced: cut 4", lines(r.out)[0])

	before := f.snapshot()
	r = f.run("", "slots", "star-a", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	t.Logf("$ cutline slots star-a 1\n%s", r.out)
	got := fields(r.out)
	require.Equal(t, "star-a/1", got[0][0])
	want := [][]string{
		{"slot", "zone-a", "zone-b", "zone-c", "verdict"},
		{"0", "F", "F", "F", "committed"},
		{"1", "F", "·", "F", "committed"},
		{"2", "F", "F", "·", "committed"},
		{"3", "F", "F", "F", "committed"}, // repaired
		{"4", "P", "P", "·", "cut"},
		{"5", "F", "·", "F", "garbage"},
		{"6", "·", "·", "F", "garbage"},
	}
	require.Equal(t, want, got[1:9])
	require.Equal(t, "(read slots 0–12; slots 7–12 hold nothing in any zone)", lines(r.out)[9])

	r = f.run("", "-json", "slots", "star-a", "1", "-from", "3", "-to", "5")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var v SlotsView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.Equal(t, uint64(4), *v.Cut)
	require.Equal(t, 2, v.B)
	require.Len(t, v.Rows, 3)
	require.Equal(t, SlotRow{Slot: 4, Zones: []string{"P", "P", "·"}, Verdict: VerdictCut, Poisons: 2}, v.Rows[1])
	require.Equal(t, SlotRow{Slot: 5, Zones: []string{"F", "·", "F"}, Verdict: VerdictGarbage, Copies: 2}, v.Rows[2])
	require.Equal(t, before, f.snapshot(), "slots wrote something")
}

func TestSlotsOpen(t *testing.T) {
	f := newFixture(t)
	rec := f.layout()
	f.env.Put(0, rec, 7, cutlinetest.Corrupt)
	r := f.run("", "slots", "star-a", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	got := fields(r.out)
	verdicts := map[string]string{}
	for _, row := range got[2:] {
		if len(row) == 5 {
			verdicts[row[0]] = row[4]
		}
	}
	require.Equal(t, map[string]string{"0": "committed", "1": "committed", "2": "committed", "3": "undecided",
		"4": "empty", "5": "committed", "6": "undecided", "7": "blocked", "8": "empty"}, verdicts)
	require.Equal(t, []string{"7", "X", "·", "·", "blocked"}, got[9])
}

func TestSlotsUnreachableZone(t *testing.T) {
	f := newFixture(t)
	f.layout()
	f.env.Zones[1].SetDown(true)
	r := f.run("", "slots", "-to", "2", "star-a", "1")
	require.Equal(t, ExitUnreachable, r.code, r.stderr)
	require.Equal(t, []string{"0", "F", "?", "F", "committed"}, fields(r.out)[2])
	require.Contains(t, r.stderr, "zones did not answer, shown as ?: zone-b (3 slots)")
}

func TestStream(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	put := func(key string, v any) {
		b, err := metastore.EncodeRecord(v)
		require.NoError(t, err)
		_, err = metastore.Put(ctx, f.env.Store, key, b, 0)
		require.NoError(t, err)
	}
	put("streams/orders/writer", &lease.WriterRecord{RecordHeader: metastore.RecordHeader{Kind: "stream-writer", Format: 1}, Stream: "orders", Star: "star-a", Epoch: 3, Class: "standard", Tenure: 2})
	put("streams/orders/token", &lease.TokenRecord{RecordHeader: metastore.RecordHeader{Kind: "stream-token", Format: 1}, Stream: "orders", Mode: lease.Fenced, Token: "s3cret-token"})
	before := f.snapshot()

	r := f.run("", "stream", "orders")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, [][]string{
		{"stream", "orders"},
		{"holder", "-"},
		{"last", "writer", "star-a", "epoch", "3", "(standard),", "tenure", "2"},
		{"mark", "-", "(none", "standing)"},
		{"token", "mode", "fenced,", "installed", "(not", "shown)"},
	}, fields(r.out))

	r = f.run("", "stream", "-json", "orders")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NotContains(t, r.out, "s3cret-token")
	var v StreamView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.Equal(t, lease.Fenced, v.TokenMode)
	require.True(t, v.TokenInstalled)
	require.Equal(t, uint64(2), v.Writer.Tenure)

	r = f.run("", "stream", "never")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.out, "last writer  - (never opened)")
	require.Equal(t, before, f.snapshot(), "stream wrote something")
}

func TestGrant(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot()
	r := f.run("", "grant", "brokers")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, []string{"phase", "vacant"}, fields(r.out)[1])
	require.Contains(t, r.out, "(no state record: the domain was never granted)")
	r = f.run("", "grant", "-json", "brokers")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var v GrantView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.Equal(t, "vacant", string(v.Phase))
	require.False(t, v.Written)
	require.Equal(t, before, f.snapshot(), "grant wrote something")
}

func TestFenceConfirmation(t *testing.T) {
	for _, stdin := range []string{"", "no\n", "y\n", "YES please\n"} {
		t.Run(fmt.Sprintf("%q", stdin), func(t *testing.T) {
			f := newFixture(t)
			f.layout()
			before := f.snapshot()
			r := f.run(stdin, "fence", "star-a", "1")
			require.Equal(t, ExitRefused, r.code, r.stderr)
			require.Contains(t, r.stderr, "type yes to continue")
			require.Contains(t, r.stderr, "not confirmed: nothing was written")
			require.Empty(t, r.out)
			require.Equal(t, before, f.snapshot())
		})
	}
	f := newFixture(t)
	f.layout()
	r := f.run("yes\n", "fence", "-json", "star-a", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var v FenceView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.Equal(t, uint64(4), v.Cut)
	require.Equal(t, int64(2), v.Report.Repaired)
	require.Equal(t, int64(2), v.Report.Poisoned)
	require.Equal(t, "P P E", f.env.State(f.env.Record("star-a", 1), 4))

	// Fencing again is a read: no prompt, nothing written.
	before := f.snapshot()
	r = f.run("", "fence", "star-a", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.out, "already fenced")
	require.Equal(t, before, f.snapshot())
}

// writeCommitted appends n flights to a fresh epoch of star-a with a real
// writer and advances its checkpoint past them, as a host does.
func (f *fixture) writeCommitted(n int) *epoch.Record {
	ctx := f.t.Context()
	p := f.env.Party("star-a")
	w := p.Writer(p.Mint("star-a", f.env.Constants(2, 8)), chain.WriterOptions{})
	for i := range n {
		_, err := w.Append(ctx, cutlinetest.Record("s", uint64(i), fmt.Sprint("r", i)))
		require.NoError(f.t, err)
	}
	rec, err := w.Checkpoint(ctx, uint64(n))
	require.NoError(f.t, err)
	w.Abort()
	return rec
}

func TestSettle(t *testing.T) {
	t.Run("covered", func(t *testing.T) {
		f := newFixture(t)
		rec := f.writeCommitted(3)
		f.env.Put(0, rec, 5, cutlinetest.Flight) // a stray past the cut
		before := f.snapshot()
		r := f.run("no\n", "settle", "star-a", "1")
		require.Equal(t, ExitRefused, r.code, r.stderr)
		require.Equal(t, before, f.snapshot())

		r = f.run("yes\n", "settle", "star-a", "1")
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Equal(t, "star-a/1 settled: cut 3", lines(r.out)[0])
		require.Contains(t, r.out, "garbage deleted  1")
		require.Equal(t, epoch.StateSettled, f.env.Record("star-a", 1).State)

		r = f.run("", "settle", "-json", "star-a", "1")
		require.Equal(t, ExitOK, r.code, r.stderr)
		var v struct {
			Report struct {
				AlreadySettled bool `json:"already_settled"`
			} `json:"report"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.out), &v))
		require.True(t, v.Report.AlreadySettled)
	})
	t.Run("uncovered", func(t *testing.T) {
		f := newFixture(t)
		f.layout()
		require.Equal(t, ExitOK, f.run("", "fence", "-yes", "star-a", "1").code)
		before := f.snapshot()
		r := f.run("", "settle", "-yes", "star-a", "1")
		require.Equal(t, ExitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "slots 0–3 are committed but not covered by the host's index (checkpoint 0 < cut 4)")
		require.Equal(t, before, f.snapshot())
		require.Equal(t, epoch.StateFenced, f.env.Record("star-a", 1).State)
	})
	t.Run("open and uncovered: fenced, not settled", func(t *testing.T) {
		f := newFixture(t)
		f.layout()
		r := f.run("", "settle", "-yes", "star-a", "1")
		require.Equal(t, ExitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "fenced at cut 4, not settled")
		require.Equal(t, epoch.StateFenced, f.env.Record("star-a", 1).State)
		require.Equal(t, "F E F", f.env.State(f.env.Record("star-a", 1), 5), "no garbage was deleted")
	})
	t.Run("bad locator", func(t *testing.T) {
		f := newFixture(t)
		r := f.run("", "settle", "-locator", "refindex", "star-a", "1")
		require.Equal(t, ExitUsage, r.code)
		require.Contains(t, r.stderr, `unknown -locator "refindex"`)
	})
}

func TestTrim(t *testing.T) {
	f := newFixture(t)
	rec := f.writeCommitted(3)
	// A slot's copies past the first W may or may not have landed before
	// the writer stopped: count what trim will find.
	copies := strings.Count(f.env.State(rec, 0)+f.env.State(rec, 1), "F")
	r := f.run("", "trim", "-yes", "star-a", "1", "4")
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, r.stderr, "upTo 4 passes the checkpoint 3")

	before := f.snapshot()
	r = f.run("no\n", "trim", "star-a", "1", "2")
	require.Equal(t, ExitRefused, r.code)
	require.Equal(t, before, f.snapshot())

	r = f.run("yes\n", "trim", "-json", "star-a", "1", "2")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var v TrimView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.Equal(t, uint64(2), v.Report.Trimmed)
	require.Equal(t, copies, v.Report.Deleted)
	require.Equal(t, uint64(2), f.env.Record("star-a", 1).Cursors.Trimmed)

	r = f.run("", "slots", "-from", "0", "-to", "2", "star-a", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, []string{"0", "·", "·", "·", "trimmed"}, fields(r.out)[2])
}

func TestVerifyZones(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot()
	r := f.run("", "verify-zones")
	require.Equal(t, ExitRefused, r.code)
	require.Equal(t, before, f.snapshot())

	r = f.run("", "verify-zones", "-yes")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, [][]string{
		{"zone-a", "ok:", "create-only"},
		{"zone-b", "ok:", "create-only"},
		{"zone-c", "ok:", "create-only"},
		{"distinct", "ok:", "3", "distinct", "stores"},
	}, fields(r.out))
	require.Equal(t, before, f.snapshot(), "probes are removed")

	f.env.Zones[2].SetDown(true)
	r = f.run("", "-json", "-yes", "verify-zones")
	require.Equal(t, ExitUnreachable, r.code, r.stderr)
	var v VerifyView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.False(t, v.Zones[2].OK)
	require.False(t, v.Distinct)
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	f.layout()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", nil, ExitUsage, "no command given"},
		{"unknown command", []string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{"bad global flag", []string{"-nope", "chain", "star-a"}, ExitUsage, "flag provided but not defined: -nope"},
		{"bad command flag", []string{"slots", "-nope", "star-a", "1"}, ExitUsage, "flag provided but not defined: -nope"},
		{"missing argument", []string{"slots", "star-a"}, ExitUsage, "want <star> <epoch>, got 1 argument(s)"},
		{"extra argument", []string{"chain", "star-a", "x"}, ExitUsage, "want <star>, got 2 argument(s)"},
		{"bad star", []string{"chain", "Star A!"}, ExitUsage, `bad star "Star A!"`},
		{"bad epoch", []string{"slots", "star-a", "one"}, ExitUsage, `bad epoch "one"`},
		{"epoch zero", []string{"fence", "star-a", "0"}, ExitUsage, "epoch numbers start at 1"},
		{"negative range", []string{"slots", "-from", "-3", "star-a", "1"}, ExitUsage, "must not be negative"},
		{"inverted range", []string{"slots", "-from", "5", "-to", "2", "star-a", "1"}, ExitUsage, "-to 2 is below -from 5"},
		{"bad timeout", []string{"-timeout", "0s", "chain", "star-a"}, ExitUsage, "-timeout must be positive"},
		{"bad root", []string{"-root", "noslash", "chain", "star-a"}, ExitUsage, `bad -root "noslash"`},
		{"bad upTo", []string{"trim", "star-a", "1", "-1"}, ExitUsage, "flag provided but not defined: -1"},
		{"unknown star chain", []string{"chain", "star-z"}, ExitFailed, `unknown star "star-z": it has no chain`},
		{"unknown star slots", []string{"slots", "star-z", "1"}, ExitFailed, `unknown star "star-z"`},
		{"unknown star fence", []string{"fence", "-yes", "star-z", "1"}, ExitFailed, `unknown star "star-z"`},
		{"wrong epoch", []string{"slots", "star-a", "9"}, ExitFailed, `star "star-a" has no epoch 9 (epochs are numbered 1 to 1`},
		{"wrong epoch fence", []string{"fence", "-yes", "star-a", "9"}, ExitFailed, "has no epoch 9"},
		{"wrong epoch settle", []string{"settle", "-yes", "star-a", "2"}, ExitFailed, "has no epoch 2"},
		{"wrong epoch trim", []string{"trim", "-yes", "star-a", "2", "0"}, ExitFailed, "has no epoch 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot()
			r := f.run("yes\n", tc.args...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
			require.Equal(t, before, f.snapshot())
		})
	}
}

func TestHelp(t *testing.T) {
	f := newFixture(t)
	r := f.run("", "-h")
	require.Equal(t, ExitOK, r.code)
	require.Contains(t, r.out, "exit codes: 0 ok, 1 operation failed, 2 usage error, 3 refused or not confirmed, 4 backend unreachable")
	for _, c := range commands() {
		require.Contains(t, r.out, "  "+c.name)
	}
}

func TestPartitionedStore(t *testing.T) {
	f := newFixture(t)
	f.layout()
	f.mem.Partition()
	defer f.mem.Heal()
	for _, args := range [][]string{
		{"chain", "star-a"}, {"slots", "star-a", "1"}, {"stream", "orders"}, {"grant", "brokers"},
		{"fence", "-yes", "star-a", "1"}, {"settle", "-yes", "star-a", "1"}, {"trim", "-yes", "star-a", "1", "0"},
	} {
		r := f.run("", args...)
		require.Equal(t, ExitUnreachable, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "unavailable", "%v", args)
	}
}

func TestBackendsFromFlags(t *testing.T) {
	f := newFixture(t)
	f.layout()
	dir := t.TempDir()
	var specs []string
	for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, z), 0o755))
		specs = append(specs, filepath.Join(dir, z))
	}
	runFlags := func(args ...string) result {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, Env{Stdout: &out, Stderr: &errb, Store: f.env.Store})
		return result{code, out.String(), errb.String()}
	}
	// The epoch lives in zone-a … zone-c: directories of those names hold
	// nothing, so every slot is empty.
	r := runFlags("-fs-zones", strings.Join(specs, ","), "slots", "star-a", "1", "-to", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, []string{"0", "·", "·", "·", "empty"}, fields(r.out)[2])

	r = runFlags("-fs-zones", "x="+specs[0]+",y="+specs[1], "slots", "star-a", "1")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "epoch star-a/1 lives in zones zone-a,zone-b,zone-c, configured are x,y")

	r = runFlags("-fs-zones", filepath.Join(dir, "missing"), "verify-zones", "-yes")
	require.Equal(t, ExitUsage, r.code, "a zone directory that does not exist is a usage error")
	require.Contains(t, r.stderr, "does not exist")

	r = runFlags("slots", "star-a", "1")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "no zones: give -fs-zones")

	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"chain", "star-a"}, Env{Stdout: &out, Stderr: &errb})
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errb.String(), "no metastore: give -etcd")
}
