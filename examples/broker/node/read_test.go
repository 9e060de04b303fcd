package node

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
)

// readGate holds the reads of the buckets it wraps while it is shut.
type readGate struct {
	shut atomic.Bool
	open chan struct{}
	held atomic.Int32
}

func newReadGate() *readGate { return &readGate{open: make(chan struct{})} }

func (g *readGate) wrap(zones []objstore.Bucket) []objstore.Bucket {
	out := make([]objstore.Bucket, len(zones))
	for i, z := range zones {
		out[i] = readGatedBucket{z, g}
	}
	return out
}

func (g *readGate) wait(ctx context.Context) error {
	if !g.shut.Load() {
		return nil
	}
	g.held.Add(1)
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type readGatedBucket struct {
	objstore.Bucket
	g *readGate
}

func (b readGatedBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := b.g.wait(ctx); err != nil {
		return nil, err
	}
	return b.Bucket.Get(ctx, key)
}

func (b readGatedBucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := b.g.wait(ctx); err != nil {
		return nil, err
	}
	return b.Bucket.GetRange(ctx, key, offset, length)
}

// filler is n bytes of c.
func filler(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

// A read's answer stops before the record that would take it past
// -max-read-bytes, holds one record at least however big, and says where
// to go on; read on from there, the whole stream comes back.
func TestReadByteBound(t *testing.T) {
	c := newCluster(t)
	c.serverOpts = ServerOptions{MaxReadBytes: 64 << 10}
	b := c.join("node-b")
	waitHolding(t, b.Node)
	var sent [][]byte
	for i := range 10 {
		data := filler(byte('a'+i), 20<<10)
		code, _, e := b.api.produce("orders", data, "", 0)
		require.Equal(t, http.StatusOK, code, e.Error)
		sent = append(sent, data)
	}
	big := filler('z', 100<<10)
	code, _, e := b.api.produce("orders", big, "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)
	sent = append(sent, big)

	// Each record of 20 KiB takes about 27 KiB of the answer in base64:
	// two fit in 64 KiB, three do not.
	var page []Consumed
	code, hdr := b.api.do(http.MethodGet, "/v1/streams/orders/records?offset=0&limit=10", nil, nil, &page)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, page, 2)
	require.Equal(t, "2", hdr.Get(HeaderContinue))
	require.Equal(t, "11", hdr.Get(HeaderNext))

	code, hdr = b.api.do(http.MethodGet, "/v1/streams/orders/records?offset=10&limit=10", nil, nil, &page)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []Consumed{{Offset: 10, Data: big}}, page, "one record past the bound on its own")
	require.Equal(t, "11", hdr.Get(HeaderContinue))

	code, hdr = b.api.do(http.MethodGet, "/v1/streams/orders/records?offset=11", nil, nil, &page)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, page)
	require.Equal(t, "11", hdr.Get(HeaderContinue))

	got := b.api.consume("orders")
	require.Len(t, got, len(sent))
	for i, r := range got {
		require.Equal(t, sent[i], r.Data, "offset %d", i)
	}
}

// At most -max-reads reads are served at once: one more is answered 503
// with Retry-After, and the reads held go on.
func TestReadConcurrencyBound(t *testing.T) {
	c := newCluster(t)
	c.serverOpts = ServerOptions{MaxReads: 2}
	g := newReadGate()
	b := c.joinWith("node-b", g.wrap(c.be.Zones))
	waitHolding(t, b.Node)
	code, _, e := b.api.produce("orders", []byte("one"), "", 0)
	require.Equal(t, http.StatusOK, code, e.Error)

	g.shut.Store(true)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			codes[i], _ = b.api.do(http.MethodGet, "/v1/streams/orders/records", nil, nil, nil)
		})
	}
	require.Eventually(t, func() bool { return len(b.srv.reads) == 2 && g.held.Load() >= 2 }, 10*time.Second, time.Millisecond,
		"two reads are held in the zones")
	var body ErrorBody
	code, hdr := b.api.do(http.MethodGet, "/v1/streams/orders/records", nil, nil, &body)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Contains(t, body.Error, "2 reads at once")

	g.shut.Store(false)
	close(g.open)
	wg.Wait()
	require.Equal(t, []int{http.StatusOK, http.StatusOK}, codes)
	require.Empty(t, b.srv.reads)
}

// BenchmarkReadMemory measures what one read of 64 records of 1 MiB
// holds in memory at its peak (peak-heap-MiB: the largest live heap seen
// during a read, over the live heap before it) and allocates (B/op), with
// an answer bound wide enough for all of them: the answer is written
// record by record, so a read holds about one record (its flight) at a
// time.
//
//	go -C examples/broker test -run '^$' -bench ReadMemory -benchtime 5x .
func BenchmarkReadMemory(b *testing.B) {
	const records, size = 64, 1 << 20
	c := newCluster(b)
	c.serverOpts = ServerOptions{MaxReadBytes: 1 << 30}
	n := c.join("node-b")
	waitHolding(b, n.Node)
	for i := range records {
		code, _, e := n.api.produce("orders", filler(byte(i), size), "", 0)
		require.Equal(b, http.StatusOK, code, e.Error)
	}
	url := n.api.base + "/v1/streams/orders/records?limit=" + strconv.Itoa(records)
	var peak float64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		base := liveHeap()
		stop, maxSeen := sampleHeap()
		b.StartTimer()
		resp, err := n.api.hc.Get(url)
		require.NoError(b, err)
		got, err := io.Copy(io.Discard, resp.Body)
		require.NoError(b, err)
		require.NoError(b, resp.Body.Close())
		require.Equal(b, http.StatusOK, resp.StatusCode)
		require.Greater(b, got, int64(records*size))
		b.StopTimer()
		stop()
		peak = max(peak, float64(maxSeen()-base)/(1<<20))
		b.StartTimer()
	}
	b.ReportMetric(peak, "peak-heap-MiB")
	b.ReportMetric(float64(records*size)/(1<<20), "read-MiB")
}

// liveHeap is the bytes of heap objects now, live or not yet swept.
func liveHeap() uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeap samples liveHeap every 100 µs until stop; maxSeen returns
// the largest value sampled.
func sampleHeap() (stop func(), maxSeen func() uint64) {
	var top atomic.Uint64
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			if v := liveHeap(); v > top.Load() {
				top.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-ended }, top.Load
}
