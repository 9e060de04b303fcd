package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/examples/internal/cliflags"
	"github.com/cutline/cutline/examples/internal/connlimit"
)

// startServing starts a broker process on the embedded default with
// args, listening on free loopback ports, and waits until it holds the
// grant; it is shut down when the test ends.
func startServing(t testing.TB, args ...string) *process {
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
func flood(t testing.TB, addr net.Addr, from string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := d.DialContext(t.Context(), "tcp", addr.String())
		if errors.Is(err, syscall.EADDRNOTAVAIL) && runtime.GOOS != "linux" {
			// Linux routes all of 127.0.0.0/8 to the loopback interface;
			// other systems have 127.0.0.1 only, unless aliased.
			t.Skipf("no loopback address %s on %s: %v", from, runtime.GOOS, err)
		}
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
// from many: an address gets no more than -max-conns-per-addr places, the
// rest of its connections closed as soon as they are accepted; past
// -max-conns in all, the oldest silent connection makes room for each new
// one. A producer is served throughout, over its kept-alive connection
// and over a new one, its records written to the filesystem zones (the
// broker's own descriptors).
func TestConnectionFlood(t *testing.T) {
	p := startServing(t, "-insecure", "-max-conns", "24", "-max-conns-per-addr", "8")
	addr := p.addrs["api"]
	client := func() *apiClient {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		return &apiClient{t: t, base: "http://" + addr.String(), hc: &http.Client{Transport: tr}}
	}
	c := client()
	m := p.node.Metrics
	open := func() float64 { return gauge(t, m.conns) }
	closed := func(reason string) float64 { return counter(t, m.connsClosed.WithLabelValues(reason)) }

	flood(t, addr, "127.0.0.2", 200)
	require.Eventually(t, func() bool { return closed("per_address") == 192 }, 10*time.Second, 5*time.Millisecond,
		"192 of the 200 connections from 127.0.0.2 closed on accept (%v)", closed("per_address"))
	require.Equal(t, float64(8), open())
	code, a, e := c.produce("orders", []byte("during the flood"), "producer-1", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(0), a.Offset)

	// Six more addresses, 8 connections each: 15 fill the 24 places (the
	// producer's kept-alive connection has one), each of the other 33
	// evicts the oldest silent one.
	for i := 3; i <= 8; i++ {
		flood(t, addr, fmt.Sprintf("127.0.0.%d", i), 8)
	}
	require.Eventually(t, func() bool { return closed("evicted") == 33 }, 10*time.Second, 5*time.Millisecond,
		"33 silent connections evicted (%v)", closed("evicted"))
	require.Equal(t, float64(24), open())
	require.Zero(t, closed("total"), "there was always a silent connection to evict")
	code, a, e = c.produce("orders", []byte("over the kept-alive connection"), "producer-1", 1)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(1), a.Offset)
	code, a, e = client().produce("orders", []byte("over a new connection"), "producer-1", 2)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(2), a.Offset)
	require.Equal(t, float64(34), closed("evicted"))
	require.Equal(t, float64(24), open())
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
	parse := func(args ...string) (*Settings, map[string]bool) {
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
	require.Equal(t, connlimit.Limits{Total: 500, PerAddr: defaultMaxConnsPerAddr}, cfg.conns)

	cfg, set = parse("-metrics-listen", "127.0.0.1:0")
	require.NoError(t, cfg.fitDescriptors(1000, set))
	require.Equal(t, 500-metricsConnLimits.Total, cfg.conns.Total)

	ca := newPKI(t)
	cfg, set = parse(append([]string{"-controller-listen", "127.0.0.1:0"}, ca.node("broker-1")...)...)
	require.NoError(t, cfg.fitDescriptors(1000, set))
	require.Equal(t, 250, cfg.conns.Total, "the API and the controller share the budget")

	cfg, set = parse("-max-conns", "600")
	err := cfg.fitDescriptors(1000, set)
	var fe *cliflags.FlagError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "max-conns", fe.Flag)

	cfg, set = parse("-max-conns", "100", "-max-conns-per-addr", "10")
	require.NoError(t, cfg.fitDescriptors(1000, set))
	require.Equal(t, connlimit.Limits{Total: 100, PerAddr: 10}, cfg.conns)
	require.Error(t, cfg.fitDescriptors(1, map[string]bool{}), "no room at all")
}

func gauge(t testing.TB, g prometheus.Gauge) float64 {
	t.Helper()
	return testutil.ToFloat64(g)
}

func counter(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// BenchmarkProduceUnderFlood measures a produce over the API of a broker
// with its default connection bounds (1024 in all, 64 per address), quiet
// and under a sustained flood: 40 addresses each keep up to 250
// connections open that send nothing, and dial again whenever the broker
// closes one (at once past a bound, after 5 s of silence otherwise).
// Reported: the connections the broker keeps open at the end, and those
// it closed to keep its bounds during the measure, per produce.
//
//	go -C examples/broker test -run '^$' -bench ProduceUnderFlood -benchtime 200x .
func BenchmarkProduceUnderFlood(b *testing.B) {
	for _, tc := range []struct {
		name  string
		addrs int
	}{{"quiet", 0}, {"flood", 40}} {
		b.Run(tc.name, func(b *testing.B) {
			p := startServing(b, "-insecure")
			addr := p.addrs["api"]
			per := 250
			if limit, ok := fileLimit(); ok {
				per = min(per, int(limit/4)/max(tc.addrs, 1))
			}
			ctx, stop := context.WithCancel(b.Context())
			var wg sync.WaitGroup
			defer func() { stop(); wg.Wait() }()
			for i := range tc.addrs {
				from := fmt.Sprintf("127.0.0.%d", i+2)
				for range per {
					wg.Go(func() { holdOpen(ctx, addr, from) })
				}
			}
			m := p.node.Metrics
			if tc.addrs > 0 {
				require.Eventually(b, func() bool { return gauge(b, m.conns) >= float64(defaultMaxConns)-1 }, time.Minute, 10*time.Millisecond,
					"the flood fills the API's %d places", defaultMaxConns)
			}
			tr := &http.Transport{}
			b.Cleanup(tr.CloseIdleConnections)
			c := &apiClient{t: b, base: "http://" + addr.String(), hc: &http.Client{Transport: tr}}
			// Its connection is made under the flood (it evicts a silent
			// one), and kept alive by its produces.
			code, _, e := c.produce("orders", []byte("first"), "", 0)
			require.Equal(b, http.StatusOK, code, e.Error)
			refused := func() float64 {
				n := 0.0
				for _, r := range []string{"total", "per_address", "evicted"} {
					n += counter(b, m.connsClosed.WithLabelValues(r))
				}
				return n
			}
			before := refused()
			b.ResetTimer()
			for b.Loop() {
				code, _, e := c.produce("orders", []byte("a record"), "", 0)
				require.Equal(b, http.StatusOK, code, e.Error)
			}
			b.StopTimer()
			b.ReportMetric(gauge(b, m.conns), "open-conns")
			b.ReportMetric((refused()-before)/float64(b.N), "closed-conns/op")
		})
	}
}

// holdOpen keeps one connection from the loopback address from open to
// addr until ctx ends, dialing again whenever the other end closes it.
func holdOpen(ctx context.Context, addr net.Addr, from string) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr.String())
		if err != nil {
			continue
		}
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		_, _ = c.Read(make([]byte, 1)) // until the broker or ctx closes it
		stop()
		_ = c.Close()
	}
}
