// Package connlimit keeps an HTTP server's connections within bounds: in
// all and from one client address, evicting silent connections first,
// with timeouts and an error log of bounded rate. A flood of connections
// then costs a process a known number of file descriptors.
package connlimit

import (
	"container/list"
	"crypto/tls"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cutline/cutline/clock"
)

// Limits bound the connections one listener keeps open: in all, and
// from one client address. A connection past the bound of its address is
// closed as soon as it is accepted. Past the bound in all, the oldest
// connection that has not sent a byte of a request yet is closed to make
// room (a flood of silent connections cannot keep a client out), or, when
// there is none, the new one. So a flood of connections, authenticated or
// not, costs the process at most Total file descriptors and leaves the
// rest to its zones and its metastore.
type Limits struct {
	Total   int
	PerAddr int
}

// Timeouts time an HTTP server's connections: a client gets
// ReadHeader to send a request's headers (a connection that sends none is
// closed after it), and a keep-alive connection is closed after Idle
// without a request. Request bounds a request's body and its answer.
type Timeouts struct {
	ReadHeader, Idle, Request time.Duration
}

// Counter counts a listener's connections: those open, and those
// closed to keep the bounds, by reason ("total", "per_address": refused
// on accept; "evicted": closed silent to make room). Either may be nil.
type Counter struct {
	Open   func(delta float64)
	Closed func(reason string)
}

// listener is a net.Listener whose Accept keeps its connections
// within its Limits. Its connections release their place on Close.
// The HTTP server that serves it reports their states to ConnState.
type listener struct {
	net.Listener
	lim Limits
	cnt Counter

	mu     sync.Mutex
	total  int
	byAddr map[string]int
	silent *list.List // of *conn that have sent nothing yet, oldest first
}

func newListener(ln net.Listener, lim Limits, cnt Counter) *listener {
	return &listener{Listener: ln, lim: lim, cnt: cnt, byAddr: map[string]int{}, silent: list.New()}
}

// Accept returns the next connection within the bounds.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &conn{Conn: c, l: l, addr: clientAddr(c)}
		reason, evict := l.take(lc)
		if evict != nil {
			_ = evict.Close()
			l.count("evicted")
		}
		if reason != "" {
			_ = c.Close()
			l.count(reason)
			continue
		}
		if l.cnt.Open != nil {
			l.cnt.Open(1)
		}
		return lc, nil
	}
}

func (l *listener) count(reason string) {
	if l.cnt.Closed != nil {
		l.cnt.Closed(reason)
	}
}

// take takes a place for c, making room by evicting the oldest silent
// connection when the listener is full, or says why there is none.
func (l *listener) take(c *conn) (reason string, evict *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[c.addr] >= l.lim.PerAddr {
		return "per_address", nil
	}
	if l.total >= l.lim.Total {
		front := l.silent.Front()
		if front == nil {
			return "total", nil
		}
		// Its place is given to c now; its Close gives back nothing.
		evict = l.silent.Remove(front).(*conn)
		evict.silent, evict.released = nil, true
		l.freeLocked(evict.addr)
	}
	l.total++
	l.byAddr[c.addr]++
	c.silent = l.silent.PushBack(c)
	return "", evict
}

// freeLocked gives back the place of a connection from addr.
func (l *listener) freeLocked(addr string) {
	l.total--
	if l.byAddr[addr]--; l.byAddr[addr] == 0 {
		delete(l.byAddr, addr)
	}
	if l.cnt.Open != nil {
		l.cnt.Open(-1)
	}
}

// release gives back c's place, once.
func (l *listener) release(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	if c.silent != nil {
		l.silent.Remove(c.silent)
		c.silent = nil
	}
	l.freeLocked(c.addr)
}

// ConnState is the http.Server's ConnState: a connection that has begun a
// request is no longer silent.
func (l *listener) ConnState(c net.Conn, st http.ConnState) {
	if st != http.StateActive {
		return
	}
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn() // a TLS connection over it
	}
	lc, ok := c.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.silent != nil {
		l.silent.Remove(lc.silent)
		lc.silent = nil
	}
}

// clientAddr is the address a connection is counted under: its remote
// IP, without the port.
func clientAddr(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// conn gives its place back once, on its first Close. silent and
// released are guarded by its listener's mu.
type conn struct {
	net.Conn
	l        *listener
	addr     string
	silent   *list.Element // in l.silent while it has sent nothing
	released bool
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// NewServer is an HTTP server of h with the timeouts to, over TLS when
// tc is not nil; its own errors (a refused handshake, say) go to log as
// warnings, LogLines a second at most.
func NewServer(h http.Handler, tc *tls.Config, to Timeouts, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: to.ReadHeader, IdleTimeout: to.Idle,
		ReadTimeout: to.Request, WriteTimeout: to.Request, ErrorLog: stdlog.New(&serverLog{log: log, clk: clock.Real()}, "", 0)}
}

// LogLines is how many of its own errors an HTTP server logs in a
// second.
const LogLines = 10

// serverLog is an HTTP server's error log. The server writes a line for
// every connection whose TLS handshake fails, so a flood of connections
// would flood the log (and the disk under it) too: it passes
// LogLines lines a second, and says how many it dropped.
type serverLog struct {
	log *slog.Logger
	clk clock.Clock

	mu      sync.Mutex
	second  time.Time // when the current second began
	lines   int       // logged in it
	dropped int       // not logged since the last report
}

func (s *serverLog) Write(p []byte) (int, error) {
	now := s.clk.Now()
	s.mu.Lock()
	dropped := 0
	if now.Sub(s.second) >= time.Second {
		dropped, s.dropped = s.dropped, 0
		s.second, s.lines = now, 0
	}
	pass := s.lines < LogLines
	if pass {
		s.lines++
	} else {
		s.dropped++
	}
	s.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("http server: errors not logged, past the rate", "dropped", dropped, "per_second", LogLines)
	}
	if pass {
		s.log.Warn(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// Listen listens on addr for srv, within lim.
func Listen(addr string, lim Limits, cnt Counter, srv *http.Server) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	l := newListener(ln, lim, cnt)
	srv.ConnState = l.ConnState
	return l, nil
}
