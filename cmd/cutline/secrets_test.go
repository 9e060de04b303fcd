package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The credentials of the test: none may appear in anything the tool
// prints.
var secrets = map[string]string{
	"s3-access-key": "AKIA-ACCESS-KEY-FOR-TESTS",
	"s3-secret-key": "s3-secret-key-for-tests",
	"azure-key":     "YXp1cmUta2V5LWZvci10ZXN0cw==",
	"etcd-password": "etcd-password-for-tests",
}

// runWith runs the tool with args and the environment env, on no
// backend, and returns what it printed.
func runWith(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String() + errb.String()
}

func requireNoSecret(t *testing.T, printed string, how string) {
	t.Helper()
	for flag, s := range secrets {
		require.NotContains(t, printed, s, "%s prints -%s", how, flag)
	}
}

// No help text shows a credential, whether it is given before the
// command, after it or by its CUTLINE_ variable: the help of every
// command shows each flag's own default, never the value given.
func TestHelpShowsNoSecret(t *testing.T) {
	var flags []string
	vars := map[string]string{}
	for flag, s := range secrets {
		flags = append(flags, "-"+flag, s)
		vars["CUTLINE_"+strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))] = s
	}
	flags = append(flags, "-etcd-user", "operator")

	code, printed := runWith(t, nil, append(flags, "-h")...)
	require.Equal(t, ExitOK, code)
	require.Contains(t, printed, "-s3-secret-key")
	requireNoSecret(t, printed, "cutline -h")
	for _, k := range commands() {
		for name, args := range map[string][]string{
			"before":   append(append([]string{}, flags...), k.name, "-h"),
			"after":    append(append([]string{k.name}, flags...), "-h"),
			"variable": {k.name, "-h"},
		} {
			e := map[string]string(nil)
			if name == "variable" {
				e = vars
			}
			code, printed := runWith(t, e, args...)
			require.Equal(t, ExitOK, code, "%s -h (%s): %s", k.name, name, printed)
			require.Contains(t, printed, "-s3-secret-key", "%s -h (%s) lists the global flags", k.name, name)
			requireNoSecret(t, printed, k.name+" -h, the secrets "+name)
		}
	}
}

// No error shows a credential: a usage error, a backend that cannot be
// reached, a bad value in a variable.
func TestErrorsShowNoSecret(t *testing.T) {
	var flags []string
	for flag, s := range secrets {
		flags = append(flags, "-"+flag, s)
	}
	for _, args := range [][]string{
		append([]string{}, flags...), // no command: the usage
		append(append([]string{}, flags...), "chain"),
		append(append([]string{}, flags...), "chain", "star-a", "extra"),
		append(append([]string{}, flags...), "-etcd-user", "u", "-etcd", "127.0.0.1:1", "-timeout", "1s", "chain", "star-a"),
		append(append([]string{}, flags...), "-s3-endpoint", "http://127.0.0.1:1", "-s3-buckets", "a,b,c", "-timeout", "1s", "verify-zones"),
		append(append([]string{}, flags...), "nope"),
	} {
		code, printed := runWith(t, nil, args...)
		require.NotEqual(t, ExitOK, code, "%v", args)
		requireNoSecret(t, printed, "cutline "+strings.Join(args[len(flags):], " "))
	}
	code, printed := runWith(t, map[string]string{"CUTLINE_TIMEOUT": secrets["etcd-password"]}, "chain", "star-a")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, printed, "CUTLINE_TIMEOUT")
	requireNoSecret(t, printed, "a bad variable")
}

// The CUTLINE_ variables give the global flags not given; a flag given,
// before or after the command, beats its variable; -yes has none.
func TestVariables(t *testing.T) {
	env := map[string]string{"CUTLINE_ETCD": "10.0.0.1:2379", "CUTLINE_ROOT": "prod/", "CUTLINE_YES": "true", "CUTLINE_ETCD_PASSWORD": "pw"}
	c := &cmd{env: Env{Getenv: func(k string) string { return env[k] }}, g: defaultGlobals()}
	top := c.flags("top")
	require.NoError(t, top.Parse([]string{"-root", "given/", "chain"}))
	require.NoError(t, c.fromEnv(top))
	require.Equal(t, "10.0.0.1:2379", c.g.etcd)
	require.Equal(t, "given/", c.g.root, "a flag beats its variable")
	require.Equal(t, "pw", c.g.etcdAuth.password)
	require.False(t, c.g.yes, "-yes comes from the command line only")
	sub := c.flags("chain")
	_, err := c.parse(sub, []string{"-etcd", "10.0.0.2:2379", "star-a"}, "<star>")
	require.NoError(t, err)
	require.Equal(t, "10.0.0.2:2379", c.g.etcd, "a flag after the command beats the variable")
}
