package node

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// localEtcd is the metastore of a broker given no -etcd: an etcd server
// embedded in the process (go.etcd.io/etcd/server/v3/embed), whose data
// lies in the data directory next to the zones, so that a broker started
// again on the same directory goes on where it stopped, and whose client
// address on this machine's loopback lets cutline inspect it. -ephemeral
// keeps the metastore in memory instead, and the zones in a temporary
// directory: both gone at exit.
type localEtcd struct {
	// Listen is the embedded etcd's client address (-etcd-listen); ""
	// when the broker runs none (-etcd, -ephemeral, another role).
	Listen string
	// Ephemeral keeps everything in memory and in a temporary directory.
	Ephemeral bool
}

// The embedded etcd's defaults and bounds.
const (
	defaultDataDir    = "cutline-data"
	defaultEtcdListen = "127.0.0.1:2479"
	// localEtcdQuota bounds etcd's database file: past it, etcd refuses
	// writes (its NOSPACE alarm) until space is freed.
	localEtcdQuota = 1 << 30
	// localEtcdRetention is how much history the embedded etcd keeps:
	// it compacts every revision older than that (periodic compaction),
	// so that the stream index's rewritten pages do not pile up.
	localEtcdRetention = 10 * time.Minute
	// localEtcdDefrag is the free space past which etcd defragments its
	// database at start-up: a file that compaction emptied shrinks on
	// the next start.
	localEtcdDefrag = 64 // MiB
	// localEtcdSnapshots is the committed writes between etcd's
	// snapshots, which bound its write-ahead log in memory.
	localEtcdSnapshots = 10000
	localEtcdReady     = time.Minute
)

func (l *localEtcd) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.Ephemeral, "ephemeral", false, "keep the metastore in memory and the filesystem zones in a temporary directory, both gone at exit (default: an embedded etcd, and the zones, under -dir)")
	fs.StringVar(&l.Listen, "etcd-listen", defaultEtcdListen, "loopback address of the embedded etcd the broker runs without -etcd, where cutline -etcd reaches it")
}

// check refuses the data directory and embedded etcd flags that do not
// go together, makes -dir absolute (the paths the broker logs are
// pasted elsewhere), and says whether the embedded etcd runs (Listen).
func (l *localEtcd) check(c *Settings, set map[string]bool) error {
	switch {
	case l.Ephemeral && c.Etcd != "":
		return Refuse("ephemeral", true, "nothing with -etcd, whose state outlives the process")
	case l.Ephemeral && set["dir"]:
		return Refuse("dir", c.Dir, "nothing with -ephemeral, which keeps its zones in a temporary directory: zones kept without their metastore could not be read again")
	case l.Ephemeral:
		c.Dir, l.Listen = "", ""
		return nil
	case c.Role != RoleAll || c.Etcd != "":
		if set["etcd-listen"] {
			return Refuse("etcd-listen", l.Listen, "nothing with -etcd or -role %s: the broker runs no etcd of its own", c.Role)
		}
		l.Listen = ""
	default:
		if err := loopbackAddr(l.Listen); err != nil {
			return Refuse("etcd-listen", l.Listen, "a loopback address with a port, 127.0.0.1:2479 say: the embedded etcd serves this machine only (%v)", err)
		}
		if !strings.HasSuffix(c.EtcdRoot, "/") {
			return Refuse("etcd-root", c.EtcdRoot, "a key prefix ending in '/'")
		}
	}
	if c.Dir == "" {
		return Refuse("dir", `""`, "a directory (-ephemeral runs on a temporary one)")
	}
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return Refuse("dir", c.Dir, "a directory: %v", err)
	}
	c.Dir = abs
	return nil
}

