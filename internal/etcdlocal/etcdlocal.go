package etcdlocal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cutline/cutline"
)

// ErrInUse: another server holds Config.LockFile.
var ErrInUse = errors.New("etcdlocal: the data directory is in use by another server")

// DefaultReadyTimeout is Config.ReadyTimeout's default.
const DefaultReadyTimeout = time.Minute

// Config is a server to start.
type Config struct {
	// Name is the member's name; "" means "cutline".
	Name string
	// Dir holds etcd's data (required).
	Dir string
	// ClientAddr is the loopback host:port clients reach it at
	// (required, with a port).
	ClientAddr string
	// PeerAddr is the loopback host:port other members reach it at; ""
	// for a single member that listens for no peer.
	PeerAddr string
	// InitialCluster lists every member as name=http://host:port,…; ""
	// means this member alone.
	InitialCluster string
	// ClusterToken tells the cluster from others; "" means
	// "cutline-etcdlocal".
	ClusterToken string
	// Join starts a member of a cluster that exists already (etcd's
	// cluster state "existing"), as a restarted member does.
	Join bool
	// QuotaBytes bounds the database file (0: etcd's default): past it,
	// etcd refuses writes with its NOSPACE alarm. Start disarms an alarm
	// an earlier run left, once compaction and the defragmentation freed
	// what they could (logged to Log); etcd raises it again at its next
	// write if that was not enough.
	// CompactionRetention compacts the revisions older than that, every
	// so often (0: never); DefragThresholdMB defragments the database at
	// start-up when it has that much free space (0: never); SnapshotCount
	// is the committed writes between snapshots (0: etcd's default).
	QuotaBytes          int64
	CompactionRetention time.Duration
	DefragThresholdMB   uint
	SnapshotCount       uint64
	// NoFsync skips fsync: for test data only.
	NoFsync bool
	// LockFile, when set, is locked while the server runs: a second
	// Start with the same file fails with ErrInUse.
	LockFile string
	// Log receives etcd's warnings and errors; Zap, when set, takes
	// etcd's log instead. Nil both: etcd logs nothing.
	Log *slog.Logger
	Zap *zap.Logger
	// ReadyTimeout bounds the wait for the server to serve; 0 means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// ClientTLS, when set, makes the server serve its clients over TLS
	// only, at https://ClientAddr; nil: plain text, at http://.
	ClientTLS *TLSFiles
}

// TLSFiles are the PEM files of a TLS listener, and how it checks its
// clients.
type TLSFiles struct {
	// CertFile and KeyFile are the server's certificate and its key
	// (required). With a TrustedCAFile the certificate must be good for
	// client authentication too: etcd's HTTP gateway reaches its own
	// listener with it.
	CertFile, KeyFile string
	// TrustedCAFile, when set, holds the CA certificates a client's
	// certificate must be of: the server refuses a client without one.
	TrustedCAFile string
	// ClientCertAuth makes etcd's authentication, when it is on, take
	// the common name of a client's certificate as the user of a request
	// that carries no password token. It needs TrustedCAFile.
	ClientCertAuth bool
}

// peerPlaceholder is the peer URL a single member without a peer
// listener advertises: only a name in its own membership, the same from
// run to run.
const peerPlaceholder = "http://127.0.0.1:2480"

func (c Config) check() error {
	switch {
	case c.Dir == "":
		return invalid("Dir", nil, "required", nil)
	case c.PeerAddr == "" && c.InitialCluster != "":
		return invalid("InitialCluster", c.InitialCluster, "needs PeerAddr", nil)
	}
	if err := Loopback(c.ClientAddr); err != nil {
		return invalid("ClientAddr", fmt.Sprintf("%q", c.ClientAddr), "not a loopback address with a port", err)
	}
	if c.PeerAddr != "" {
		if err := Loopback(c.PeerAddr); err != nil {
			return invalid("PeerAddr", fmt.Sprintf("%q", c.PeerAddr), "not a loopback address with a port", err)
		}
	}
	if t := c.ClientTLS; t != nil {
		switch {
		case t.CertFile == "":
			return invalid("ClientTLS.CertFile", nil, "required", nil)
		case t.KeyFile == "":
			return invalid("ClientTLS.KeyFile", nil, "required", nil)
		case t.ClientCertAuth && t.TrustedCAFile == "":
			return invalid("ClientTLS.TrustedCAFile", nil, "required with ClientCertAuth", nil)
		}
		for _, f := range []struct{ field, path string }{
			{"ClientTLS.CertFile", t.CertFile}, {"ClientTLS.KeyFile", t.KeyFile}, {"ClientTLS.TrustedCAFile", t.TrustedCAFile},
		} {
			if f.path == "" {
				continue
			}
			if _, err := os.Stat(f.path); err != nil {
				return invalid(f.field, f.path, "no such file", err)
			}
		}
	}
	return nil
}

// invalid is a refused Config field: a *cutline.ConfigError.
func invalid(field string, value any, reason string, err error) error {
	return fmt.Errorf("etcdlocal: %w", &cutline.ConfigError{Field: field, Value: value, Reason: reason, Err: err})
}

// Loopback checks an address of this machine's loopback, with a port:
// what ClientAddr and PeerAddr must be.
func Loopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil || !ip.IsLoopback():
		return fmt.Errorf("%q is not a loopback IP address", host)
	case port == "" || port == "0":
		return errors.New("a port is required")
	}
	_, err = net.LookupPort("tcp", port)
	return err
}

// Server is a running embedded etcd.
type Server struct {
	e        *embed.Etcd
	lock     *fileutil.LockedFile
	closing  *atomic.Bool
	once     sync.Once
	endpoint string
}

