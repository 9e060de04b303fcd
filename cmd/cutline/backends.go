package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/s3"
)

// backends are the store and buckets of one invocation, built from the
// flags unless Env supplied them, and what to release at the end.
type backends struct {
	store   metastore.Store
	buckets []objstore.Bucket
	closers []func()
}

func (b *backends) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

func (c *cmd) be() *backends {
	if c.back == nil {
		c.back = &backends{store: c.env.Store, buckets: c.env.Buckets}
	}
	return c.back
}

// store returns the metastore: Env's, or etcd at -etcd. An etcd that does
// not answer is reported here, as unreachable.
func (c *cmd) store(ctx context.Context) (metastore.Store, error) {
	be := c.be()
	if be.store != nil {
		return be.store, nil
	}
	if c.g.etcd == "" {
		return nil, usagef("no metastore: give -etcd host:port[,host:port…]")
	}
	var endpoints []string
	for e := range strings.SplitSeq(c.g.etcd, ",") {
		if e = strings.TrimSpace(e); e == "" {
			return nil, usagef("bad -etcd %q: empty endpoint", c.g.etcd)
		}
		endpoints = append(endpoints, e)
	}
	cli, err := c.etcdClient(ctx, endpoints)
	if err != nil {
		return nil, err
	}
	be.closers = append(be.closers, func() { _ = cli.Close() })
	st, err := etcdstore.New(cli, etcdstore.Options{Root: c.g.etcdRoot})
	if err != nil {
		return nil, usagef("bad -etcd-root %q: %v", c.g.etcdRoot, err)
	}
	if _, err := st.Get(ctx, "cutline-ping"); err != nil && !errors.Is(err, metastore.ErrNotFound) {
		return nil, fmt.Errorf("etcd at %s: %w", c.g.etcd, unavailable(err))
	}
	be.store = st
	return st, nil
}

// unavailable makes a context deadline read as an unreachable backend.
func unavailable(err error) error {
	if errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, objstore.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", metastore.ErrUnavailable, err)
}

// minter returns an epoch.Minter over the store at -root.
func (c *cmd) minter(ctx context.Context) (*epoch.Minter, error) {
	st, err := c.store(ctx)
	if err != nil {
		return nil, err
	}
	m, err := epoch.NewMinter(st, epoch.Options{Root: c.g.root, Identity: "cutline"})
	if err != nil {
		return nil, usagef("bad -root %q: %v", c.g.root, err)
	}
	return m, nil
}

// buckets returns the zones' buckets: Env's, or those of -fs-zones, the
// S3 flags and the Azure flags, in that order.
func (c *cmd) buckets(ctx context.Context) ([]objstore.Bucket, error) {
	be := c.be()
	if be.buckets != nil {
		return be.buckets, nil
	}
	var out []objstore.Bucket
	if c.g.fsZones != "" {
		for spec := range strings.SplitSeq(c.g.fsZones, ",") {
			name, dir := splitNamed(spec)
			if dir == "" {
				return nil, usagef("bad -fs-zones %q: empty zone", c.g.fsZones)
			}
			// A directory that is not there is a mistake on the command
			// line, not a zone that did not answer.
			switch st, err := os.Stat(dir); {
			case errors.Is(err, iofs.ErrNotExist):
				return nil, usagef("bad -fs-zones: zone directory %s does not exist", dir)
			case err == nil && !st.IsDir():
				return nil, usagef("bad -fs-zones: %s is not a directory", dir)
			case err != nil:
				return nil, fmt.Errorf("zone directory %s: %w (%v)", dir, objstore.ErrUnavailable, err)
			}
			if name == "" {
				name = filepath.Base(filepath.Clean(dir))
			}
			b, err := fs.New(dir, fs.Options{Name: name})
			if err != nil {
				return nil, usagef("bad -fs-zones zone %q: %v", spec, err)
			}
			be.closers = append(be.closers, func() { _ = b.Close() })
			out = append(out, b)
		}
	}
	if c.g.s3.buckets != "" || c.g.s3.endpoint != "" {
		bs, err := c.s3Buckets(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	if c.g.azure.given() {
		bs, err := c.azureBuckets(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	if len(out) == 0 {
		return nil, usagef("no zones: give -fs-zones dir,dir,…, -s3-endpoint and -s3-buckets, or -azure-url and -azure-containers")
	}
	if _, err := chain.NewZones(out...); err != nil {
		return nil, usagef("bad zones: %v", err)
	}
	be.buckets = out
	return out, nil
}

func (c *cmd) s3Buckets(ctx context.Context) ([]objstore.Bucket, error) {
	f := c.g.s3
	if f.buckets == "" || f.endpoint == "" {
		return nil, usagef("S3 zones need both -s3-endpoint and -s3-buckets")
	}
	endpoints := strings.Split(f.endpoint, ",")
	specs := strings.Split(f.buckets, ",")
	if len(endpoints) != 1 && len(endpoints) != len(specs) {
		return nil, usagef("-s3-endpoint lists %d endpoints for %d buckets: give one, or one per bucket", len(endpoints), len(specs))
	}
	access, secret := f.accessKey, f.secretKey
	if access == "" {
		access = os.Getenv("AWS_ACCESS_KEY_ID")
	}
	if secret == "" {
		secret = os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	hc := s3.NewHTTPClient(16)
	c.be().closers = append(c.be().closers, hc.CloseIdleConnections)
	var out []objstore.Bucket
	for i, spec := range specs {
		name, bucket := splitNamed(spec)
		endpoint := endpoints[0]
		if len(endpoints) > 1 {
			endpoint = endpoints[i]
		}
		client, err := s3.NewClient(ctx, s3.ClientConfig{Endpoint: endpoint, Region: f.region, AccessKey: access, SecretKey: secret, PathStyle: true, HTTPClient: hc})
		if err != nil {
			return nil, usagef("bad S3 zone %q at %s: %v", spec, endpoint, err)
		}
		b, err := s3.New(client, bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: name}})
		if err != nil {
			return nil, usagef("bad S3 zone %q: %v", spec, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// splitNamed splits "name=value" (or "value": no name).
func splitNamed(spec string) (name, value string) {
	spec = strings.TrimSpace(spec)
	if n, v, ok := strings.Cut(spec, "="); ok {
		return n, v
	}
	return "", spec
}

// zonesOf returns the configured zones and the buckets of rec's epoch in
// its zone order. An epoch naming a zone that is not configured is a usage
// error: the tool must see every zone to tell a slot's state.
func (c *cmd) zonesOf(ctx context.Context, rec *epoch.Record) (chain.Zones, []objstore.Bucket, error) {
	bs, err := c.buckets(ctx)
	if err != nil {
		return chain.Zones{}, nil, err
	}
	zones, err := chain.NewZones(bs...)
	if err != nil {
		return chain.Zones{}, nil, usagef("bad zones: %v", err)
	}
	resolved, err := zones.Resolve(rec.Constants.Buckets)
	if err != nil {
		return chain.Zones{}, nil, usagef("epoch %s/%d lives in zones %s, configured are %s: %v",
			rec.Star, rec.Epoch, strings.Join(rec.Constants.Buckets, ","), strings.Join(chain.Names(bs...), ","), err)
	}
	return zones, resolved, nil
}
