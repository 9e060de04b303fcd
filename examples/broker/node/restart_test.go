package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// durableSettings are the broker's defaults (an embedded etcd and the
// zones in the data directory dir, credentials made for the run) with
// the embedded etcd on etcdAddr and the API on a free port.
func durableSettings(t *testing.T, dir, etcdAddr string) *Settings {
	t.Helper()
	return testSettings(t, "-dir", dir, "-etcd-listen", etcdAddr, "-listen", "127.0.0.1:0")
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startDurable starts a process on cfg, serves its API, and returns it
// with a client that trusts the run's certificate and carries its token,
// both read from the files the log names.
func startDurable(t *testing.T, cfg *Settings, log *slog.Logger) (*process, *apiClient) {
	t.Helper()
	p, err := start(t.Context(), cfg, log)
	require.NoError(t, err)
	errc := p.serve()
	require.Contains(t, p.addrs, "api", "the API listens: %v", func() error {
		select {
		case err := <-errc:
			return err
		default:
			return nil
		}
	}())
	return p, runClient(t, p.be.Dir, p.addrs["api"].String())
}

// runClient is a client of the API at addr with the credentials made for
// the run in dir.
func runClient(t *testing.T, dir, addr string) *apiClient {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &apiClient{t: t, base: "https://" + addr, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, token: string(token)}
}

// kill stops the process as its death would: from the moment its
// metastore client closes, nothing more of it reaches etcd (no release,
// no clean-release mark, no snapshot flush, no goodbye, no resignation);
// then its goroutines end and the embedded etcd stops without a
// graceful step, its data left as it was.
func kill(p *process) {
	for _, srv := range p.servers {
		_ = srv.Close()
	}
	_ = p.be.local.cli.Close()
	n := p.node
	n.pollStop()
	<-n.pollDone
	n.StopLifecycle()
	n.mu.Lock()
	h := n.hold
	n.hold = nil
	n.mu.Unlock()
	if h != nil {
		h.abort()
	}
	n.agentStop()
	<-n.agentDone
	p.ctl.Stop()
	p.be.local.stop(true)
	p.be.Close()
}

// A broker stopped, cleanly or by a crash, and started again on the same
// data directory goes on where it stopped: every record acknowledged
// before is read back exactly once, at its offset; a producer's retry is
// still recognized as a duplicate with its first answer; new records
// follow the old ones. The credentials are made anew, at the same paths.
func TestRestartKeepsEverything(t *testing.T) {
	for _, how := range []string{"graceful", "kill"} {
		t.Run(how, func(t *testing.T) {
			dir, etcdAddr := t.TempDir(), freeAddr(t)
			var logs lockedBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			p, c := startDurable(t, durableSettings(t, dir, etcdAddr), log)
			waitHolding(t, p.node)
			sent, acks := map[string]bool{}, map[uint64]Ack{}
			const n = 20
			for seq := range uint64(n) {
				data := producedData(seq)
				code, a, e := c.produce("orders", []byte(data), "producer-1", seq)
				require.Equal(t, http.StatusOK, code, e.Error)
				require.Equal(t, seq, a.Offset)
				sent[data], acks[seq] = true, a
			}
			if how == "graceful" {
				require.NoError(t, p.shutdown(shutdownCtx(t)))
			} else {
				kill(p)
			}
			require.DirExists(t, filepath.Join(dir, "etcd", "member"))

			p, c = startDurable(t, durableSettings(t, dir, etcdAddr), log)
			t.Cleanup(func() { require.NoError(t, p.shutdown(shutdownCtx(t))) })
			waitHolding(t, p.node)
			// A retry is safe: it waits for the stream to open again.
			var again Ack
			require.Eventually(t, func() bool {
				code, a, _ := c.produce("orders", []byte(producedData(n-1)), "producer-1", n-1)
				again = a
				return code == http.StatusOK
			}, 30*time.Second, 50*time.Millisecond, "the restarted broker opens the stream")
			require.True(t, again.Duplicate, "the retry of the last record before the restart")
			again.Duplicate = false
			require.Equal(t, acks[n-1], again)
			// It found the stream where it left it, not a stream it
			// rebuilt from the zones alone: a metastore that forgot would
			// open it fresh, at offset 0.
			require.Zero(t, c.metric(`cutline_broker_gate_decisions_total{decision="fresh"}`), "opened fresh")
			if how == "graceful" {
				require.Zero(t, c.metric("cutline_broker_replayed_records_total"), "the snapshot of the release flush is loaded")
			}
			checkStream(t, c.consume("orders"), sent)
			for seq := uint64(n); seq < n+5; seq++ {
				data := producedData(seq)
				code, a, e := c.produce("orders", []byte(data), "producer-1", seq)
				require.Equal(t, http.StatusOK, code, e.Error)
				require.Equal(t, seq, a.Offset, "new records follow the old ones")
				sent[data] = true
			}
			checkStream(t, c.consume("orders"), sent)
			require.Equal(t, 2, strings.Count(logs.String(), fmt.Sprintf("ca=%s/ca.pem", dir)), "credentials made at each start, at the same path")
			require.Equal(t, 2, strings.Count(logs.String(), "msg=\"metastore: embedded etcd\""))
		})
	}
}
