package brokerproc_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The broker's API headers.
const (
	headerProducer = "Cutline-Producer"
	headerSequence = "Cutline-Sequence"
	headerNext     = "Cutline-Next-Offset"
)

// api speaks the broker's API as a client: the bearer token, and a client
// certificate of the test CA that names no node.
type api struct {
	hc    *http.Client
	tr    *http.Transport
	token string
}

func newAPI(t testing.TB, roots *x509.CertPool, cert tls.Certificate, token string) *api {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{cert}},
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     time.Minute,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &api{hc: &http.Client{Transport: tr}, tr: tr, token: token}
}

// ackBody is a produce's 200 answer.
type ackBody struct {
	Offset    uint64 `json:"offset"`
	Epoch     uint64 `json:"epoch"`
	Slot      uint64 `json:"slot"`
	Duplicate bool   `json:"duplicate"`
}

// errBody is an error answer; Holder names the grant's holder on a 503.
type errBody struct {
	Error  string `json:"error"`
	Holder string `json:"holder"`
}

// answer is what a produce got: a status (0 when no answer came, with
// Err), and the decoded body.
type answer struct {
	Code int
	Ack  ackBody
	Body errBody
	Err  error
}

func (a answer) String() string {
	switch {
	case a.Err != nil:
		return "no answer: " + a.Err.Error()
	case a.Code == http.StatusOK:
		return fmt.Sprintf("200 offset %d (epoch %d, slot %d, duplicate %v)", a.Ack.Offset, a.Ack.Epoch, a.Ack.Slot, a.Ack.Duplicate)
	}
	return fmt.Sprintf("%d %q (holder %q)", a.Code, a.Body.Error, a.Body.Holder)
}

// do sends one request and reads the answer.
func (c *api) do(ctx context.Context, hc *http.Client, method, url string, body []byte, hdr map[string]string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// produce sends one record of producer's sequence seq to stream, at the
// broker at base, through hc (c's client when nil).
func (c *api) produce(ctx context.Context, hc *http.Client, base, stream, producer string, seq uint64, data []byte) answer {
	if hc == nil {
		hc = c.hc
	}
	code, _, raw, err := c.do(ctx, hc, http.MethodPost, base+"/v1/streams/"+stream+"/records", data,
		map[string]string{headerProducer: producer, headerSequence: strconv.FormatUint(seq, 10)})
	a := answer{Code: code, Err: err}
	switch {
	case err != nil:
	case code == http.StatusOK:
		a.Err = json.Unmarshal(raw, &a.Ack)
	default:
		_ = json.Unmarshal(raw, &a.Body) // a body that is not JSON leaves it empty
		if a.Body.Error == "" {
			a.Body.Error = strings.TrimSpace(string(raw))
		}
	}
	return a
}

// holder is the grant's holder as the broker at base reads the
// controller's durable state ("" while none holds it).
func (c *api) holder(ctx context.Context, base string) (string, error) {
	code, _, raw, err := c.do(ctx, c.hc, http.MethodGet, base+"/v1/streams", nil, nil)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET /v1/streams: %d %s", code, raw)
	}
	var list struct {
		Holder string `json:"holder"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", err
	}
	return list.Holder, nil
}

// record is one record read back.
type record struct {
	Offset uint64 `json:"offset"`
	Data   []byte `json:"data"`
}

// readAll reads a whole stream back through the broker at base, page by
// page, up to where its coverage ends.
func (c *api) readAll(ctx context.Context, base, stream string) ([]record, error) {
	var all []record
	for {
		code, hdr, raw, err := c.do(ctx, c.hc, http.MethodGet, fmt.Sprintf("%s/v1/streams/%s/records?offset=%d&limit=1000", base, stream, len(all)), nil, nil)
		if err != nil {
			return nil, err
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("read %s from %d: %d %s", stream, len(all), code, raw)
		}
		var page []record
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, err
		}
		all = append(all, page...)
		next, err := strconv.Atoi(hdr.Get(headerNext))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", headerNext, err)
		}
		switch {
		case len(all) == next:
			return all, nil
		case len(all) > next || len(page) == 0:
			return nil, fmt.Errorf("read %s: %d records, the coverage ends at %d", stream, len(all), next)
		}
	}
}

// metrics returns the broker's Prometheus page (no token needed; sent
// anyway).
func (c *api) metrics(ctx context.Context, base string) (string, error) {
	code, _, raw, err := c.do(ctx, c.hc, http.MethodGet, base+"/metrics", nil, nil)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %d", code)
	}
	return string(raw), nil
}

// sampleRE matches a sample line: name, labels, value.
var sampleRE = regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// metricSum sums the samples of one metric whose labels contain every
// one of labels (`change="gained"`, say).
func metricSum(page, name string, labels ...string) float64 {
	sum := 0.0
	for _, m := range sampleRE.FindAllStringSubmatch(page, -1) {
		if m[1] != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(m[2], l)
		}
		if v, err := strconv.ParseFloat(m[3], 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}
