package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/etcdlocal"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
)

// localEtcd is the metastore of a broker given no -etcd: an etcd server
// embedded in the process (internal/etcdlocal), its data in the data
// directory next to the zones, so that a broker started again on the
// directory goes on where it stopped. -ephemeral keeps the metastore in
// memory instead, and the zones in a temporary directory.
type localEtcd struct {
	// Listen is the embedded etcd's client address on the loopback
	// (-etcd-listen), where cutline inspects it; "" when the broker runs
	// none.
	Listen    string
	Ephemeral bool
}

const (
	defaultDataDir    = "cutline-data"
	defaultEtcdListen = "127.0.0.1:2479"
	// localEtcdQuota bounds etcd's database file: past it, etcd refuses
	// writes (its NOSPACE alarm) until space is freed; older revisions
	// than localEtcdRetention are compacted, so that the index's
	// rewritten pages do not pile up.
	localEtcdQuota     = 1 << 30
	localEtcdRetention = 10 * time.Minute
)

// checkLocal refuses the data directory and embedded etcd flags that do
// not go together, makes -dir absolute (the paths the broker logs are
// pasted elsewhere), and says whether the embedded etcd runs (Listen).
func (c *Settings) checkLocal(set map[string]bool) error {
	l := &c.local
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
		if err := etcdlocal.Loopback(l.Listen); err != nil {
			return Refuse("etcd-listen", l.Listen, "a loopback address with a port, 127.0.0.1:2479 say: the embedded etcd serves this machine only (%v)", err)
		}
		if !strings.HasSuffix(c.EtcdRoot, "/") {
			return Refuse("etcd-root", c.EtcdRoot, "a key prefix ending in '/'")
		}
	}
	abs, err := filepath.Abs(c.Dir)
	if c.Dir == "" || err != nil {
		return Refuse("dir", fmt.Sprintf("%q", c.Dir), "a directory (-ephemeral runs on a temporary one)")
	}
	c.Dir = abs
	return nil
}

// localServer is a running embedded etcd and the broker's client of it.
type localServer struct {
	srv      *etcdlocal.Server
	cli      *clientv3.Client
	Endpoint string // its client address, host:port as -etcd takes it
}

// startLocalEtcd starts the embedded etcd with its data in dir/etcd and
// returns once it serves, with a client of it.
func startLocalEtcd(ctx context.Context, listen, dir string, log *slog.Logger) (*localServer, error) {
	srv, err := etcdlocal.Start(ctx, etcdlocal.Config{
		Name: "broker", Dir: filepath.Join(dir, "etcd"), ClientAddr: listen,
		ClusterToken: "cutline-broker", // that of the data directories of earlier runs
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
	if s.cli, err = etcdstore.Dial(ctx, etcdstore.DialConfig{Endpoints: []string{srv.Endpoint()}}); err != nil {
		s.stop(true)
		return nil, err
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

// openDir opens the data directory (-dir), made owner-only when new, if
// the process keeps anything there. Without one (-ephemeral, the demo)
// it is a temporary directory, removed by Close.
func (be *Backends) openDir(cfg *Settings, log *slog.Logger) error {
	switch {
	case cfg.Role == roleController:
		return nil // it keeps nothing on disk
	case cfg.Dir == "":
		dir, err := os.MkdirTemp("", "cutline-broker-")
		if err != nil {
			return err
		}
		be.closers = append(be.closers, func() { _ = os.RemoveAll(dir) })
		be.Dir = dir
		return nil
	case cfg.local.Listen == "" && (len(cfg.S3Endpoints) > 0 || len(cfg.azureURLs) > 0) && !cfg.makesCredentials():
		return nil
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	be.Dir = cfg.Dir
	log.Info("data directory: what this broker keeps on disk, and finds again when it starts on it", "dir", cfg.Dir)
	return nil
}
