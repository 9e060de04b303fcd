package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimits bound the connections one listener keeps open: in all, and
// from one client address. A connection past either bound is closed as
// soon as it is accepted, so that a flood of connections, authenticated
// or not, costs the process at most Total file descriptors and leaves
// the rest to its zones and its metastore.
type connLimits struct {
	Total   int
	PerAddr int
}

// Defaults of the API's connection bounds, and the bounds of the metrics
// listener (a few scrapers).
const (
	defaultMaxConns        = 1024
	defaultMaxConnsPerAddr = 64
)

var metricsConnLimits = connLimits{Total: 16, PerAddr: 4}

// serverTimeouts time an HTTP server's connections: a client gets
// ReadHeader to send a request's headers (a connection that sends none is
// closed after it), and a keep-alive connection is closed after Idle
// without a request. Request bounds a request's body and its answer.
type serverTimeouts struct {
	ReadHeader, Idle, Request time.Duration
}

// The API's timeouts: short, so that an idle connection does not hold a
// descriptor for long; a produce waits at most produceTimeout.
var apiTimeouts = serverTimeouts{ReadHeader: 5 * time.Second, Idle: 5 * time.Second, Request: time.Minute}

// connCounter counts a listener's connections: those open, and those
// refused by reason ("total", "per_address"). Either may be nil.
type connCounter struct {
	open    func(delta float64)
	refused func(reason string)
}

// limitListener is a net.Listener whose Accept closes the connections
// past its connLimits. Its connections release their place on Close.
type limitListener struct {
	net.Listener
	lim connLimits
	cnt connCounter

	mu     sync.Mutex
	total  int
	byAddr map[string]int
}

func newLimitListener(ln net.Listener, lim connLimits, cnt connCounter) *limitListener {
	return &limitListener{Listener: ln, lim: lim, cnt: cnt, byAddr: map[string]int{}}
}

// Accept returns the next connection within the bounds.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c)
		if reason := l.take(addr); reason != "" {
			_ = c.Close()
			if l.cnt.refused != nil {
				l.cnt.refused(reason)
			}
			continue
		}
		if l.cnt.open != nil {
			l.cnt.open(1)
		}
		return &limitedConn{Conn: c, release: func() { l.release(addr) }}, nil
	}
}

// take takes a place for a connection from addr, or says why there is
// none.
func (l *limitListener) take(addr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.lim.Total:
		return "total"
	case l.byAddr[addr] >= l.lim.PerAddr:
		return "per_address"
	}
	l.total++
	l.byAddr[addr]++
	return ""
}

func (l *limitListener) release(addr string) {
	l.mu.Lock()
	l.total--
	if l.byAddr[addr]--; l.byAddr[addr] == 0 {
		delete(l.byAddr, addr)
	}
	l.mu.Unlock()
	if l.cnt.open != nil {
		l.cnt.open(-1)
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

// limitedConn gives its place back once, on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// newHTTPServer is an HTTP server of h with the timeouts to, over TLS when
// tc is not nil; its own errors (a refused handshake, say) go to log as
// warnings.
func newHTTPServer(h http.Handler, tc *tls.Config, to serverTimeouts, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: to.ReadHeader, IdleTimeout: to.Idle,
		ReadTimeout: to.Request, WriteTimeout: to.Request, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// listenLimited listens on addr, within lim.
func listenLimited(addr string, lim connLimits, cnt connCounter) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return newLimitListener(ln, lim, cnt), nil
}
