package node

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/etcdlocal"
)

// The data directory and embedded etcd flags: by default an embedded
// etcd on the loopback and the data in ./cutline-data, made absolute;
// -ephemeral instead of both, never with -dir or -etcd; the embedded
// etcd only on a loopback address with a port, and only without -etcd.
func TestLocalEtcdFlags(t *testing.T) {
	parse := func(args ...string) (*Settings, error) {
		return parseFlags(args, func(string) string { return "" }, io.Discard)
	}
	cfg, err := parse()
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "cutline-data"), cfg.Dir)
	require.Equal(t, defaultEtcdListen, cfg.local.Listen)

	cfg, err = parse("-ephemeral")
	require.NoError(t, err)
	require.Empty(t, cfg.Dir, "a temporary directory")
	require.Empty(t, cfg.local.Listen, "no embedded etcd")

	cfg, err = parse("-etcd", "10.0.0.5:2379", "-dir", "rel")
	require.NoError(t, err)
	require.Empty(t, cfg.local.Listen, "no embedded etcd with -etcd")
	require.Equal(t, filepath.Join(wd, "rel"), cfg.Dir)

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
		require.True(t, IsUsage(err), "%v: %v", bad, err)
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
	require.ErrorIs(t, err, etcdlocal.ErrInUse)
	require.ErrorContains(t, err, "the data directory "+dir+" is in use by another broker")
	_, err = startLocalEtcd(ctx, addr, t.TempDir(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "-etcd-listen "+addr)
}

// On an etcd of its own (-etcd), a -role all broker given neither
// certificate nor token makes them for the run, as its default does,
// and says where; the API then takes them, and refuses a request
// without the token.
func TestExternalEtcdMadeCredentials(t *testing.T) {
	// The etcd: an embedded one of the test's, stopped when it ends.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	etcd, err := startLocalEtcd(ctx, freeAddr(t), t.TempDir(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { etcd.stop(false) })
	endpoint := "http://" + etcd.Endpoint
	dir := t.TempDir()
	var logs lockedBuffer
	cfg := testSettings(t, "-etcd", endpoint, "-dir", dir, "-listen", "127.0.0.1:0")
	p, c := startDurable(t, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	defer func() { require.NoError(t, p.shutdown(shutdownCtx(t))) }()
	require.Nil(t, p.be.local, "no embedded etcd")
	require.Contains(t, logs.String(), "msg=\"made credentials for this run")
	require.Contains(t, logs.String(), "ca="+filepath.Join(dir, "ca.pem")+" token_file="+filepath.Join(dir, "token"))
	for _, f := range []string{"ca.pem", "token"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	waitHolding(t, p.node)
	code, _, e := c.produce("orders", []byte("hello"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	c.token = "not-the-token"
	code, _, _ = c.produce("orders", []byte("hello"), "", 0)
	require.Equal(t, http.StatusUnauthorized, code)
	require.NotContains(t, logs.String(), "INSECURE")
}

// The start-up log prints commands to paste, with the real paths of the
// run's certificate and token, and no character a text log line would
// escape: pasted into a shell, they produce, consume and read the
// metrics; the cutline command names the embedded etcd and the star
// whose chain it holds.
func TestPastedCommands(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:8080": "https://127.0.0.1:8080", ":9000": "https://localhost:9000",
		"[::1]:8080": "https://[::1]:8080", "0.0.0.0:8080": "https://localhost:8080",
	} {
		require.Equal(t, want, apiURL(listen), listen)
	}
	require.Equal(t, "/a/b-c_d.e", shellQuote("/a/b-c_d.e"))
	require.Equal(t, `'/my dir/it'\''s'`, shellQuote("/my dir/it's"))

	dir, etcdAddr := t.TempDir(), freeAddr(t)
	var logs lockedBuffer
	p, c := startDurable(t, durableSettings(t, dir, etcdAddr), slog.New(slog.NewTextHandler(&logs, nil)))
	defer func() { require.NoError(t, p.shutdown(shutdownCtx(t))) }()
	cmds := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		m := regexp.MustCompile(`msg="paste to ([a-z ]+)" cmd=(".*")$`).FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		cmd, err := strconv.Unquote(m[2])
		require.NoError(t, err)
		require.Equal(t, m[2], `"`+cmd+`"`, "nothing in the command is escaped in the log")
		cmds[m[1]] = cmd
	}
	api := p.addrs["api"].String()
	curl := "curl -s --cacert " + dir + "/ca.pem --oauth2-bearer $(cat " + dir + "/token)"
	require.Equal(t, map[string]string{
		"produce":               curl + " --data-binary hello https://" + api + "/v1/streams/orders/records",
		"consume":               curl + " 'https://" + api + "/v1/streams/orders/records?offset=0&limit=10'",
		"read the metrics":      curl + " https://" + api + "/metrics",
		"inspect the metastore": "cutline -etcd " + etcdAddr + " -etcd-root /cutline-broker/ chain broker-1",
	}, cmds)
	waitHolding(t, p.node)

	// The star the cutline command names has a chain in the embedded
	// etcd, under the key root it names.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	keys, err := p.be.local.cli.Get(ctx, "/cutline-broker/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var star bool
	for _, kv := range keys.Kvs {
		star = star || strings.Contains(string(kv.Key), "/broker-1/")
	}
	require.True(t, star, "no key of the star broker-1 under /cutline-broker/")

	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no curl to paste the commands into: CI must run them")
		}
		t.Skip("no curl to paste the commands into")
	}
	run := func(cmd string) string {
		out, err := exec.CommandContext(ctx, "sh", "-c", cmd).Output()
		require.NoError(t, err, cmd)
		return string(out)
	}
	var a Ack
	require.NoError(t, json.Unmarshal([]byte(run(cmds["produce"])), &a))
	require.Equal(t, uint64(0), a.Offset)
	require.Equal(t, `[{"offset":0,"data":"aGVsbG8="}]`+"\n", run(cmds["consume"]))
	require.Contains(t, run(cmds["read the metrics"]), "cutline_broker_http_requests_total")
	require.Equal(t, 1, len(c.consume("orders")))
}
