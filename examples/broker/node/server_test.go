package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/lease"
)

// The API on -ephemeral, with nothing but test timings: an
// in-memory metastore, filesystem zones in a temporary directory, the
// controller and one node in process over authority.Local, and the
// credentials the process made for itself (TLS and a bearer token).
func TestAPI(t *testing.T) {
	cfg := testSettings(t)
	p, err := start(t.Context(), cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = p.shutdown(shutdownCtx(t))
		}
	})
	waitHolding(t, p.node)

	// The credentials: a certificate the client trusts from ca.pem and a
	// token from a file only the owner reads.
	token, err := os.ReadFile(filepath.Join(p.be.Dir, "token"))
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(p.be.Dir, "token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	caPEM, err := os.ReadFile(filepath.Join(p.be.Dir, "ca.pem"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	leaf, err := x509.ParseCertificate(p.sec.Cert.Certificate[0])
	require.NoError(t, err)
	id, err := authhttp.NodeIdentity(leaf)
	require.NoError(t, err)
	require.Equal(t, cfg.node, id, "the certificate made for the run names the node")
	srv := httptest.NewUnstartedServer(p.api)
	srv.TLS = p.sec.APITLS()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &apiClient{t: t, base: srv.URL, hc: &http.Client{Transport: tr}, token: string(token)}

	// Without the token, or with another one: 401, before anything else.
	for _, bad := range []string{"", "not-the-token", string(token) + "x"} {
		anon := *c
		anon.token = bad
		code, _, _ := anon.produce("orders", []byte("x"), "", 0)
		require.Equal(t, http.StatusUnauthorized, code, "token %q", bad)
		code, _ = anon.do(http.MethodGet, "/v1/streams", nil, nil, nil)
		require.Equal(t, http.StatusUnauthorized, code)
	}

	// 50 records to each of two streams, from concurrent producers.
	sent := map[string]map[string]bool{"orders": {}, "payments": {}}
	first := map[string]Ack{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, stream := range []string{"orders", "payments"} {
		for w := range 5 {
			wg.Go(func() {
				producer := fmt.Sprintf("%s-producer-%d", stream, w)
				for seq := range uint64(10) {
					data := fmt.Sprintf("%s/%d/%d\x00binary\xff", stream, w, seq)
					code, a, e := c.produce(stream, []byte(data), producer, seq)
					if !assertOK(t, code, e) {
						return
					}
					mu.Lock()
					sent[stream][data] = true
					if w == 0 && seq == 0 {
						first[stream] = a
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	require.False(t, t.Failed())
	for stream, recs := range sent {
		require.Len(t, recs, 50)
		checkStream(t, c.consume(stream), recs)
	}

	// A retry of a record already acknowledged: the same offset, nothing
	// appended.
	code, again, e := c.produce("orders", []byte("orders/0/0\x00binary\xff"), "orders-producer-0", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.True(t, again.Duplicate)
	again.Duplicate = false
	require.Equal(t, first["orders"], again)
	checkStream(t, c.consume("orders"), sent["orders"])

	// Bad requests.
	code, _, _ = c.produce("not..ok/x", []byte("x"), "", 0)
	require.Equal(t, http.StatusNotFound, code, "a stream name with a slash matches no route")
	code, _, _ = c.produce(".hidden", []byte("x"), "", 0)
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = c.do(http.MethodPost, "/v1/streams/orders/records", []byte("x"), map[string]string{HeaderProducer: "p"}, nil)
	require.Equal(t, http.StatusBadRequest, code, "a producer without a sequence")
	code, _ = c.do(http.MethodPost, "/v1/streams/orders/records", make([]byte, DefaultMaxRecord+1), nil, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	code, _ = c.do(http.MethodGet, "/v1/streams/orders/records?limit=0", nil, nil, nil)
	require.Equal(t, http.StatusBadRequest, code)

	// A producer fencing token installed on a stream: a stale one is 409,
	// the installed one passes.
	h, err := p.node.holder()
	require.NoError(t, err)
	code, _, e = c.produce("fenced", []byte("before"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	_, err = h.Star.Fence(t.Context(), "fenced", lease.Fenced, "producer-token-2")
	require.NoError(t, err)
	for _, tok := range []string{"", "producer-token-1"} {
		code, _ = c.do(http.MethodPost, "/v1/streams/fenced/records", []byte("stale"), map[string]string{headerToken: tok}, nil)
		require.Equal(t, http.StatusConflict, code, "token %q", tok)
	}
	var a Ack
	code, _ = c.do(http.MethodPost, "/v1/streams/fenced/records", []byte("current"), map[string]string{headerToken: "producer-token-2"}, &a)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, uint64(1), a.Offset)

	// The listing: this node holds the grant and every stream's lease.
	var list struct {
		Holder  string       `json:"holder"`
		Streams []streamInfo `json:"streams"`
	}
	code, _ = c.do(http.MethodGet, "/v1/streams", nil, nil, &list)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, cfg.node, list.Holder)
	require.Len(t, list.Streams, 3)
	for _, s := range list.Streams {
		require.Equal(t, cfg.node, s.Holder, s.Stream)
		require.Equal(t, "open", s.EpochState)
	}
	require.Equal(t, "orders", list.Streams[1].Stream)
	require.Equal(t, uint64(50), list.Streams[1].Next)

	// The metrics moved.
	require.GreaterOrEqual(t, c.metric("cutline_broker_append_seconds_count"), float64(102))
	require.Equal(t, float64(3), c.metric(`cutline_broker_gate_decisions_total{decision="fresh"}`))
	require.Equal(t, float64(1), c.metric(`cutline_broker_grant_changes_total{change="gained"}`))
	require.Positive(t, c.metric(`cutline_broker_object_requests_total{op="create",result="ok",zone="zone-a"}`))
	body := metricsPage(t, c)
	require.NotContains(t, body, string(token), "no credential in the metrics")
	require.Contains(t, body, "cutline_broker_slots_in_flight")
	require.Contains(t, body, "cutline_broker_undecided_slot_age_seconds 0")
	// The process's own metrics, and the API's requests by route and
	// code.
	require.Contains(t, body, "go_goroutines")
	require.Contains(t, body, "process_open_fds")
	require.GreaterOrEqual(t, c.metric(`cutline_broker_http_requests_total{code="200",route="POST /v1/streams/{stream}/records"}`), float64(102))
	require.Positive(t, c.metric(`cutline_broker_http_request_seconds_count{route="GET /v1/streams"}`))
	backlog := c.metric("cutline_broker_absorb_backlog_flights")
	require.GreaterOrEqual(t, backlog, float64(0))
	require.LessOrEqual(t, backlog, float64(lease.DefaultAbsorbEvery+cfg.Window), "the backlog stays within the absorb batch and the window")

	// SIGTERM: every stream leaves through Finish and gets its
	// clean-release mark; the goodbye ends the grant.
	require.NoError(t, p.shutdown(shutdownCtx(t)))
	stopped = true
	for stream, want := range map[string]uint64{"orders": 50, "payments": 50, "fenced": 2} {
		st, err := lease.Inspect(t.Context(), p.be.Store, "", stream)
		require.NoError(t, err)
		require.NotNil(t, st.Mark, stream)
		require.Equal(t, lease.ReasonClose, st.Mark.Reason, stream)
		require.Equal(t, want, st.Mark.Next, stream)
		require.Empty(t, st.Holder, "the lease went with the mark")
	}
}

// assertOK reports a produce that failed, from any goroutine.
func assertOK(t *testing.T, code int, e ErrorBody) bool {
	if code != http.StatusOK {
		t.Errorf("produce: %d %s", code, e.Error)
		return false
	}
	return true
}

func metricsPage(t *testing.T, c *apiClient) string {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.base+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(raw)
}

// With -insecure and no token file, the API takes requests without a
// token; with a token file it requires it, even without TLS.
func TestInsecure(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	for _, tc := range []struct {
		name  string
		args  []string
		token string
	}{
		{"open", []string{"-insecure"}, ""},
		{"token without TLS", []string{"-insecure", "-auth-token-file", tokenFile}, "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := start(t.Context(), testSettings(t, tc.args...), slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			defer func() { require.NoError(t, p.shutdown(shutdownCtx(t))) }()
			require.Nil(t, p.sec.APITLS())
			waitHolding(t, p.node)
			srv := httptest.NewServer(p.api)
			defer srv.Close()
			c := &apiClient{t: t, base: srv.URL, hc: srv.Client()}
			code, _, _ := c.produce("orders", []byte("x"), "", 0)
			if tc.token != "" {
				require.Equal(t, http.StatusUnauthorized, code)
				c.token = tc.token
				code, _, _ = c.produce("orders", []byte("x"), "", 0)
			}
			require.Equal(t, http.StatusOK, code)
		})
	}
}

// Flags and their environment variables; what the embedded default
// refuses to serve unprotected.
func TestFlags(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	cfg, err := parseFlags(nil, env("CUTLINE_NODE", "broker-7", "CUTLINE_W", "3"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "broker-7", cfg.node)
	require.Equal(t, 3, cfg.W)
	require.True(t, cfg.embedded())
	cfg, err = parseFlags([]string{"-node", "broker-8"}, env("CUTLINE_NODE", "broker-7"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "broker-8", cfg.node, "a flag beats its variable")
	require.Empty(t, cfg.peers, "no health links by default")
	tlsFlags := []string{"-tls-cert", "b.pem", "-tls-key", "b.key", "-tls-ca", "ca.pem"}
	cfg, err = parseFlags(append([]string{"-latency", "20ms"}, tlsFlags...), env("CUTLINE_PEERS", "broker-1=https://10.0.0.1:8080,broker-2=https://b2.example:8080/"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"broker-1": "https://10.0.0.1:8080", "broker-2": "https://b2.example:8080/"}, cfg.peers)
	require.Equal(t, 20*time.Millisecond, cfg.latency)
	cfg, err = parseFlags([]string{"-snapshot-every", "0", "-snapshot-interval", "1m", "-producers", "5"}, env(), io.Discard)
	require.NoError(t, err)
	o := cfg.streamOptions()
	require.Equal(t, [2]any{-1, time.Minute}, [2]any{o.SnapshotEvery, o.SnapshotInterval}, "0 turns a trigger off")
	require.Equal(t, batch.DedupOptions{Producers: 5, Window: batch.DefaultDedupWindow}, cfg.producers)

	for _, bad := range [][]string{
		{"-gcs-buckets", "a,b,c"},
		{"-role", "broker"},
		{"-role", "broker", "-controller", "https://ctl:8443"},
		{"-role", "broker", "-controller", "https://ctl:8443", "-controller-identity", "a/b"},
		{"-role", "controller", "-etcd", "127.0.0.1:2379"},
		{"-controller", "https://ctl:8443"},
		{"-w", "4"},
		{"-s3-buckets", "a,b,c"},
		{"-node", "a/b"},
		{"-heartbeat", "5s"},
		{"-tls-cert", "x.pem"},
		{"-peers", "broker-1=https://10.0.0.1:8080"}, // without TLS
		append([]string{"-peers", "broker-1=http://10.0.0.1:8080"}, tlsFlags...),
		append([]string{"-peers", "broker-1=https://10.0.0.1:8080/api"}, tlsFlags...),
		append([]string{"-peers", "broker-1"}, tlsFlags...),
		append([]string{"-peers", "a/b=https://10.0.0.1:8080"}, tlsFlags...),
		append([]string{"-peers", "b=https://h:1,b=https://h:2"}, tlsFlags...),
		append([]string{"-role", "controller", "-etcd", "127.0.0.1:2379", "-peers", "b=https://h:1"}, tlsFlags...),
		{"-latency", "-1ms"},
		{"-producers", "0"},
		{"-producers", "65537"},
		{"-producer-window", "0"},
		{"-producer-window", "65537"},
		{"-producer-window", "65536"}, // with 1024 producers, too many acknowledgements
		{"-snapshot-every", "-1"},
		{"-snapshot-interval", "-1s"},
		{"-snapshot-interval", "10ms"},
	} {
		_, err := parseFlags(bad, env(), io.Discard)
		require.Error(t, err, "%v", bad)
	}
	_, err = parseFlags([]string{"-gcs-buckets", "a"}, env(), io.Discard)
	require.True(t, strings.Contains(err.Error(), "not supported by this example"), err.Error())

	// A -role all process makes its own credentials on any metastore
	// (see TestExternalEtcdMadeCredentials); a token file named must be
	// there, and a node of a controller elsewhere needs its own.
	_, err = loadSecurity(testSettings(t, "-dir", t.TempDir(), "-auth-token-file", "missing"), "", slog.New(slog.DiscardHandler))
	require.Error(t, err)
	cfg = testSettings(t)
	cfg.Etcd, cfg.Role = "127.0.0.1:2379", roleBroker
	_, err = loadSecurity(cfg, t.TempDir(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "-insecure")
}
