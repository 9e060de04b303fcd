package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
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

// tls reports whether the flags ask for TLS connections to etcd.
func (a etcdAuth) tls() bool { return a.ca != "" || a.cert != "" }

// clientConfig is the etcd client's configuration for endpoints, or a
// usage error for flags that do not go together.
func (a etcdAuth) clientConfig(endpoints []string, timeout time.Duration) (clientv3.Config, error) {
	// The first connection is waited for, within -timeout: the tool gives
	// up when the operator said, not when the client's default says.
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: min(5*time.Second, timeout), Logger: zap.NewNop(),
		Username: a.user, Password: a.password}
	switch {
	case (a.cert == "") != (a.key == ""):
		return cfg, usagef("-etcd-cert and -etcd-key go together")
	case (a.user == "") != (a.password == ""):
		return cfg, usagef("-etcd-user and -etcd-password go together")
	}
	if !a.tls() {
		return cfg, nil
	}
	for _, e := range endpoints {
		// The etcd client talks plain text to an http:// endpoint
		// whatever TLS it is given.
		if strings.HasPrefix(e, "http://") {
			return cfg, usagef("bad -etcd endpoint %s with -etcd-ca or -etcd-cert: it is plain text; give https:// or host:port", e)
		}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.ca != "" {
		raw, err := os.ReadFile(a.ca)
		if err != nil {
			return cfg, usagef("bad -etcd-ca: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(raw) {
			return cfg, usagef("bad -etcd-ca %s: no PEM certificate in it", a.ca)
		}
	}
	if a.cert != "" {
		cert, err := tls.LoadX509KeyPair(a.cert, a.key)
		if err != nil {
			return cfg, usagef("bad -etcd-cert/-etcd-key: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	cfg.TLS = tc
	return cfg, nil
}

// etcdClient returns a client of etcd at endpoints, as the etcd flags
// say. etcd refuses a bad password or an untrusted certificate at the
// client's first request at the latest.
func (c *cmd) etcdClient(endpoints []string) (*clientv3.Client, error) {
	cfg, err := c.g.etcdAuth.clientConfig(endpoints, c.g.timeout)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ","), unavailable(err))
	}
	if err != nil {
		return nil, usagef("bad -etcd %q: %v", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}
