package etcdtest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a target address.
// Cut closes the port and every open connection, so that a client behind
// the proxy loses the server for good, as in a network partition, while
// the server keeps running for everyone else. Stall is the quieter
// partition: connections stay open but no byte gets through any more, in
// either direction, and new connections are accepted but never answered,
// so the client sees no error, only silence.
type Proxy struct {
	// URL is what a client dials instead of the target.
	URL string

	l      net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]bool
	cut   bool
	stall chan struct{} // closed by Stall
	cutc  chan struct{} // closed by Cut
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port or http://host:port). It is
// cut when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		unavailable(t, err)
	}
	if len(target) > 7 && target[:7] == "http://" {
		target = target[7:]
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), l: l, target: target, conns: map[net.Conn]bool{},
		stall: make(chan struct{}), cutc: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.Cut)
	return p
}

func (p *Proxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		if p.stalled() {
			// Hold the connection open, unanswered, until Cut.
			if !p.track(in) {
				return
			}
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Go(func() { p.pipe(in, out) })
		p.wg.Go(func() { p.pipe(out, in) })
	}
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

func (p *Proxy) stalled() bool {
	select {
	case <-p.stall:
		return true
	default:
		return false
	}
}

// pipe copies src to dst until either closes or the proxy stalls; a
// stalled pipe drops what it read, stops reading (so the sender's buffers
// fill up) and holds both connections open until Cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.stalled() {
			<-p.cutc
			break
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

// Stall stops all traffic through the proxy without closing anything (see
// Proxy). It is permanent; Cut, or the end of the test, releases the
// connections. Stalling twice is a no-op.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled() {
		close(p.stall)
	}
}

// Cut closes the proxy and every connection through it, and waits for its
// goroutines. Cutting twice is a no-op.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		return
	}
	p.cut = true
	close(p.cutc)
	p.l.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
