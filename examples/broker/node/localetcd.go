package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/etcdlocal"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
)

// localEtcd is the metastore of a broker given no -etcd: an etcd server
// embedded in the process (internal/etcdlocal), whose data
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
	srv *etcdlocal.Server
	cli *clientv3.Client
	// Endpoint is its client address, host:port as -etcd takes it.
	Endpoint string
}

// startLocalEtcd starts the embedded etcd with its data in dir/etcd and
// returns once it serves, with a client of it.
func startLocalEtcd(ctx context.Context, listen, dir string, log *slog.Logger) (_ *localServer, err error) {
	srv, err := etcdlocal.Start(ctx, etcdlocal.Config{
		Name: "broker", Dir: filepath.Join(dir, "etcd"), ClientAddr: listen,
		// The data directories of earlier runs were made with this token.
		ClusterToken: "cutline-broker",
		QuotaBytes:   localEtcdQuota, CompactionRetention: localEtcdRetention,
		// A database file that compaction emptied shrinks on the next
		// start; snapshots bound etcd's write-ahead log in memory.
		DefragThresholdMB: 64, SnapshotCount: 10000,
		// etcd would wait for the lock of its log, silently: a second
		// broker on the directory is refused at once instead.
		LockFile: filepath.Join(dir, "etcd.lock"), Log: log, ReadyTimeout: time.Minute,
	})
	switch {
	case errors.Is(err, etcdlocal.ErrInUse):
		return nil, fmt.Errorf("the data directory %s is in use by another broker: its embedded etcd runs (%w)", dir, err)
	case err != nil:
		return nil, fmt.Errorf("the embedded etcd (-etcd-listen %s): %w", listen, err)
	}
	s := &localServer{srv: srv, Endpoint: listen}
	defer func() {
		if err != nil {
			s.stop(true)
		}
	}()
	if s.cli, err = etcdstore.Dial(ctx, etcdstore.DialConfig{Endpoints: []string{srv.Endpoint()}}); err != nil {
		return nil, err
	}
	// A NOSPACE alarm of an earlier run: compaction and the start-up
	// defragmentation freed what they could, and etcd raises it again at
	// its next write if that was not enough.
	switch n, err := srv.DisarmAlarms(ctx); {
	case err != nil:
		log.Warn("the embedded etcd's alarms stay", "err", err)
	case n > 0:
		log.Warn("the embedded etcd's database was full (NOSPACE alarm); disarmed after its compaction and defragmentation",
			"alarms", n, "quota_bytes", localEtcdQuota)
	}
	return s, nil
}

// stop closes the client and stops the server: gracefully, or (hard) as
// a crash would leave it. Only its first call stops the server.
func (s *localServer) stop(hard bool) {
	if s.cli != nil {
		_ = s.cli.Close()
	}
	if hard {
		s.srv.Crash()
	} else {
		s.srv.Stop()
	}
}

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
