package main

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

// backends are the metastore and the zones a process runs on.
type backends struct {
	store metastore.Store
	zones []objstore.Bucket // zone order; named zone-a, zone-b, …
	// dir is the data directory: the filesystem zones', the embedded
	// etcd's and the run's credentials ("" when there is none).
	dir string
	// local is the embedded etcd (nil with -etcd or -ephemeral).
	local   *localServer
	closers []func() // run in reverse order by close
}

func (b *backends) close() {
	if b == nil {
		return
	}
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
}

// maxZones bounds K: zone-a to zone-z.
const maxZones = 26

func zoneName(i int) string { return fmt.Sprintf("zone-%c", 'a'+i) }

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
			return refuse("s3-endpoint", strings.Join(endpoints, ","), "http or https URLs, comma-separated; %q is not one", e)
		}
		// Scheme and host are case-insensitive; a trailing slash changes
		// nothing.
		servers[i] = strings.ToLower(u.Scheme+"://"+u.Host) + strings.TrimRight(u.Path, "/")
	}
	flag := strings.Join(buckets, ",")
	if len(buckets) > maxZones {
		return refuse("s3-buckets", flag, "1 to %d buckets, one per zone", maxZones)
	}
	zoneOf := make(map[string]int, len(buckets))
	for i, name := range buckets {
		if name == "" {
			return refuse("s3-buckets", flag, "one bucket name per zone, none empty")
		}
		server, where := servers[0], fmt.Sprintf("%q", name)
		if len(servers) > 1 {
			server, where = servers[i], fmt.Sprintf("%q at %s", name, endpoints[i])
		}
		if j, dup := zoneOf[server+" "+name]; dup {
			return refuse("s3-buckets", flag, "one distinct store per zone: bucket %s is given for %s and %s, which would count one physical copy as two",
				where, zoneName(j), zoneName(i))
		}
		zoneOf[server+" "+name] = i
	}
	return nil
}

// openBackends opens the store and the zones the flags name: by default
// an embedded etcd and K filesystem zones in the data directory (-dir);
// etcd and S3 when their flags are given; with -ephemeral (or settings
// that name neither etcd nor a directory, as the demonstration's) an
// in-memory metastore and zones in a temporary directory. The zones are
// verified (create-only, also under concurrent creates, K distinct
// stores) before anything is written to them.
func openBackends(ctx context.Context, cfg *settings, log *slog.Logger) (_ *backends, err error) {
	be := &backends{}
	defer func() {
		if err != nil {
			be.close()
		}
	}()
	if err := be.openDir(cfg, log); err != nil {
		return nil, err
	}
	switch {
	case cfg.etcd == "" && cfg.local.Listen != "":
		if be.local, err = startLocalEtcd(ctx, cfg.local.Listen, be.dir, log); err != nil {
			return nil, err
		}
		be.closers = append(be.closers, func() { be.local.stop(false) })
		if be.store, err = etcdstore.New(be.local.cli, etcdstore.Options{Root: cfg.etcdRoot, Logger: log}); err != nil {
			return nil, err
		}
		log.Info("metastore: embedded etcd", "data", filepath.Join(be.dir, "etcd"), "endpoint", be.local.Endpoint, "root", cfg.etcdRoot,
			"quota_bytes", localEtcdQuota, "history", localEtcdRetention)
	case cfg.etcd == "":
		be.store = memstore.New(memstore.Options{})
		log.Warn("in-memory metastore: everything is gone at exit")
	default:
		cli, err := newEtcdClient(cfg)
		if err != nil {
			return nil, err
		}
		be.closers = append(be.closers, func() { _ = cli.Close() })
		st, err := etcdstore.New(cli, etcdstore.Options{Root: cfg.etcdRoot, Logger: log})
		if err != nil {
			return nil, err
		}
		// Fail early and clearly when nobody answers.
		if _, err := st.Get(ctx, "ping"); err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return nil, fmt.Errorf("etcd at %s: %w", cfg.etcd, err)
		}
		be.store = st
		log.Info("metastore: etcd", "endpoints", cfg.etcd, "root", cfg.etcdRoot)
	}
	if cfg.role == roleController {
		return be, nil // the controller keeps nothing in the zones
	}
	switch {
	case cfg.azure.given():
		zones, closeIdle, err := cfg.azure.open(ctx, cfg.window, log)
		if err != nil {
			return nil, err
		}
		be.closers = append(be.closers, closeIdle)
		be.zones = zones
	case len(cfg.s3Endpoints) == 0:
		dir := be.dir
		for i := range cfg.k {
			b, err := fs.New(filepath.Join(dir, zoneName(i)), cfg.zoneOptions(zoneName(i)))
			if err != nil {
				return nil, err
			}
			be.closers = append(be.closers, func() { _ = b.Close() })
			be.zones = append(be.zones, b)
		}
		log.Info("zones: filesystem", "k", cfg.k, "dir", dir)
	default:
		// Idle connections per host for every request in flight to it: the
		// window times the buckets an endpoint serves.
		perHost := cfg.window
		if len(cfg.s3Endpoints) == 1 {
			perHost *= len(cfg.s3Buckets)
		}
		hc := s3.NewHTTPClient(perHost)
		be.closers = append(be.closers, hc.CloseIdleConnections)
		clients := map[string]*awss3.Client{}
		for i, name := range cfg.s3Buckets {
			endpoint := cfg.s3Endpoints[0]
			if len(cfg.s3Endpoints) > 1 {
				endpoint = cfg.s3Endpoints[i]
			}
			client := clients[endpoint]
			if client == nil {
				client, err = s3.NewClient(ctx, s3.ClientConfig{Endpoint: endpoint, Region: cfg.s3Region,
					AccessKey: cfg.s3AccessKey, SecretKey: cfg.s3SecretKey, PathStyle: true, HTTPClient: hc})
				if err != nil {
					return nil, err
				}
				clients[endpoint] = client
			}
			b, err := s3.New(client, name, s3.Options{Name: zoneName(i)})
			if err != nil {
				return nil, err
			}
			be.zones = append(be.zones, b)
			log.Info("zone: S3", "zone", zoneName(i), "endpoint", endpoint, "bucket", name)
		}
	}
	// One check of the zone set, before anything is written to it: each
	// zone create-only, one request at a time and under concurrent
	// creates, and the zones as many physical stores as zones.
	if err := objstore.VerifyZones(ctx, be.zones, objstore.VerifyOptions{}); err != nil {
		return nil, fmt.Errorf("zones: %w", err)
	}
	if cfg.latency > 0 {
		// After the verification: the model slows the broker's work, not
		// its start.
		for i, z := range be.zones {
			be.zones[i] = latency.Wrap(z, latency.Options{Default: latency.Fixed(cfg.latency), Seed: uint64(i)})
		}
		log.Warn("injected latency before every zone request (-latency)", "latency", cfg.latency)
	}
	return be, nil
}
