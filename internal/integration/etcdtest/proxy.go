package etcdtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a target address.
// Cut closes the port and every open connection, so that a client behind
// the proxy loses the server for good, as in a network partition, while
// the server keeps running for everyone else.
type Proxy struct {
	// URL is what a client dials instead of the target.
	URL string

	l      net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]bool
	cut   bool
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
	p := &Proxy{URL: "http://" + l.Addr().String(), l: l, target: target, conns: map[net.Conn]bool{}}
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

func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
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
	p.l.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
