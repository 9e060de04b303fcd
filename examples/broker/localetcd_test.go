package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The data directory and embedded etcd flags: by default an embedded
// etcd on the loopback and the data in ./cutline-data, made absolute;
// -ephemeral instead of both, never with -dir or -etcd; the embedded
// etcd only on a loopback address with a port, and only without -etcd.
func TestLocalEtcdFlags(t *testing.T) {
	parse := func(args ...string) (*settings, error) {
		return parseFlags(args, func(string) string { return "" }, io.Discard)
	}
	cfg, err := parse()
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "cutline-data"), cfg.dir)
	require.Equal(t, defaultEtcdListen, cfg.local.Listen)

	cfg, err = parse("-ephemeral")
	require.NoError(t, err)
	require.Empty(t, cfg.dir, "a temporary directory")
	require.Empty(t, cfg.local.Listen, "no embedded etcd")

	cfg, err = parse("-etcd", "10.0.0.5:2379", "-dir", "rel")
	require.NoError(t, err)
	require.Empty(t, cfg.local.Listen, "no embedded etcd with -etcd")
	require.Equal(t, filepath.Join(wd, "rel"), cfg.dir)

	cfg, err = parse("-etcd-listen", "[::1]:2479")
	require.NoError(t, err)
	require.Equal(t, "[::1]:2479", cfg.local.Listen)

	for _, bad := range [][]string{
		{"-ephemeral", "-dir", "x"},
		{"-ephemeral", "-etcd", "10.0.0.5:2379"},
		{"-dir", ""},
		{"-etcd-listen", "0.0.0.0:2479"},
		{"-etcd-listen", "10.0.0.1:2479"},
		{"-etcd-listen", "localhost:2479"},
		{"-etcd-listen", "127.0.0.1"},
		{"-etcd-listen", "127.0.0.1:0"},
		{"-etcd-listen", "127.0.0.1:2479", "-etcd", "10.0.0.5:2379"},
		{"-etcd-root", "no-slash"},
	} {
		_, err := parse(bad...)
		require.Error(t, err, "%v", bad)
		require.True(t, isUsage(err), "%v: %v", bad, err)
	}
}

// The embedded etcd keeps what was written through a clean stop and a
// hard one, and its stops log nothing above debug: their listeners'
// errors only say that they were closed.
func TestLocalEtcdDurableAndQuiet(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i, hard := range []bool{false, true, false} {
		s, err := startLocalEtcd(ctx, addr, dir, log)
		require.NoError(t, err)
		for j := range i {
			got, err := s.cli.Get(ctx, "k"+strconv.Itoa(j))
			require.NoError(t, err)
			require.Len(t, got.Kvs, 1, "k%d, written before stop %d", j, i)
		}
		_, err = s.cli.Put(ctx, "k"+strconv.Itoa(i), "v")
		require.NoError(t, err)
		s.stop(hard)
		s.stop(hard) // only the first does anything
	}
	require.DirExists(t, filepath.Join(dir, "etcd", "member", "wal"))
	require.NotRegexp(t, `level=(WARN|ERROR)`, logs.String())
}

// A second broker on the same data directory, or the same etcd port,
// does not start, and says why, at once.
func TestLocalEtcdTaken(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := startLocalEtcd(ctx, addr, dir, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer s.stop(false)
	_, err = startLocalEtcd(ctx, freeAddr(t), dir, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "the data directory "+dir+" is in use by another broker")
	_, err = startLocalEtcd(ctx, addr, t.TempDir(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "-etcd-listen "+addr)
}
