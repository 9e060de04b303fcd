package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
)

// etcdAuth is how the tool reaches etcd: over TLS with a CA of its own
// (ca) and a client certificate (cert, key), and as an etcd user (user,
// password). Each is optional; the password is never printed.
type etcdAuth struct {
	ca, cert, key  string
	user, password string
}

func (a *etcdAuth) register(fs *flag.FlagSet) {
	fs.StringVar(&a.ca, "etcd-ca", a.ca, "PEM CA that verifies etcd's server certificate; the connections to etcd are then TLS")
	fs.StringVar(&a.cert, "etcd-cert", a.cert, "PEM client certificate presented to etcd")
	fs.StringVar(&a.key, "etcd-key", a.key, "PEM private key of -etcd-cert")
	fs.StringVar(&a.user, "etcd-user", a.user, "etcd user to authenticate as")
	fs.StringVar(&a.password, "etcd-password", a.password, "password of -etcd-user (prefer CUTLINE_ETCD_PASSWORD; never printed)")
}

// dialConfig is how the flags reach etcd at endpoints. The first
// connection is waited for within timeout (-timeout): the tool gives up
// when the operator said, not when the client's default says.
func (a etcdAuth) dialConfig(endpoints []string, timeout time.Duration) etcdstore.DialConfig {
	return etcdstore.DialConfig{Endpoints: endpoints, CAFile: a.ca, CertFile: a.cert, KeyFile: a.key,
		Username: a.user, Password: a.password, DialTimeout: min(etcdstore.DefaultDialTimeout, timeout)}
}

// etcdFlags names the flag of each field of etcd.DialConfig.
var etcdFlags = map[string]string{"CAFile": "-etcd-ca", "CertFile": "-etcd-cert", "KeyFile": "-etcd-key",
	"Username": "-etcd-user", "Password": "-etcd-password", "DialTimeout": "-timeout"}

// etcdClient returns a client of etcd at endpoints, as the etcd flags
// say. etcd refuses a bad password at once, and an untrusted certificate
// at the client's first request at the latest.
func (c *cmd) etcdClient(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	cli, err := etcdstore.Dial(ctx, c.g.etcdAuth.dialConfig(endpoints, c.g.timeout))
	var ce *cutline.ConfigError
	switch {
	case err == nil:
		return cli, nil
	case errors.As(err, &ce):
		flag, ok := etcdFlags[ce.Field]
		if !ok {
			flag = "-etcd" // Endpoints, Endpoints[i]
		}
		return nil, usagef("bad %s: %v", flag, err)
	case errors.Is(err, metastore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return nil, unavailable(err)
	default:
		return nil, usagef("bad -etcd %q: %v", strings.Join(endpoints, ","), err)
	}
}
