package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// help and version are commands; help names a command's purpose.
func TestHelpAndVersionCommands(t *testing.T) {
	f := newFixture(t)
	r := f.run("", "help")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.out, "usage: cutline")
	require.Contains(t, r.out, "  version")

	r = f.run("", "help", "slots")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.out, "show the slot map across the zones")
	require.Contains(t, r.out, "-from")
	require.Less(t, strings.Index(r.out, "-from"), strings.Index(r.out, "\nglobal flags ("), "its own flags first")

	r = f.run("", "help", "nope")
	require.Equal(t, ExitUsage, r.code)

	r = f.run("", "version")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.out, "cutline "), r.out)
	r = f.run("", "-json", "version")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var v VersionView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.NotEmpty(t, v.Go)
}

// Each command's -h describes the command and its own flags, not only
// the global ones.
func TestCommandHelpDescribesCommand(t *testing.T) {
	f := newFixture(t)
	for _, k := range commands() {
		r := f.run("", k.name, "-h")
		require.Equal(t, ExitOK, r.code, k.name)
		require.Contains(t, r.out, k.summary, k.name)
		require.True(t, strings.HasPrefix(r.out, "usage: cutline [global flags] "+k.name), r.out)
	}
}

// With -json, an error is a JSON document too, with its exit code.
func TestJSONErrors(t *testing.T) {
	f := newFixture(t)
	r := f.run("", "-json", "chain", "star-z")
	require.Equal(t, ExitFailed, r.code)
	var e errorView
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &e), r.stderr)
	require.Contains(t, e.Error, `unknown star "star-z"`)
	require.Equal(t, ExitFailed, e.Exit)

	r = f.run("", "slots", "-json", "star-a")
	require.Equal(t, ExitUsage, r.code)
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &e), r.stderr)
	require.Equal(t, ExitUsage, e.Exit)
}

// grant -json uses the tool's field names throughout, none of Go's.
func TestGrantJSONFieldNames(t *testing.T) {
	f := newFixture(t)
	r := f.run("", "grant", "-json", "brokers")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.out), &raw))
	req, ok := raw["required"].(map[string]any)
	require.True(t, ok, r.out)
	require.Contains(t, req, "epoch")
	require.Contains(t, req, "slot")
	require.NotContains(t, r.out, `"Epoch"`)
	require.NotContains(t, r.out, `"pos"`)
}

// Nothing found without -etcd-root: the error says where the model
// broker keeps its state.
func TestNoChainHintsAtEtcdRoot(t *testing.T) {
	f := newFixture(t)
	r := f.run("", "-root", "prod/", "chain", "star-z")
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, r.stderr, "-etcd-root /cutline-broker/")
	r = f.run("", "-etcd-root", "/x/", "chain", "star-z")
	require.NotContains(t, r.stderr, "-etcd-root /cutline-broker/")
}

// -timeout bounds the wait for etcd's first connection, which the etcd
// client would otherwise wait for its own 5 s.
func TestTimeoutBoundsEtcdDial(t *testing.T) {
	// A listener that never answers: etcd's handshake waits on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	start := time.Now()
	var out, errb strings.Builder
	code := run(context.Background(), []string{"-etcd", ln.Addr().String(), "-timeout", "300ms", "chain", "star-a"}, Env{Stdout: &out, Stderr: &errb})
	require.Equal(t, ExitUnreachable, code, errb.String())
	require.Less(t, time.Since(start), 3*time.Second, "the dial waited past -timeout")
}

// Every -json document uses the tool's field names: lower case, none of
// Go's.
func TestJSONFieldNamesLowerCase(t *testing.T) {
	f := newFixture(t)
	f.layout()
	var check func(path string, v any)
	check = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				require.False(t, k != "" && k[0] >= 'A' && k[0] <= 'Z', "Go field name %s.%s", path, k)
				check(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				check(path+"[]", x)
			}
		}
	}
	for _, args := range [][]string{
		{"chain", "star-a"}, {"slots", "star-a", "1"}, {"stream", "orders"}, {"grant", "brokers"},
		{"fence", "-yes", "star-a", "1"}, {"version"},
	} {
		r := f.run("", append([]string{"-json"}, args...)...)
		require.Equal(t, ExitOK, r.code, "%v: %s", args, r.stderr)
		var v any
		require.NoError(t, json.Unmarshal([]byte(r.out), &v), "%v: %s", args, r.out)
		check(args[0], v)
	}
}