// Start starts the server and returns once it serves. ctx bounds the
// wait (with ReadyTimeout).
func Start(ctx context.Context, c Config) (_ *Server, err error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = cmp.Or(c.Name, "cutline")
	cfg.Dir = c.Dir
	client := url.URL{Scheme: "http", Host: c.ClientAddr}
	if t := c.ClientTLS; t != nil {
		client.Scheme = "https"
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = t.CertFile, t.KeyFile
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = t.TrustedCAFile, t.ClientCertAuth
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	if c.PeerAddr == "" {
		cfg.ListenPeerUrls = nil
		pu, _ := url.Parse(peerPlaceholder)
		cfg.AdvertisePeerUrls = []url.URL{*pu}
	} else {
		peer := url.URL{Scheme: "http", Host: c.PeerAddr}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	}
	cfg.InitialCluster = cmp.Or(c.InitialCluster, cfg.InitialClusterFromName(cfg.Name))
	cfg.InitialClusterToken = cmp.Or(c.ClusterToken, "cutline-etcdlocal")
	cfg.ClusterState = embed.ClusterStateFlagNew
	if c.Join {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	if c.QuotaBytes > 0 {
		cfg.QuotaBackendBytes = c.QuotaBytes
	}
	if c.CompactionRetention > 0 {
		cfg.AutoCompactionMode, cfg.AutoCompactionRetention = embed.CompactorModePeriodic, c.CompactionRetention.String()
	}
	cfg.BootstrapDefragThresholdMegabytes = c.DefragThresholdMB
	if c.SnapshotCount > 0 {
		cfg.SnapshotCount = c.SnapshotCount
	}
	cfg.UnsafeNoFsync = c.NoFsync
	closing := &atomic.Bool{}
	cfg.Logger = "zap"
	switch {
	case c.Zap != nil:
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.Zap)
	case c.Log != nil:
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(&slogCore{log: c.Log, closing: closing}))
	default:
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	var lock *fileutil.LockedFile
	if c.LockFile != "" {
		lock, err = fileutil.TryLockFile(c.LockFile, os.O_WRONLY|os.O_CREATE, 0o600)
		if errors.Is(err, fileutil.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, c.LockFile)
		}
		if err != nil {
			return nil, err
		}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		if lock != nil {
			_ = lock.Close()
		}
		return nil, fmt.Errorf("etcdlocal: %s (data %s, client %s): %w", cfg.Name, c.Dir, c.ClientAddr, err)
	}
	s := &Server{e: e, lock: lock, closing: closing, endpoint: client.String()}
	defer func() {
		if err != nil {
			s.Crash()
		}
	}()
	wait := cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
		if c.QuotaBytes == 0 {
			return s, nil
		}
		n, aerr := s.DisarmAlarms(ctx)
		if c.Log != nil && (aerr != nil || n > 0) {
			c.Log.Warn("etcdlocal: the database was full (NOSPACE alarm): disarmed after compaction and defragmentation",
				"alarms", n, "quota_bytes", c.QuotaBytes, "err", aerr)
		}
		return s, nil
	case err := <-e.Err():
		return nil, fmt.Errorf("etcdlocal: %s: %w", cfg.Name, err)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, fmt.Errorf("etcdlocal: %s (data %s) not ready after %v", cfg.Name, c.Dir, wait)
	}
}

// Endpoint is the client URL: https://host:port with Config.ClientTLS,
// http://host:port without.
func (s *Server) Endpoint() string { return s.endpoint }

// Etcd is the embedded server.
func (s *Server) Etcd() *embed.Etcd { return s.e }

// DisarmAlarms clears the alarms the database raised (its NOSPACE
// alarm, in an earlier run) and returns how many it cleared: after a
// compaction and the start-up defragmentation freed what they could.
// etcd raises the alarm again at its next write if that was not enough.
func (s *Server) DisarmAlarms(ctx context.Context) (int, error) {
	cli := v3client.New(s.e.Server)
	defer cli.Close()
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range resp.Alarms {
		if _, err := cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Stop stops the server gracefully (a leader hands its leadership
// over). Only the first Stop or Crash does anything.
func (s *Server) Stop() { s.stop(false) }

// Crash stops the server as a crash would: no leadership transfer. Its
// data stays.
func (s *Server) Crash() { s.stop(true) }

func (s *Server) stop(hard bool) {
	s.once.Do(func() {
		s.closing.Store(true)
		if hard {
			s.e.Server.HardStop()
		}
		s.e.Close()
		if s.lock != nil {
			_ = s.lock.Close()
		}
	})
}

// slogCore is a zapcore.Core that passes etcd's warnings and errors to a
// slog.Logger: at debug level while the server stops.
type slogCore struct {
	log     *slog.Logger
	closing *atomic.Bool
	fields  []zapcore.Field
}

// quietNotices are etcd's warnings that say nothing to the operator of
// a loopback server: one port for gRPC and HTTP is all it needs, its
// authentication (whose tokens are the "simple" ones) is not used, and a
// member restarted on a busy machine may try to campaign before it has
// applied its own membership entries from the log, then campaigns again
// once it has (raft's "cannot campaign ... pending configuration
// changes"): nothing is wrong and nothing is to be done.
var quietNotices = []string{
	"Running http and grpc server on single port",
	"simple token is not cryptographically signed",
	"pending configuration changes to apply",
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, closing: c.closing, fields: append(slices.Clip(c.fields), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	for _, q := range quietNotices {
		if strings.Contains(e.Message, q) {
			return nil
		}
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fields...) {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		attrs = append(attrs, k, enc.Fields[k])
	}
	level := slog.LevelWarn
	switch {
	case c.closing.Load():
		level = slog.LevelDebug
	case e.Level >= zapcore.ErrorLevel:
		level = slog.LevelError
	}
	c.log.Log(context.Background(), level, "etcd: "+e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
