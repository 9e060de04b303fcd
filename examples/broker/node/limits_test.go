package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// A 500 tells the client only that it happened and under which request
// id; the broker logs the cause under that id.
func TestInternalErrorHidden(t *testing.T) {
	c := newCluster(t)
	b := c.join("node-b")
	var logs bytes.Buffer
	s := NewServer(b.Node, ServerOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	cause := errors.New("zone-b at /srv/cutline/zone-b: key streams/orders/3: disk on fire")
	w := httptest.NewRecorder()
	s.fail(w, httptest.NewRequest(http.MethodGet, "/v1/streams/orders/records", nil), fmt.Errorf("read: %w", cause))

	require.Equal(t, http.StatusInternalServerError, w.Code)
	var body ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.NotContains(t, w.Body.String(), "zone-b")
	require.NotContains(t, w.Body.String(), "disk on fire")
	require.Regexp(t, `^[0-9a-f]{16}$`, body.RequestID)
	require.Contains(t, body.Error, body.RequestID)
	require.Equal(t, body.RequestID, w.Header().Get(headerRequestID))

	var line struct {
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
		Err       string `json:"err"`
	}
	require.NoError(t, json.Unmarshal(logs.Bytes(), &line), logs.String())
	require.Equal(t, "request failed", line.Msg)
	require.Equal(t, body.RequestID, line.RequestID)
	require.Contains(t, line.Err, "disk on fire")
}

// A holder leads at most -max-streams streams: a produce to one more is
// refused with 429, while the streams it leads go on. GET /v1/streams
// answers a page at a time, in name order, each naming where the next
// starts.
func TestStreamQuotaAndListing(t *testing.T) {
	c := newClusterWith(t, "-max-streams", "3")
	b := c.join("node-b")
	waitHolding(t, b.Node)
	for _, s := range []string{"orders", "audit", "payments"} {
		code, _, e := b.api.produce(s, []byte("x"), "", 0)
		require.Equal(t, http.StatusOK, code, e.Error)
	}
	code, _, e := b.api.produce("one-too-many", []byte("x"), "", 0)
	require.Equal(t, http.StatusTooManyRequests, code)
	require.Contains(t, e.Error, "as many streams as it may (3 streams)")
	code, a, e := b.api.produce("orders", []byte("y"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	require.Equal(t, uint64(1), a.Offset)

	var names []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3, "two streams a page: two pages")
		var page streamPage
		code, _ := b.api.do(http.MethodGet, "/v1/streams?limit=2&after="+after, nil, nil, &page)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "node-b", page.Holder)
		require.LessOrEqual(t, len(page.Streams), 2)
		for _, s := range page.Streams {
			names = append(names, s.Stream)
		}
		if page.Next == "" {
			break
		}
		require.Equal(t, names[len(names)-1], page.Next)
		after = page.Next
	}
	require.Equal(t, []string{"audit", "orders", "payments"}, names)

	for _, bad := range []string{"?limit=0", "?limit=1001", "?after=a/b", "?limit=x"} {
		code, _ := b.api.do(http.MethodGet, "/v1/streams"+bad, nil, nil, nil)
		require.Equal(t, http.StatusBadRequest, code, bad)
	}
}
