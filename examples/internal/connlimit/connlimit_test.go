package connlimit

import (
	"bytes"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeConn is a connection from a client address; Close records itself.
type fakeConn struct {
	net.Conn
	addr   string
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", c.addr)
	return a
}

func (c *fakeConn) Close() error { c.closed = true; return nil }

// queue is a net.Listener that accepts the connections queued in it.
type queue struct {
	net.Listener
	conns []*fakeConn
}

func (q *queue) Accept() (net.Conn, error) {
	if len(q.conns) == 0 {
		return nil, net.ErrClosed
	}
	c := q.conns[0]
	q.conns = q.conns[1:]
	return c, nil
}

// A connection past its address's bound is refused; past the bound in
// all, the oldest silent connection is evicted, and a connection that
// sent a request is never; a closed connection frees its place.
func TestListenerBounds(t *testing.T) {
	a1 := &fakeConn{addr: "10.0.0.1:1"}
	a2 := &fakeConn{addr: "10.0.0.1:2"}
	a3 := &fakeConn{addr: "10.0.0.1:3"}
	b1 := &fakeConn{addr: "10.0.0.2:1"}
	c1 := &fakeConn{addr: "10.0.0.3:1"}
	q := &queue{conns: []*fakeConn{a1, a2, a3}}
	closed := map[string]int{}
	open := 0.0
	l := newListener(q, Limits{Total: 3, PerAddr: 2}, Counter{Open: func(d float64) { open += d }, Closed: func(r string) { closed[r]++ }})

	ca1, err := l.Accept()
	require.NoError(t, err)
	ca2, err := l.Accept()
	require.NoError(t, err)
	_, err = l.Accept() // a3 is refused, then the queue is empty
	require.ErrorIs(t, err, net.ErrClosed)
	require.True(t, a3.closed)
	require.Equal(t, map[string]int{"per_address": 1}, closed)

	// a1 sends a request: it is no longer silent.
	l.ConnState(ca1, http.StateActive)
	q.conns = []*fakeConn{b1, c1}
	_, err = l.Accept()
	require.NoError(t, err)
	_, err = l.Accept() // full: a2, the oldest silent one, makes room
	require.NoError(t, err)
	require.True(t, a2.closed)
	require.False(t, a1.closed)
	require.Equal(t, 1, closed["evicted"])
	require.NoError(t, ca2.Close()) // already evicted: frees nothing twice
	require.Equal(t, 3.0, open)

	// Full of active connections: a new one is refused.
	for l.silent.Len() > 0 {
		l.ConnState(l.silent.Front().Value.(*conn), http.StateActive)
	}
	d1 := &fakeConn{addr: "10.0.0.4:1"}
	q.conns = []*fakeConn{d1}
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	require.True(t, d1.closed)
	require.Equal(t, 1, closed["total"])

	// A closed connection frees its place.
	require.NoError(t, ca1.Close())
	e1 := &fakeConn{addr: "10.0.0.5:1"}
	q.conns = []*fakeConn{e1}
	_, err = l.Accept()
	require.NoError(t, err)
	require.False(t, e1.closed)
}

// A flood of failed handshakes does not flood the log: an HTTP server's
// own errors pass 10 a second, and the next second says how many were
// dropped.
func TestServerLogRate(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	l := stdlog.New(&serverLog{log: slog.New(slog.NewTextHandler(&buf, nil)), clk: fake}, "", 0)
	for i := range 100 {
		l.Printf("http: TLS handshake error from 127.0.0.%d:1234: EOF", i)
	}
	require.Equal(t, LogLines, strings.Count(buf.String(), "TLS handshake error"))
	fake.Advance(time.Second)
	l.Printf("http: TLS handshake error from 127.0.0.1:1234: EOF")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, LogLines+2)
	require.Contains(t, lines[LogLines], "dropped=90")
	require.Contains(t, lines[LogLines+1], "TLS handshake error from 127.0.0.1:1234")
}