// loopbackAddr checks an address of this machine's loopback, with a port.
func loopbackAddr(addr string) error {
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

// localServer is a running embedded etcd and the broker's client of it.
type localServer struct {
	e    *embed.Etcd
	cli  *clientv3.Client
	lock *fileutil.LockedFile // of the data directory's etcd, held while it runs
	// closing quiets etcd's log while it stops: its listeners' errors say
	// only that they were closed.
	closing *atomic.Bool
	once    sync.Once
	// Endpoint is its client address, as -etcd takes it.
	Endpoint string
}

// startLocalEtcd starts the embedded etcd with its data in dir/etcd and
// returns once it serves, with a client of it.
func startLocalEtcd(ctx context.Context, listen, dir string, log *slog.Logger) (_ *localServer, err error) {
	cfg := embed.NewConfig()
	cfg.Name = "broker"
	cfg.Dir = filepath.Join(dir, "etcd")
	client := url.URL{Scheme: "http", Host: listen}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	// One member, which no peer ever joins: no peer listener. Its peer
	// URL is only a name in its own membership, and stays the same from
	// run to run.
	cfg.ListenPeerUrls = nil
	cfg.AdvertisePeerUrls = []url.URL{{Scheme: "http", Host: "127.0.0.1:2480"}}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.InitialClusterToken = "cutline-broker"
	cfg.QuotaBackendBytes = localEtcdQuota
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = embed.CompactorModePeriodic, localEtcdRetention.String()
	cfg.BootstrapDefragThresholdMegabytes = localEtcdDefrag
	cfg.SnapshotCount = localEtcdSnapshots
	cfg.Logger = "zap"
	closing := &atomic.Bool{}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(&slogCore{log: log, closing: closing}))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// etcd would wait for the lock of its log, silently: a second broker
	// on the directory is refused at once instead.
	lock, err := fileutil.TryLockFile(filepath.Join(dir, "etcd.lock"), os.O_WRONLY|os.O_CREATE, 0o600)
	if errors.Is(err, fileutil.ErrLocked) {
		return nil, fmt.Errorf("the data directory %s is in use by another broker: its embedded etcd runs", dir)
	}
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("the embedded etcd (data %s, -etcd-listen %s): %w", cfg.Dir, listen, err)
	}
	s := &localServer{e: e, lock: lock, Endpoint: listen, closing: closing}
	defer func() {
		if err != nil {
			s.stop(true)
		}
	}()
	t := time.NewTimer(localEtcdReady)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return nil, fmt.Errorf("the embedded etcd: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, fmt.Errorf("the embedded etcd (data %s) was not ready after %v", cfg.Dir, localEtcdReady)
	}
	s.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	s.disarm(ctx, log)
	return s, nil
}

// disarm clears a NOSPACE alarm the database raised in an earlier run:
// compaction and the start-up defragmentation freed what they could,
// and etcd raises the alarm again at its next write if that was not
// enough.
func (s *localServer) disarm(ctx context.Context, log *slog.Logger) {
	resp, err := s.cli.AlarmList(ctx)
	if err != nil || len(resp.Alarms) == 0 {
		return
	}
	log.Warn("the embedded etcd's database was full (NOSPACE alarm); disarming it after its compaction and defragmentation",
		"quota_bytes", localEtcdQuota)
	for _, a := range resp.Alarms {
		if _, err := s.cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			log.Warn("the embedded etcd's alarm stays", "err", err)
		}
	}
}

// stop closes the client and stops the server: gracefully, or (hard) as
// a crash would leave it. Only its first call does anything.
func (s *localServer) stop(hard bool) {
	s.once.Do(func() {
		s.closing.Store(true)
		if s.cli != nil {
			_ = s.cli.Close()
		}
		if hard {
			s.e.Server.HardStop()
		}
		s.e.Close()
		_ = s.lock.Close()
	})
}

// slogCore is a zapcore.Core that passes etcd's warnings and errors to
// the process's log: etcd logs with zap, the broker with slog.
type slogCore struct {
	log     *slog.Logger
	closing *atomic.Bool
	fields  []zapcore.Field
}

// quietNotices are etcd's warnings that say nothing to this broker's
// operator: one port for gRPC and HTTP is all a loopback metastore
// needs, and nothing uses etcd's authentication (whose tokens are the
// "simple" ones) on it.
var quietNotices = []string{"Running http and grpc server on single port", "simple token is not cryptographically signed"}

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
		if strings.HasPrefix(e.Message, q) {
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
	slices.SortFunc(keys, cmp.Compare)
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

// openDir opens the data directory (-dir): the embedded etcd's data, the
// filesystem zones and the run's credentials, whichever the process
// keeps (made owner-only when new). Without one (-ephemeral, the
// demonstration) it is a temporary directory, removed by close.
func (be *Backends) openDir(cfg *Settings, log *slog.Logger) error {
	if cfg.Role == roleController {
		return nil // it keeps nothing on disk
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "cutline-broker-")
		if err != nil {
			return err
		}
		be.closers = append(be.closers, func() { _ = os.RemoveAll(dir) })
		be.Dir = dir
		return nil
	}
	fsZones := len(cfg.S3Endpoints) == 0 && !cfg.azure.given()
	if cfg.local.Listen == "" && !fsZones && !cfg.makesCredentials() {
		return nil
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	be.Dir = cfg.Dir
	log.Info("data directory: what this broker keeps on disk, and finds again when it starts on it", "dir", cfg.Dir)
	return nil
}
