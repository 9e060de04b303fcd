package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
	memstore "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/s3"
)

// backends are the metastore and the zones' buckets the demonstration
// runs on, with a description for the header and what to release at the
// end.
type backends struct {
	store     metastore.Store
	storeDesc string
	zones     []objstore.Bucket // zone order; names zone-a, zone-b, …
	zonesDesc string
	closers   []func() // run in reverse order by close

	// abandon is what a process's death does to its session: no
	// keep-alive and no revocation is sent any more, and the store expires
	// it one TTL later.
	abandon func(metastore.Session)
	// expire, when set, ends an abandoned session at once, as its TTL
	// running out would (the in-memory store does it on demand). Without
	// it, the TTL runs out on its own.
	expire func(metastore.Session)
}

func (b *backends) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

func zoneName(i int) string { return fmt.Sprintf("zone-%c", 'a'+i) }

// openBackends builds the store and the buckets the flags ask for: by
// default an in-memory metastore and K filesystem buckets in a temporary
// directory; etcd and S3 when their flags are given.
func openBackends(ctx context.Context, cfg *config) (_ *backends, err error) {
	be := &backends{}
	defer func() {
		if err != nil {
			be.close()
		}
	}()

	if cfg.etcd == "" {
		st := memstore.New(memstore.Options{})
		be.store = st
		be.storeDesc = "in-memory metastore (metastore/mem)"
		be.abandon, be.expire = st.Suspend, st.Expire
	} else {
		endpoints := strings.Split(cfg.etcd, ",")
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			return nil, fmt.Errorf("etcd client: %w", err)
		}
		be.closers = append(be.closers, func() { _ = cli.Close() })
		root := "/cutline-takeover/" + cfg.runID + "/"
		st, err := etcdstore.New(cli, etcdstore.Options{Root: root})
		if err != nil {
			return nil, err
		}
		// Fail early and clearly when nobody answers.
		if _, err := st.Get(ctx, "ping"); err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return nil, fmt.Errorf("etcd at %s: %w", cfg.etcd, err)
		}
		be.store = st
		be.storeDesc = fmt.Sprintf("etcd at %s (metastore/etcd), keys under %s", cfg.etcd, root)
		be.abandon = func(sess metastore.Session) {
			// Close with an ended context stops the keep-alives and sends
			// no revocation: etcd expires the lease one TTL after the last
			// keep-alive it answered, as after a crash.
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			_ = sess.Close(ended)
		}
	}

	if len(cfg.s3Endpoints) == 0 {
		dir := cfg.dir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "cutline-takeover-"); err != nil {
				return nil, err
			}
			be.closers = append(be.closers, func() { _ = os.RemoveAll(dir) })
		}
		for i := range cfg.k {
			b, err := fs.New(filepath.Join(dir, zoneName(i)), fs.Options{Name: zoneName(i), CreateRoot: true})
			if err != nil {
				return nil, err
			}
			be.closers = append(be.closers, func() { _ = b.Close() })
			be.zones = append(be.zones, b)
		}
		be.zonesDesc = fmt.Sprintf("%d filesystem buckets (objstore/fs) under %s", cfg.k, dir)
	} else {
		// One HTTP client for every zone, keeping a window of idle
		// connections per server (a writer has up to a window of PUTs in
		// flight per zone), so that connections are reused rather than
		// left in TIME_WAIT; its connections close when the demo ends.
		hc := s3.NewHTTPClient(cfg.window)
		be.closers = append(be.closers, hc.CloseIdleConnections)
		clients := make(map[string]*awss3.Client)
		var where []string
		for i, name := range cfg.s3Buckets {
			endpoint := cfg.s3Endpoints[0]
			if len(cfg.s3Endpoints) > 1 {
				endpoint = cfg.s3Endpoints[i]
			}
			client := clients[endpoint]
			if client == nil {
				client, err = s3.NewClient(ctx, s3.ClientConfig{
					Endpoint:   endpoint,
					Region:     cfg.s3Region,
					AccessKey:  cfg.s3AccessKey,
					SecretKey:  cfg.s3SecretKey,
					PathStyle:  true,
					HTTPClient: hc,
				})
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
			where = append(where, fmt.Sprintf("%s=%s/%s", zoneName(i), endpoint, name))
		}
		be.zonesDesc = fmt.Sprintf("%d S3 buckets (objstore/s3): %s", len(cfg.s3Buckets), strings.Join(where, " "))
	}
	return be, nil
}
