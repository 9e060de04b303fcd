package etcdtest

import (
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
)

// ClosedURL returns the URL of a loopback port on which nothing listens: a
// client's dial is refused at once.
func ClosedURL(t testing.TB) string {
	t.Helper()
	return "http://" + freeAddr(t)
}

// SilentURL starts a loopback listener that accepts connections and never
// sends a byte, like a hung host: a gRPC client connects but never gets
// the server's preface, so its connection stays CONNECTING. It is closed,
// with its connections, when the test ends.
func SilentURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		unavailable(t, err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// NotEtcdURL starts a gRPC server on loopback that serves no service at
// all, as some other gRPC server at a misconfigured endpoint would: every
// etcd call gets the status Unimplemented. It stops when the test ends.
func NotEtcdURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		unavailable(t, err)
	}
	srv := grpc.NewServer()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return "http://" + l.Addr().String()
}
