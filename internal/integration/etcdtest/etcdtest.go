package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cutline/cutline/internal/etcdlocal"
	"github.com/cutline/cutline/internal/testlog"
)

// ReadyTimeout bounds how long a member may take to become ready.
const ReadyTimeout = 30 * time.Second

// Cluster is a set of embedded etcd members started by StartCluster.
type Cluster struct {
	t       testing.TB
	members []*Member
}

// Member is one embedded etcd server. Its ports and data directory survive
// Stop, so Restart brings the same member back.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string

	t       testing.TB
	dir     string
	initial string
	logs    *testlog.Buffer

	mu  sync.Mutex
	srv *etcdlocal.Server
}

// Start runs a single-member etcd and returns a client for it. Both are
// closed when the test ends.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	return StartCluster(t, 1).Client(t)
}

// StartCluster runs an n-member etcd cluster in this process, on free
// loopback ports, with data in temporary directories, and waits until every
// member is ready. Everything is stopped when the test ends. When a member
// cannot be started the test fails if CI=true and is skipped otherwise.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var initial []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: "http://" + freeAddr(t),
			PeerURL:   "http://" + freeAddr(t),
			t:         t,
			dir:       t.TempDir(),
			logs:      &testlog.Buffer{},
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.members = append(c.members, m)
	}
	t.Cleanup(c.stopAll)
	errs := make(chan error, n)
	for _, m := range c.members {
		m.initial = strings.Join(initial, ",")
		go func() { errs <- m.start(true) }()
	}
	for range n {
		if err := <-errs; err != nil {
			unavailable(t, fmt.Errorf("start etcd: %w", err))
		}
	}
	return c
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		unavailable(t, fmt.Errorf("find a free port: %w", err))
	}
	defer l.Close()
	return l.Addr().String()
}

func (m *Member) start(fresh bool) error {
	cu, err := url.Parse(m.ClientURL)
	if err != nil {
		return err
	}
	pu, err := url.Parse(m.PeerURL)
	if err != nil {
		return err
	}
	srv, err := etcdlocal.Start(context.Background(), etcdlocal.Config{
		Name:           m.Name,
		Dir:            m.dir,
		ClientAddr:     cu.Host,
		PeerAddr:       pu.Host,
		InitialCluster: m.initial,
		ClusterToken:   "cutline-etcdtest",
		Join:           !fresh,
		NoFsync:        true, // test data; a stopped member still restarts from its WAL
		Zap: zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
			zapcore.AddSync(m.logs), zapcore.WarnLevel)),
		ReadyTimeout: ReadyTimeout,
	})
	if err != nil {
		return fmt.Errorf("member %s: %w; log:\n%s", m.Name, err, m.logs.String())
	}
	m.mu.Lock()
	m.srv = srv
	m.mu.Unlock()
	return nil
}

func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(func() { m.close(false) })
	}
	wg.Wait()
	if c.t.Failed() {
		for _, m := range c.members {
			if s := m.logs.String(); s != "" {
				c.t.Logf("etcd member %s warnings:\n%s", m.Name, s)
			}
		}
	}
}

// close stops the member; crash skips the leadership transfer that a
// graceful stop of a leader performs.
func (m *Member) close(crash bool) {
	m.mu.Lock()
	srv := m.srv
	m.srv = nil
	m.mu.Unlock()
	if srv == nil {
		return
	}
	if crash {
		srv.Crash()
	} else {
		srv.Stop()
	}
}

// Stop stops the member abruptly, as a crash would (no leadership transfer).
// Its data stays for Restart.
func (m *Member) Stop() { m.close(true) }

// Running reports whether the member is started.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srv != nil
}

// Restart starts a stopped member again on the same ports and data.
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	if m.Running() {
		t.Fatalf("member %s is running", m.Name)
	}
	if err := m.start(false); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

// Server returns the running embedded server, or nil.
func (m *Member) Server() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srv == nil {
		return nil
	}
	return m.srv.Etcd()
}

// Members returns the members in start order.
func (c *Cluster) Members() []*Member { return c.members }

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.ClientURL)
	}
	return out
}

// Client returns a client of every member, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, c.Endpoints()...)
}

// NewClient returns a quiet client of the endpoints, closed when the test
// ends.
func NewClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Leader waits until the running members agree on a leader that is one of
// them and returns it. It fails the test after timeout.
func (c *Cluster) Leader(t testing.TB, timeout time.Duration) *Member {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		// Take the change notifications before looking, so that a change
		// between the look and the wait is not missed.
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)}}
		var running []*Member
		for _, m := range c.members {
			if e := m.Server(); e != nil {
				running = append(running, m)
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(e.Server.LeaderChangedNotify())})
			}
		}
		if l := agreedLeader(running); l != nil {
			return l
		}
		if chosen, _, _ := reflect.Select(cases); chosen == 0 {
			t.Fatalf("no leader among the running members after %v", timeout)
		}
	}
}

func agreedLeader(running []*Member) *Member {
	if len(running) == 0 {
		return nil
	}
	var lead uint64
	var leader *Member
	for _, m := range running {
		e := m.Server()
		if e == nil {
			return nil
		}
		l := e.Server.Lead()
		if l == 0 || (lead != 0 && l != lead) {
			return nil
		}
		lead = l
		if uint64(e.Server.MemberID()) == l {
			leader = m
		}
	}
	return leader
}
