package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/s3"
)

// Backends are the metastore and the zones a process runs on.
type Backends struct {
	Store metastore.Store
	Zones []objstore.Bucket // zone order; named zone-a, zone-b, …
	// Dir is the data directory: the filesystem zones', the embedded
	// etcd's and the run's credentials ("" when there is none).
	Dir string
	// local is the embedded etcd (nil with -etcd or -ephemeral).
	local   *localServer
	closers []func() // run in reverse order by close
}

func (b *Backends) Close() {
	if b == nil {
		return
	}
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
}

// MaxZones bounds K: zone-a to zone-z.
const MaxZones = 26

func ZoneName(i int) string { return fmt.Sprintf("zone-%c", 'a'+i) }

// checkStores refuses S3 flags that do not name one distinct store per
// zone: an endpoint that is not an http or https URL, an empty bucket
// name, more buckets than zone names, or one bucket on one endpoint given
// for two zones, which would count one physical copy as two. Two names of
// one server (localhost and 127.0.0.1) look distinct here: the start-up
// check of the zones (objstore.VerifyZones) catches those.
func checkStores(endpoints, buckets []string) error {
	servers := make([]string, len(endpoints))
	for i, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Refuse("s3-endpoint", strings.Join(endpoints, ","), "http or https URLs, comma-separated; %q is not one", e)
		}
		// Scheme and host are case-insensitive; a trailing slash changes
		// nothing.
		servers[i] = strings.ToLower(u.Scheme+"://"+u.Host) + strings.TrimRight(u.Path, "/")
	}
	flag := strings.Join(buckets, ",")
	if len(buckets) > MaxZones {
		return Refuse("s3-buckets", flag, "1 to %d buckets, one per zone", MaxZones)
	}
	zoneOf := make(map[string]int, len(buckets))
	for i, name := range buckets {
		if name == "" {
			return Refuse("s3-buckets", flag, "one bucket name per zone, none empty")
		}
		server, where := servers[0], fmt.Sprintf("%q", name)
		if len(servers) > 1 {
			server, where = servers[i], fmt.Sprintf("%q at %s", name, endpoints[i])
		}
		if j, dup := zoneOf[server+" "+name]; dup {
			return Refuse("s3-buckets", flag, "one distinct store per zone: bucket %s is given for %s and %s, which would count one physical copy as two",
				where, ZoneName(j), ZoneName(i))
		}
		zoneOf[server+" "+name] = i
	}
	return nil
}

// OpenBackends opens the store and the zones the flags name: by default
// an embedded etcd and K filesystem zones in the data directory (-dir);
// etcd and S3 when their flags are given; with -ephemeral (or settings
// that name neither etcd nor a directory, as the demonstration's) an
// in-memory metastore and zones in a temporary directory. The zones are
// verified (create-only, also under concurrent creates, K distinct
// stores) before anything is written to them.
func OpenBackends(ctx context.Context, cfg *Settings, log *slog.Logger) (_ *Backends, err error) {
	be := &Backends{}
	defer func() {
		if err != nil {
			be.Close()
		}
	}()
	if err := be.openDir(cfg, log); err != nil {
		return nil, err
	}
	switch {
	case cfg.Etcd == "" && cfg.local.Listen != "":
		if be.local, err = startLocalEtcd(ctx, cfg.local.Listen, be.Dir, log); err != nil {
			return nil, err
		}
		be.closers = append(be.closers, func() { be.local.stop(false) })
		if be.Store, err = etcdstore.New(be.local.cli, etcdstore.Options{Root: cfg.EtcdRoot, Logger: log}); err != nil {
			return nil, err
		}
		log.Info("metastore: embedded etcd", "data", filepath.Join(be.Dir, "etcd"), "endpoint", be.local.Endpoint, "root", cfg.EtcdRoot,
			"quota_bytes", localEtcdQuota, "history", localEtcdRetention)
	case cfg.Etcd == "":
		be.Store = memstore.New(memstore.Options{})
		log.Warn("in-memory metastore: everything is gone at exit")
	default:
		cli, err := newEtcdClient(ctx, cfg)
		if err != nil {
			return nil, err
		}
		be.closers = append(be.closers, func() { _ = cli.Close() })
		st, err := etcdstore.New(cli, etcdstore.Options{Root: cfg.EtcdRoot, Logger: log})
		if err != nil {
			return nil, err
		}
		// Fail early and clearly when nobody answers.
		if _, err := st.Get(ctx, "ping"); err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return nil, fmt.Errorf("etcd at %s: %w", cfg.Etcd, err)
		}
		be.Store = st
		log.Info("metastore: etcd", "endpoints", cfg.Etcd, "root", cfg.EtcdRoot)
	}
	if cfg.Role == roleController {
		return be, nil // the controller keeps nothing in the zones
	}
	switch {
	case cfg.azure.given():
		zones, closeIdle, err := cfg.azure.open(ctx, cfg.Window, log)
		if err != nil {
			return nil, err
		}
		be.closers = append(be.closers, closeIdle)
		be.Zones = zones
	case len(cfg.S3Endpoints) == 0:
		dir := be.Dir
		for i := range cfg.K {
			b, err := fs.New(filepath.Join(dir, ZoneName(i)), cfg.zoneOptions(ZoneName(i)))
			if err != nil {
				return nil, err
			}
			be.closers = append(be.closers, func() { _ = b.Close() })
			be.Zones = append(be.Zones, b)
		}
		log.Info("zones: filesystem", "k", cfg.K, "dir", dir)
	default:
		// Idle connections per host for every request in flight to it: the
		// window times the buckets an endpoint serves.
		perHost := cfg.Window
		if len(cfg.S3Endpoints) == 1 {
			perHost *= len(cfg.S3Buckets)
		}
		hc := s3.NewHTTPClient(perHost)
		be.closers = append(be.closers, hc.CloseIdleConnections)
		clients := map[string]*awss3.Client{}
		for i, name := range cfg.S3Buckets {
			endpoint := cfg.S3Endpoints[0]
			if len(cfg.S3Endpoints) > 1 {
				endpoint = cfg.S3Endpoints[i]
			}
			client := clients[endpoint]
			if client == nil {
				client, err = s3.NewClient(ctx, s3.ClientConfig{Endpoint: endpoint, Region: cfg.S3Region,
					AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey, PathStyle: true, HTTPClient: hc})
				if err != nil {
					return nil, err
				}
				clients[endpoint] = client
			}
			b, err := s3.New(client, name, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: ZoneName(i)}})
			if err != nil {
				return nil, err
			}
			be.Zones = append(be.Zones, b)
			log.Info("zone: S3", "zone", ZoneName(i), "endpoint", endpoint, "bucket", name)
		}
	}
	// One check of the zone set, before anything is written to it: each
	// zone create-only, one request at a time and under concurrent
	// creates, and the zones as many physical stores as zones.
	if err := objstore.VerifyZones(ctx, be.Zones, objstore.VerifyOptions{}); err != nil {
		return nil, fmt.Errorf("zones: %w", err)
	}
	if cfg.latency > 0 {
		// After the verification: the model slows the broker's work, not
		// its start.
		for i, z := range be.Zones {
			be.Zones[i] = latency.Wrap(z, latency.Options{Default: latency.Fixed(cfg.latency), Seed: uint64(i)})
		}
		log.Warn("injected latency before every zone request (-latency)", "latency", cfg.latency)
	}
	return be, nil
}
