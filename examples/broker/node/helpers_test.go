package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/batch"
)

// testSettings parses args after the timings of a test (a grant in a
// fraction of a second, heartbeats far inside the lease even on a loaded
// machine), without the environment, and shortens the node's decision
// delay and polls. Unless args name a data directory or an etcd, it runs
// -ephemeral: the default's embedded etcd would start in the package's
// directory.
func testSettings(t testing.TB, args ...string) *Settings {
	t.Helper()
	timings := []string{"-lease", "2s", "-heartbeat", "100ms", "-session-ttl", "2s"}
	if !slices.Contains(args, "-dir") && !slices.Contains(args, "-etcd") && !slices.Contains(args, "-ephemeral") {
		timings = append(timings, "-ephemeral")
	}
	cfg, err := parseFlags(append(timings, args...), func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	cfg.decisionDelay, cfg.poll = 10*time.Millisecond, 10*time.Millisecond
	return cfg
}

// waitHolding waits until n holds the grant and its star runs.
func waitHolding(t testing.TB, n *Node) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := n.holder(); return err == nil }, time.Minute, 10*time.Millisecond, "%s never held the grant", n.Config.Name)
}

// apiClient speaks the broker's API.
type apiClient struct {
	t     testing.TB
	base  string
	hc    *http.Client
	token string
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *apiClient) do(method, path string, body []byte, hdr map[string]string, out any) (int, http.Header) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, bytes.NewReader(body))
	require.NoError(c.t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	if out != nil && len(raw) > 0 && resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(c.t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode, resp.Header
}

// produce appends one record, as producer's record seq when producer is
// not empty.
func (c *apiClient) produce(stream string, data []byte, producer string, seq uint64) (int, Ack, ErrorBody) {
	c.t.Helper()
	hdr := map[string]string{}
	if producer != "" {
		hdr[HeaderProducer], hdr[HeaderSequence] = producer, strconv.FormatUint(seq, 10)
	}
	var raw json.RawMessage
	code, _ := c.do(http.MethodPost, "/v1/streams/"+stream+"/records", data, hdr, &raw)
	var a Ack
	var e ErrorBody
	if code == http.StatusOK {
		require.NoError(c.t, json.Unmarshal(raw, &a))
	} else if len(raw) > 0 {
		require.NoError(c.t, json.Unmarshal(raw, &e))
	}
	return code, a, e
}

// consume reads a whole stream back, page by page, each from where the
// last said to go on.
func (c *apiClient) consume(stream string) []Consumed {
	c.t.Helper()
	var all []Consumed
	for {
		var page []Consumed
		code, hdr := c.do(http.MethodGet, fmt.Sprintf("/v1/streams/%s/records?offset=%d&limit=7", stream, len(all)), nil, nil, &page)
		require.Equal(c.t, http.StatusOK, code)
		all = append(all, page...)
		cont, err := strconv.Atoi(hdr.Get(HeaderContinue))
		require.NoError(c.t, err)
		require.Equal(c.t, len(all), cont, "%s says where the page ended", HeaderContinue)
		next, err := strconv.Atoi(hdr.Get(HeaderNext))
		require.NoError(c.t, err)
		if len(all) >= next {
			require.Len(c.t, all, next)
			return all
		}
		require.NotEmpty(c.t, page)
	}
}

// metric returns the value of one sample of the /metrics page.
func (c *apiClient) metric(sample string) float64 {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodGet, c.base+"/metrics", nil)
	require.NoError(c.t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(page)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(c.t, err)
	return v
}

// checkStream requires the stream to hold exactly the records sent, each
// once, at offsets 0, 1, 2…
func checkStream(t testing.TB, got []Consumed, sent map[string]bool) {
	t.Helper()
	seen := map[string]int{}
	for i, r := range got {
		require.Equal(t, uint64(i), r.Offset)
		seen[string(r.Data)]++
	}
	lost, dup := 0, 0
	for d := range sent {
		if seen[d] == 0 {
			lost++
		}
	}
	for d, n := range seen {
		require.True(t, sent[d], "a record nobody sent: %q", d)
		dup += n - 1
	}
	require.Zero(t, lost, "lost")
	require.Zero(t, dup, "duplicated")
	require.Len(t, got, len(sent))
}

func shutdownCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// replayAll replays stream from its start up to next, as a holder's
// rebuild without a snapshot does.
func replayAll(t testing.TB, n *Node, stream string, next uint64) *batch.Dedup {
	h, err := n.holder()
	require.NoError(t, err)
	d, err := batch.NewDedup(batch.DedupOptions{Producers: 16, Window: 128})
	require.NoError(t, err)
	_, _, err = h.dedup.Replay(t.Context(), stream, d, next)
	require.NoError(t, err)
	return d
}
