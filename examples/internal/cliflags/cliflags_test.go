package cliflags_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/examples/internal/cliflags"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSet(out *bytes.Buffer) (*flag.FlagSet, *int, *string) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprintln(out, "usage: t") }
	return fs, fs.Int("w", 2, "quorum"), fs.String("s3-secret-key", "", "secret")
}

// Parse names the flags given, refuses positional arguments and bad
// flags with a usage error that prints nothing, and prints the usage on
// -h.
func TestParse(t *testing.T) {
	var out bytes.Buffer
	fs, w, _ := newSet(&out)
	set, err := cliflags.Parse(fs, []string{"-w", "3"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"w": true}, set)
	require.Equal(t, 3, *w)

	for _, args := range [][]string{{"-w", "x"}, {"-nope"}, {"extra"}} {
		fs, _, _ := newSet(&out)
		_, err := cliflags.Parse(fs, args)
		require.True(t, cliflags.IsUsage(err), "%v: %v", args, err)
		require.Contains(t, err.Error(), "-h lists the flags")
	}
	require.Empty(t, out.String(), "a mistake prints no usage")

	fs, _, _ = newSet(&out)
	_, err = cliflags.Parse(fs, []string{"-h"})
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Equal(t, "usage: t\n", out.String())
}

// A variable gives a flag not given its value; a flag given wins.
func TestEnv(t *testing.T) {
	env := map[string]string{"P_W": "5", "P_S3_SECRET_KEY": "s"}
	fs, w, secret := newSet(new(bytes.Buffer))
	set, err := cliflags.Parse(fs, []string{"-w", "4"})
	require.NoError(t, err)
	require.NoError(t, cliflags.Env(fs, set, "P_", func(k string) string { return env[k] }))
	require.Equal(t, 4, *w, "the flag beats its variable")
	require.Equal(t, "s", *secret)
	require.True(t, set["s3-secret-key"])

	fs, _, _ = newSet(new(bytes.Buffer))
	set, err = cliflags.Parse(fs, nil)
	require.NoError(t, err)
	err = cliflags.Env(fs, set, "P_", func(k string) string { return map[string]string{"P_W": "x"}[k] })
	require.ErrorContains(t, err, "P_W")
	require.Equal(t, "P_S3_SECRET_KEY", cliflags.EnvName("P_", "s3-secret-key"))
}

// Refuse's error says what the flag allows and is a usage error, wrapped
// or not; other errors are not.
func TestRefuse(t *testing.T) {
	err := cliflags.Refuse("w", 9, "1 to %d", 3)
	require.EqualError(t, err, "-w 9: want 1 to 3")
	require.True(t, cliflags.IsUsage(fmt.Errorf("check: %w", err)))
	require.False(t, cliflags.IsUsage(errors.New("disk on fire")))
	require.Nil(t, cliflags.List(""))
	require.Equal(t, []string{"a", "b"}, cliflags.List("a,b"))
}
