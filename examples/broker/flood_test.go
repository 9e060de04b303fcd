package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// startServing starts a broker process on the embedded default with
// args, listening on free loopback ports, and waits until it holds the
// grant; it is shut down when the test ends.
func startServing(t *testing.T, args ...string) *process {
	t.Helper()
	cfg := testSettings(t, append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	p, err := start(t.Context(), cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	errc := p.serve()
	t.Cleanup(func() {
		require.NoError(t, p.shutdown(shutdownCtx(t)))
		select {
		case err := <-errc:
			t.Errorf("a server failed: %v", err)
		default:
		}
	})
	waitHolding(t, p.node)
	return p
}

// flood opens n connections to addr from the loopback address from,
// and closes them when the test ends. They send nothing: each holds a
// place on the server until it closes it.
func flood(t *testing.T, addr net.Addr, from string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := d.DialContext(t.Context(), "tcp", addr.String())
		require.NoError(t, err, "dial from %s", from)
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return conns
}

// A flood of connections that send nothing, from one address and then
// from many, gets no more than -max-conns-per-addr places per address
// and -max-conns in all: the rest are closed as soon as they are
// accepted, and a producer from another address is still served, its
// records written to the filesystem zones (the broker's own
// descriptors).
func TestConnectionFlood(t *testing.T) {
	p := startServing(t, "-insecure", "-max-conns", "24", "-max-conns-per-addr", "8")
	addr := p.addrs["api"]
	c := &apiClient{t: t, base: "http://" + addr.String(), hc: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(c.hc.CloseIdleConnections)
	m := p.node.met
	open := func() float64 { return gauge(t, m.conns) }
	refused := func(reason string) float64 { return counter(t, m.connsRefused.WithLabelValues(reason)) }

	flood(t, addr, "127.0.0.2", 200)
	require.Eventually(t, func() bool { return refused("per_address") == 192 }, 10*time.Second, 5*time.Millisecond,
		"192 of the 200 connections from 127.0.0.2 closed on accept (%v)", refused("per_address"))
	require.Equal(t, float64(8), open())
	code, a, e := c.produce("orders", []byte("during the flood"), "producer-1", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(0), a.Offset)

	// Many addresses: the bound in all holds, and the producer's
	// keep-alive connection still carries its records.
	for i := 3; i <= 8; i++ {
		flood(t, addr, fmt.Sprintf("127.0.0.%d", i), 8)
	}
	require.Eventually(t, func() bool { return refused("total")+refused("per_address") == 192+48-15 }, 10*time.Second, 5*time.Millisecond,
		"past the 24 places in all, connections are closed on accept")
	require.Equal(t, float64(24), open())
	code, a, e = c.produce("orders", []byte("during the wider flood"), "producer-1", 1)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(1), a.Offset)
}

// A client without the token gets its 401, and its connection is closed:
// it keeps no descriptor once answered. /metrics needs the token on the
// API; -metrics-listen serves it without one, on a listener of its own
// that serves nothing else.
func TestMetricsAndUnauthenticated(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	p := startServing(t, "-insecure", "-auth-token-file", tokenFile, "-metrics-listen", "127.0.0.1:0")
	api := p.addrs["api"].String()

	conn, err := net.Dial("tcp", api)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: broker\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.True(t, resp.Close, "the answer closes the connection")
	_, _ = io.Copy(io.Discard, resp.Body)
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the broker closed the connection")

	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	get := func(url, token string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("http://"+api+"/metrics", "s3cret")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "cutline_broker_api_connections ")
	metrics := "http://" + p.addrs["metrics"].String()
	code, body = get(metrics+"/metrics", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "cutline_broker_grant_changes_total")
	require.NotContains(t, body, "s3cret")
	code, _ = get(metrics+"/v1/streams", "s3cret")
	require.Equal(t, http.StatusNotFound, code, "the metrics listener serves the metrics only")
}

// The listeners' connections stay within a half of the file descriptor
// limit: a -max-conns given past it is refused, its default is lowered to
// fit, and the controller's listener takes its share too.
func TestDescriptorBudget(t *testing.T) {
	parse := func(args ...string) (*settings, map[string]bool) {
		cfg := testSettings(t, args...)
		set := map[string]bool{}
		for _, a := range args {
			if name, ok := strings.CutPrefix(a, "-"); ok {
				set[name] = true
			}
		}
		return cfg, set
	}
	cfg, set := parse()
	require.NoError(t, cfg.fitDescriptors(1000, set))
	require.Equal(t, connLimits{Total: 500, PerAddr: defaultMaxConnsPerAddr}, cfg.conns)

	cfg, set = parse("-metrics-listen", "127.0.0.1:0")
	require.NoError(t, cfg.fitDescriptors(1000, set))
	require.Equal(t, 500-metricsConnLimits.Total, cfg.conns.Total)

	ca := newPKI(t)
	cfg, set = parse(append([]string{"-controller-listen", "127.0.0.1:0"}, ca.node("broker-1")...)...)
	require.NoError(t, cfg.fitDescriptors(1000, set))
	require.Equal(t, 250, cfg.conns.Total, "the API and the controller share the budget")

	cfg, set = parse("-max-conns", "600")
	err := cfg.fitDescriptors(1000, set)
	var fe *flagError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "max-conns", fe.Flag)

	cfg, set = parse("-max-conns", "100", "-max-conns-per-addr", "10")
	require.NoError(t, cfg.fitDescriptors(1000, set))
	require.Equal(t, connLimits{Total: 100, PerAddr: 10}, cfg.conns)
	require.Error(t, cfg.fitDescriptors(1, map[string]bool{}), "no room at all")
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	return testutil.ToFloat64(g)
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}
